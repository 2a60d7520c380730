/* torus-train.c: the training program. Reads top to bottom like the recipe:
 * configure, build the model, initialise it, then for every epoch set the
 * batch from the schedule and run steps of
 *   data -> forward -> backward (+ gradient all-reduce) -> SGD/LARS -> log.
 *
 * One process, or one rank of many (srun --mpi=pmix, mpirun): the two
 * places where ranks meet are the data source (trainer/train/ttrain_source.h:
 * each rank reads its slice of the epoch) and the gradient exchange
 * (trainer/train/ttrain_exchange.h, one interface for gradients in host or
 * device memory: the engine's per-layer gradient hook starts the
 * all-reduce of every bucket that backward has completed;
 * ttrain_exchange_wait() waits for the rest before the update). With one
 * rank both reduce to the single-process path.
 */
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "config.h"
#include "trainer/backends/tbackends.h"
#include "trainer/comm/tcomm.h"
#include "trainer/engine/rng.h"
#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"
#include "trainer/optim/topt_loss_scale.h"
#include "trainer/train/ttrain_bn_stash.h"
#include "trainer/train/ttrain_checkpoint.h"
#include "trainer/train/ttrain_ckpt_beat.h"
#include "trainer/train/ttrain_device.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_exchange.h"
#include "trainer/train/ttrain_input.h"
#include "trainer/train/ttrain_options.h"
#include "trainer/train/ttrain_source.h"
#include "trainer/train/ttrain_state_hash.h"
#include "trainer/train/ttrain_step_graph.h"
#include "trainer/train/ttrain_tdata_source.h"
#include "trainer/train/ttrain_test_hooks.h"
#include "trainer/train/ttrain_trace.h"

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* --trace: the step timeline (ttrain_trace.h); NULL when off, and every
 * ttrain_trace_* call then does nothing. */
static ttrain_trace *_trace;

/* SIGUSR1/SIGTERM ask for a checkpoint at the next step boundary. */
static volatile sig_atomic_t _stop;

static void _on_signal(int sig)
{
    _stop = sig;
}

/* The grads arena in memory that this node's ranks share: the buckets of
 * rows (torus2d) or groups (hier-rs) that sit on one node are then summed
 * where they lie, with no copies (libtcomm, shared_grads.c). Collective:
 * every rank compiles the same model and asks for the same size. */
static void *_shared_grads(void *ctx, size_t bytes)
{
    void *p;
    if (tcomm_shared_alloc(ctx, bytes, &p)) {
        /* Private memory works, only slower: the buckets get packed. */
        fprintf(stderr,
                "torus-train: warning: %s; gradients stay in this rank's own "
                "memory\n",
                torus_error_msg());
        return NULL;
    }
    return p;
}

/* A signal reaches ranks at different moments: every rank stops at the
 * first step boundary where any rank has seen one, so none is left
 * waiting in a collective. Returns the signal (0: go on). */
static int _agree_stop(ttrain_exchange *ex)
{
    double v = _stop;
    if (ttrain_exchange_max(ex, &v))
        return _stop ? (int)_stop : SIGTERM;
    return (int)v;
}

/* Evaluation on the test split: the BN statistics are averaged first,
 * every rank then evaluates its slice with the same weights and statistics
 * (checked), and the counts are summed: c = top-1 hits, top-5 hits,
 * images, loss sum. Errors name what failed in torus_error_msg(). */
static int _evaluate(ttrain_exchange *ex, ttrain_source *src, teng_net *net,
                     int batch, double c[4])
{
    c[0] = c[1] = c[2] = c[3] = 0;
    if (ttrain_exchange_stats_average(ex, net))
        return torus_error_prefix(-1, "BN statistics");
    if (ttrain_exchange_check_agreement(ex, net) ||
        ttrain_tdata_eval(src, net, batch, c))
        return -1;
    if (ttrain_exchange_sum(ex, c, 4))
        return torus_error_prefix(-1, "summing the counts");
    return 0;
}

/* The resolved configuration as text, stored in every checkpoint. */
static char *_plan_text(const ttrain_config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    ttrain_print_plan(cfg, f);
    fclose(f);
    return text;
}

/* One JSON object per progress line, appended to --metrics. */
static void _metrics(FILE *f, int epoch, long step, long gstep, double ips,
                     double loss, double lr, int gbatch, double data_share,
                     double comm_share)
{
    if (!f)
        return;
    /* JSON has no NaN: a window of skipped steps has a null loss */
    char l[32] = "null";
    if (isfinite(loss))
        snprintf(l, sizeof(l), "%.17g", loss);
    fprintf(f,
            "{\"epoch\":%d,\"step\":%ld,\"global_step\":%ld,"
            "\"images_per_s\":%.3f,\"loss\":%s,\"lr\":%.17g,"
            "\"global_batch\":%d,\"data_wait\":%.4f,\"comm_wait\":%.4f}\n",
            epoch, step, gstep, ips, l, lr, gbatch, data_share, comm_share);
    fflush(f);
}

/* Set once several ranks run: a rank that fails takes the job down
 * rather than leave its peers waiting in a collective. */
static tcomm_t *_job;

static int _fail(const char *what, const char *msg)
{
    fprintf(stderr, "torus-train: %s: %s\n", what, msg);
    if (_job) {
        fflush(NULL);
        tcomm_abort(_job, TTRAIN_EXIT_FAIL, msg);
    }
    return TTRAIN_EXIT_FAIL;
}

/* A bad option or setting (ttrain_config_*): said on every rank, which
 * all exit with rc; no rank aborts the others. */
static int _usage_error(int rc)
{
    fprintf(stderr, "torus-train: %s\n", torus_error_msg());
    return rc;
}

/* ---- the run, phase by phase ----
 * Each phase returns _GO to go on, or the exit status of the program. An
 * early exit leaves the freeing to the operating system, as a failed run
 * ends the process anyway. */
#define _GO (-1)

typedef struct {
    ttrain_config cfg;
    tcomm_t *comm;
    tcomm_info info;
    tcomm_algo algo;
    ttrain_source src;
    int have_src;  /* a packed dataset, not the synthetic pool */
    int max_local; /* the largest local batch of the schedule */
    teng_backend *bk;
    int device;          /* a GPU backend's device, else -1 */
    size_t dev_peak;     /* the most device memory seen in use */
    int u8;              /* 8-bit input batches (--input) */
    ttrain_input in;     /* each step's batch, maybe fetched ahead */
    char device_why[64]; /* why that one (ttrain_device_pick) */
    teng_net *net;
    topt_sgd opt;
    /* loss scaling (--loss-scale, resolved for the backend) */
    topt_loss_scale_mode ls_mode;
    topt_loss_scale_config ls_cfg;
    topt_loss_scale_state ls;
    ttrain_exchange *ex;   /* the gradient exchange, host or device */
    FILE *mf;              /* --metrics, rank 0 only */
    char *plan;            /* the configuration text stored in checkpoints */
    ttrain_ckpt_meta meta; /* what checkpoints record and resumes compare */
    ttrain_progress at;    /* where training (re)starts, then the next step */
    ttrain_bn_stash bn;    /* this rank's own BN statistics at a checkpoint */
    /* the training loop */
    long gstep;
    double t_start, images, best, best_at;
    int stopping, skipped;
    /* the step as a CUDA graph (train/ttrain_step_graph.h) */
    ttrain_sg sg;
    teng_graph *graph;
    unsigned restores; /* checkpoints loaded (the graph key's generation) */
    /* the device step (teng_net_dstep_*): the device decides skips and
     * the loss scale; the host reads its state lazily (_dstep_sync) */
    int dstep;
    int upd_eager;          /* this step's update is the caller's to queue */
    teng_dstep_state dseen; /* as last read */
    int reached;            /* --target-top1 reached: training ends */
    long eval_step;         /* global step of the last evaluation (-1: none) */
} _run;

/* A progress window: what the next progress line averages over. */
typedef struct {
    double t0, data_s, loss_sum;
    int n; /* steps updated (not skipped) */
} _window;

/* Options, config file and the algorithm name. */
static int _parse(_run *r, int argc, char **argv)
{
    ttrain_config_defaults(&r->cfg);
    int rc = ttrain_config_parse(&r->cfg, argc, argv);
    if (rc == TTRAIN_PARSE_HELP) {
        ttrain_usage(stdout);
        return TTRAIN_EXIT_OK;
    }
    if (rc == TTRAIN_PARSE_VERSION) {
        printf("torus-train %s (backends: %s)\n", PACKAGE_VERSION,
               tbackends_list());
        return TTRAIN_EXIT_OK;
    }
    if (rc)
        return _usage_error(rc);
    int algo = tcomm_algo_parse(r->cfg.algo);
    if (algo < 0) {
        fprintf(stderr,
                "torus-train: --algo: unknown algorithm '%s' (flat, ring, "
                "hier, hier-rs, torus2d, hybrid)\n",
                r->cfg.algo);
        return TTRAIN_EXIT_USAGE;
    }
    r->algo = (tcomm_algo)algo;
    return _GO;
}

/* Ranks: PMIx bootstrap when launched by srun/mpirun, else one process
 * (tcomm's singleton: no MPI, nothing changes). */
static int _bootstrap(_run *r)
{
    r->info = (tcomm_info){.size = 1};
    if (r->cfg.dry_run)
        return _GO;
    /* The timeout as the options resolved it (--comm-timeout, then
     * TCOMM_TIMEOUT, then 30 s); libtcomm's option beats its environment. */
    tcomm_options to = {.timeout_s = r->cfg.comm_timeout};
    if (tcomm_init(&to, &r->comm))
        return _fail("bootstrap", torus_error_msg());
    tcomm_info_get(r->comm, &r->info);
    r->cfg.world = r->info.size;
    if (r->info.size > 1)
        _job = r->comm;
    /* One progress report per job: rank 0's. */
    if (r->info.rank != 0 && !freopen("/dev/null", "w", stdout))
        return _fail("stdout", "cannot redirect to /dev/null");
    return _GO;
}

/* Data: a packed dataset fixes the epoch length, so it is opened before
 * the schedule is validated; then the largest local batch. */
static int _open_data(_run *r)
{
    ttrain_config *cfg = &r->cfg;
    if (cfg->data[0] && !cfg->synthetic) {
        long n = 0;
        if (ttrain_tdata_open(&r->src, cfg->data, &cfg->model, r->info.rank,
                              cfg->world, cfg->seed, &n)) {
            _fail("--data", torus_error_msg());
            return TTRAIN_EXIT_USAGE;
        }
        cfg->sched.dataset_size = n;
        r->have_src = 1;
    }
    int rc = ttrain_config_validate(cfg);
    if (rc)
        return _usage_error(rc);
    if (cfg->dry_run) {
        ttrain_print_plan(cfg, stdout);
        return TTRAIN_EXIT_OK;
    }
    for (int i = 0; i < cfg->sched.nstages; i++)
        if (cfg->sched.stage[i].global_batch / cfg->world > r->max_local)
            r->max_local = cfg->sched.stage[i].global_batch / cfg->world;
    return _GO;
}

/* --decode-threads, or auto: 1 beside a CPU backend, whose threads use
 * the cores; beside a GPU the decoding is the host's work: every core this
 * process may use but 2 (the step's thread and the loader's reader). */
static int _decode_threads(const _run *r)
{
    cpu_set_t set;
    if (r->cfg.decode_threads)
        return r->cfg.decode_threads;
    if (r->device < 0 || sched_getaffinity(0, sizeof(set), &set))
        return 1;
    int n = CPU_COUNT(&set) - 2;
    return n < 1 ? 1 : n > 64 ? 64 : n;
}

/* The banner: model, memory and backend; with ranks, the exchange. */
static void _print_setup(const _run *r)
{
    printf("torus-train: %s, %zu parameters, %.0f MB of activations at local "
           "batch %d, backend %s with %d threads\n",
           tmodel_name(r->cfg.model.kind), teng_net_param_count(r->net),
           teng_net_acts_bytes(r->net) / 1e6, r->max_local,
           teng_backend_name(r->bk), r->cfg.threads);
    if (r->device >= 0)
        printf("torus-train: rank 0 on GPU %d (%s) of %d visible\n", r->device,
               r->device_why, tbackends_gpus(r->cfg.backend));
    if (r->device >= 0 && tbackends_module_versions())
        printf("torus-train: cuda module %s: %s\n", tbackends_module_path(),
               tbackends_module_versions());
    if (r->device >= 0)
        printf("torus-train: step graphs %s\n", ttrain_sg_state(&r->sg));
    if (r->have_src)
        printf("torus-train: %d decode thread(s) for the training images\n",
               _decode_threads(r));
    if (r->u8)
        printf("torus-train: 8-bit input batches, normalised and mirrored %s\n",
               teng_backend_has_input_u8(r->bk)
                   ? "on the device (the next batch copied during the step)"
                   : "on the host");
    if (r->ls_mode == TOPT_LOSS_SCALE_DYNAMIC)
        printf("torus-train: dynamic loss scale from %g (halved on inf/nan, "
               "doubled after %ld clean steps, in [%g, %g])\n",
               r->ls.scale, r->ls_cfg.interval, r->ls_cfg.min_scale,
               r->ls_cfg.max_scale);
    else if (r->ls_mode == TOPT_LOSS_SCALE_STATIC)
        printf("torus-train: static loss scale %g\n", r->ls.scale);
    ttrain_exchange_describe(r->ex, &r->info, stdout);
}

/* --loss-scale for this backend: auto is dynamic when any param's
 * working copy is fp16/bf16 (the backend computes in it), off in fp32.
 * The text was checked by ttrain_config_validate. */
static void _loss_scale_open(_run *r)
{
    topt_loss_scale_parse(r->cfg.loss_scale, &r->ls_mode, &r->ls_cfg);
    if (r->ls_mode == TOPT_LOSS_SCALE_AUTO) {
        r->ls_mode = TOPT_LOSS_SCALE_OFF;
        for (int i = 0; i < teng_net_nparams(r->net); i++)
            if (teng_net_param(r->net, i)->dtype != TENG_F32)
                r->ls_mode = TOPT_LOSS_SCALE_DYNAMIC;
    }
    if (r->ls_mode == TOPT_LOSS_SCALE_OFF)
        r->ls_cfg.init = r->ls_cfg.min_scale = r->ls_cfg.max_scale = 1;
    topt_loss_scale_init(&r->ls, &r->ls_cfg);
}

/* A GPU backend's device: this rank's by ttrain_device_pick's rule (the
 * plugin's TORUS_LOCAL_GPU, the only visible one, or the local rank's). */
static int _pick_device(_run *r, int *device)
{
    ttrain_device_in in = {.rank = r->info.rank,
                           .local_rank = r->info.local_rank,
                           .local_size = r->info.local_size,
                           .visible = tbackends_gpus(r->cfg.backend)};
    ttrain_device_getenv(&in);
    *device = 0;
    r->device = -1;
    if (in.visible < 1) /* a CPU backend; a GPU one reports its own error */
        return 0;
    if (in.local_size < 1) /* one process without PMIx */
        in.local_size = 1, in.local_rank = 0;
    if (ttrain_device_pick(&in, device, r->device_why, sizeof(r->device_why)))
        return -1;
    r->device = *device;
    return 0;
}

/* Whether the step may be recorded as a CUDA graph (ttrain_step_graph.h): the
 * backend's graphs, TCUDA_GRAPH, an exchange with no host work in the
 * step (one rank, or the NCCL path), no dropout. */
static void _graph_open(_run *r)
{
    int dropout = 0;
    teng_layer_info l;
    for (int i = 0; !teng_net_layer_info(r->net, i, &l); i++)
        dropout |= l.kind == TENG_L_DROPOUT;
    int host_ex = !ttrain_exchange_capturable(r->ex);
    ttrain_sg_init(&r->sg, getenv("TCUDA_GRAPH"),
                   teng_net_graph_supported(r->net), host_ex, dropout);
}

/* Model, memory and optimizer: everything the steps use is allocated
 * here, then the gradient exchange, the synthetic pool and --metrics. */
static int _build_net(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    teng_backend_opts bopts = {.threads = cfg->threads};
    if (_pick_device(r, &bopts.device) ||
        tbackends_open(cfg->backend, &bopts, &r->bk))
        return _fail("backend", torus_error_msg());
    if (teng_net_create(&r->net))
        return _fail("model", torus_error_msg());
    if (cfg->world > 1)
        teng_net_set_grads_alloc(r->net, _shared_grads, r->comm);
    if (tmodel_build(r->net, &cfg->model) < 0 ||
        teng_net_compile(r->net, r->bk, r->max_local) ||
        tmodel_init(r->net, cfg->seed))
        return _fail("model", torus_error_msg());
    if (topt_sgd_init(&r->opt, r->net, &cfg->opt))
        return _fail("optimizer", torus_error_msg());
    _loss_scale_open(r);
    /* Dropout masks hash (seed, step, layer, element): the seed must also
     * carry the rank once there are several, or ranks drop alike. */
    teng_net_set_dropout_seed(
        r->net, teng_hash64((cfg->seed ^ 0xd2095e7dULL) +
                            0x9e3779b97f4a7c15ULL * (uint64_t)r->info.rank));
    if (cfg->trace[0] && ttrain_trace_open(cfg->trace, r->comm, r->info.rank,
                                           cfg->world, &_trace))
        return _fail("--trace", torus_error_msg());
    ttrain_exchange_config xc = {.comm = r->comm,
                                 .rank = r->info.rank,
                                 .world = cfg->world,
                                 .algo = r->algo,
                                 .wire =
                                     (tcomm_wire)tcomm_wire_parse(cfg->wire),
                                 .bucket_kb = cfg->bucket_kb,
                                 .trace = _trace};
    if (ttrain_exchange_open(&xc, r->net, r->bk, &r->ex))
        return _fail("gradient exchange", torus_error_msg());
    r->in = (ttrain_input){
        .src = &r->src, .net = r->net, .trace = _trace, .rank = r->info.rank};
    _graph_open(r);
    if (cfg->verbose)
        teng_net_summary(r->net, stderr);
    /* --input: 8-bit batches where the backend has the path (auto), or
     * where asked (the engine's host path: the same values). */
    r->u8 = !strcmp(cfg->input, "u8") ||
            (!strcmp(cfg->input, "auto") && teng_backend_has_input_u8(r->bk) &&
             (r->have_src || cfg->model.in_channels == 3));
    if (r->u8 && r->have_src)
        ttrain_tdata_use_u8(&r->src, r->bk);
    if (r->have_src)
        ttrain_tdata_set_decode_threads(&r->src, _decode_threads(r));
    _print_setup(r);
    if (!r->have_src &&
        ttrain_synthetic_open(&r->src, &cfg->model, r->max_local, cfg->seed,
                              r->info.rank, cfg->world))
        return _fail("data", "out of memory for the synthetic pool");
    /* Synthetic 8-bit batches take the production input path. */
    if (r->u8 && !r->have_src &&
        ttrain_synthetic_use_u8(&r->src, &cfg->model, r->bk, cfg->seed))
        return _fail("data", torus_error_msg());
    int rank0 = r->info.rank == 0;
    r->mf = cfg->metrics[0] && rank0 ? fopen(cfg->metrics, "a") : NULL;
    if (cfg->metrics[0] && rank0 && !r->mf)
        return _fail("--metrics", "cannot open the file for appending");
    return _GO;
}

/* --eval-only: evaluate the checkpoint just loaded (rc: the loader's,
 * 1 when there was none), then exit. */
static int _eval_only(_run *r, int rc, const char *path)
{
    double c[4], t0 = _now();
    if (rc > 0) {
        TORUS_FAIL(TTRAIN_ENOCKPT, "no checkpoint in %s", r->cfg.ckpt_dir);
        return _fail("--eval-only", torus_error_msg());
    }
    if (teng_net_set_batch(r->net, r->max_local))
        return _fail("evaluation", torus_error_msg());
    if (_evaluate(r->ex, &r->src, r->net, r->max_local, c))
        return _fail("evaluation", torus_error_msg());
    printf("%s (epoch %d, global step %ld) test: top-1 %.2f%% top-5 "
           "%.2f%% loss %.4f (%.0f images, %.1f s)\n",
           path, r->at.epoch, r->at.global_step, 100 * c[0] / c[2],
           100 * c[1] / c[2], c[3] / c[2], c[2], _now() - t0);
    r->src.close(&r->src);
    if (ttrain_trace_close(_trace, r->comm, NULL)) /* no steps: names only */
        return _fail("--trace", torus_error_msg());
    tcomm_finalize(r->comm);
    return TTRAIN_EXIT_OK;
}

/* ---- checkpoints: what they record, which one every rank resumes from
 * (rank 0 picks, the others follow), and rank 0's write while the others
 * wait ---- */

/* What checkpoints record of this run (ttrain_ckpt_meta_fill), and a
 * fresh run id, which a resume replaces by the checkpoint's: rank 0's on
 * every rank, as each rank names its own files by it (ttrain_bn_stash.h). */
static int _meta(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    ttrain_ckpt_new_run(r->meta.run);
    if (cfg->world > 1 &&
        tcomm_bcast_bytes(r->comm, r->meta.run, sizeof(r->meta.run), 0))
        return _fail("checkpoint", torus_error_msg());
    int rc = ttrain_ckpt_meta_fill(
        &r->meta, &cfg->model, &cfg->sched, cfg->world, cfg->wire,
        topt_loss_scale_mode_name(r->ls_mode), r->have_src ? cfg->data : "");
    if (rc)
        return _fail(rc == TTRAIN_CKPT_ECONFIG ? "checkpoint" : "--data",
                     torus_error_msg());
    return _GO;
}

/* Rank 0 has printed why it found nothing to load (the message is still
 * this thread's torus_error_msg()): end the job. */
static int _follow_rank0_failure(_run *r, const char *what)
{
    if (r->info.rank == 0) {
        fflush(NULL);
        if (_job)
            tcomm_abort(_job, TTRAIN_EXIT_FAIL, torus_error_msg());
        return TTRAIN_EXIT_FAIL;
    }
    TORUS_FAIL(TTRAIN_ENOCKPT, "rank %d: rank 0 found no checkpoint to use",
               r->info.rank);
    return _fail(what, torus_error_msg());
}

/* A dynamic loss scale goes on from the checkpoint's when that was dynamic
 * too; its values are checked against this run's bounds (a file is
 * hostile). Any other pairing starts afresh (ttrain_ckpt_check's note). */
static int _restore_loss_scale(_run *r, const ttrain_ckpt_meta *got,
                               const char *path)
{
    const topt_loss_scale_state *s = &r->at.ls;
    long clean = s->clean;
    if (r->ls_mode != TOPT_LOSS_SCALE_DYNAMIC ||
        strcmp(got->loss_scale, "dynamic"))
        return 0;
    /* A shorter growth interval than the checkpoint's: the scale grows
     * at this run's next clean step. */
    if (clean >= r->ls_cfg.interval)
        clean = r->ls_cfg.interval - 1;
    if (topt_loss_scale_restore(&r->ls, &r->ls_cfg, s->scale, clean,
                                s->overflows))
        return torus_error_prefix(-1, "rank %d: %s", r->info.rank, path);
    return 0;
}

/* --resume, --eval-only: rank 0 picks the newest checkpoint that loads
 * and broadcasts its name; every other rank loads exactly that file or
 * ends the job: no rank ever continues alone from another step. *found:
 * 0 when the directory holds none. path: the file loaded. */
static int _load_agreed(_run *r, char *path, size_t n, int *found)
{
    const ttrain_config *cfg = &r->cfg;
    const char *what = cfg->eval_only ? "--eval-only" : "--resume";
    struct {
        int32_t rc;
        char name[100];
    } pick = {0};
    char note[1024] = "";
    ttrain_ckpt_meta got;
    if (r->info.rank == 0) {
        pick.rc = ttrain_ckpt_load_latest(
            cfg->ckpt_dir, &r->meta, cfg->eval_only, r->net, &r->opt, &r->at,
            &got, pick.name, sizeof(pick.name), note, sizeof(note));
        /* Said before the others hear of it, so it is never cut off. */
        if (pick.rc < 0)
            fprintf(stderr, "torus-train: %s: %s\n", what, torus_error_msg());
    }
    if (cfg->world > 1 && tcomm_bcast_bytes(r->comm, &pick, sizeof(pick), 0))
        return _fail(what, torus_error_msg());
    if (pick.rc < 0)
        return _follow_rank0_failure(r, what);
    *found = pick.rc == 0;
    if (!*found)
        return _GO;
    pick.name[sizeof(pick.name) - 1] = '\0';
    snprintf(path, n, "%s/%s", cfg->ckpt_dir, pick.name);
    if (r->info.rank != 0 &&
        ttrain_ckpt_load(path, &r->meta, cfg->eval_only, r->net, &r->opt,
                         &r->at, &got, note, sizeof(note))) {
        /* The boundary's own sentence around the loader's reason. */
        char msg[TORUS_ERROR_LEN + 256];
        snprintf(msg, sizeof(msg),
                 "rank %d cannot load %s, the checkpoint rank 0 chose: %s "
                 "(every rank must see the same --checkpoint-dir)",
                 r->info.rank, path, torus_error_msg());
        return _fail(what, msg);
    }
    if (note[0] && r->info.rank == 0)
        fprintf(stderr, "torus-train: note: %s\n", note);
    memcpy(r->meta.run, got.run, sizeof(got.run)); /* the run goes on */
    if (!cfg->eval_only && _restore_loss_scale(r, &got, path))
        return _fail(what, torus_error_msg());
    if (!cfg->eval_only && ttrain_exchange_check_agreement(r->ex, r->net))
        return _fail(what, torus_error_msg());
    return _GO;
}

/* Where to start: afresh, or from the newest checkpoint (--resume), or
 * only evaluate it (--eval-only). Then the signals that ask for a stop. */
/* After the ranks agreed on the checkpoint's averaged statistics: each
 * rank takes back its own, saved at the stop, when they fit this step and
 * number of ranks; otherwise it goes on from the average (a damaged file
 * is said). */
static void _restore_own_stats(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    if (cfg->world > 1 &&
        ttrain_bn_stash_load(&r->bn, r->net, cfg->ckpt_dir, r->meta.run,
                             r->info.rank, cfg->world, r->at.global_step) < 0)
        fprintf(stderr,
                "torus-train: warning: rank %d: %s; it goes on from the "
                "ranks' average BN statistics\n",
                r->info.rank, torus_error_msg());
}

static int _restore(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    int rc, found = 0;
    r->plan = _plan_text(cfg);
    if ((rc = _meta(r)) != _GO)
        return rc;
    if (cfg->resume || cfg->eval_only) {
        char path[1100];
        if ((rc = _load_agreed(r, path, sizeof(path), &found)) != _GO)
            return rc;
        if (cfg->eval_only)
            return _eval_only(r, !found, path);
        if (found) {
            if (r->src.seek(&r->src, r->at.samples))
                return _fail("--resume", torus_error_msg());
            teng_net_set_dropout_step(r->net, r->at.dropout_step);
            _restore_own_stats(r);
            r->restores++; /* a step graph recorded before is stale */
            printf("torus-train: resumed from %s at epoch %d step %ld "
                   "(global step %ld)\n",
                   path, r->at.epoch, r->at.step, r->at.global_step);
            if (r->ls_mode == TOPT_LOSS_SCALE_DYNAMIC)
                printf("torus-train: loss scale %g, %ld clean steps, %ld "
                       "overflows so far\n",
                       r->ls.scale, r->ls.clean, r->ls.overflows);
        } else {
            printf("torus-train: no checkpoint in %s, starting afresh\n",
                   cfg->ckpt_dir);
        }
    }
    /* A write of this run that a crash cut short left its temporary file;
     * a fresh run id has none. */
    int stale = found && r->info.rank == 0
                    ? ttrain_ckpt_clean(cfg->ckpt_dir, r->meta.run)
                    : 0;
    if (stale)
        fprintf(stderr,
                "torus-train: removed %d unfinished checkpoint file(s) of "
                "run %s\n",
                stale, r->meta.run);
    struct sigaction sa = {.sa_handler = _on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    tcomm_startup_done(r->comm);
    return _GO;
}

/* Rank 0's write (ttrain_ckpt_beat_write's callback): a failure is said
 * before the others hear of it and end the job. */
static int _save(void *arg)
{
    _run *r = arg;
    const ttrain_config *cfg = &r->cfg;
    ttrain_test_sleep("ckpt", 0, r->at.global_step);
    int rc = ttrain_ckpt_save(cfg->ckpt_dir, cfg->keep, 0, &r->meta, r->net,
                              &r->opt, &r->at, r->plan ? r->plan : "");
    if (rc && cfg->world > 1)
        fprintf(stderr, "torus-train: checkpoint: %s\n", torus_error_msg());
    return rc;
}

/* Only rank 0 writes, while the others wait for it (ttrain_ckpt_beat.h). */
static int _write_or_wait(_run *r)
{
    ttrain_ckpt_beat b = {.comm = r->comm,
                          .rank = r->info.rank,
                          .world = r->cfg.world,
                          .comm_timeout = r->cfg.comm_timeout,
                          .ckpt_timeout = r->cfg.ckpt_timeout,
                          .fail = _fail};
    if (r->info.rank != 0)
        return ttrain_ckpt_beat_wait(&b)
                   ? _fail("checkpoint", torus_error_msg())
                   : _GO;
    if (!ttrain_ckpt_beat_write(&b, _save, r))
        return _GO;
    if (r->cfg.world > 1)
        return _follow_rank0_failure(r, "checkpoint");
    return _fail("checkpoint", torus_error_msg());
}

/* Step part 1: this step's batch into the input tensor (the one fetched
 * and staged during the previous step, if any) and its labels. */
static int _step_input(_run *r, int epoch, long step, int lbatch, _window *w)
{
    if (ttrain_input_step(&r->in, epoch, step, lbatch, &w->data_s))
        return _fail("data", torus_error_msg());
    return _GO;
}

/* With 8-bit batches, the next step's batch is fetched and its copy
 * started once this step's backward is queued, so the copy overlaps the
 * rest of the step; only when that step is sure to come with the same
 * batch (the epoch goes on; no --max-steps or signal ends the run first).
 * A checkpoint counts the batch as not served (_checkpoint). */
static int _prefetch(_run *r, int epoch, long step, long steps, int lbatch,
                     _window *w)
{
    const ttrain_config *cfg = &r->cfg;
    if (!r->u8 || step + 1 >= steps || _stop ||
        (cfg->max_steps && r->gstep + 1 >= cfg->max_steps))
        return _GO;
    if (ttrain_input_ahead(&r->in, epoch, step + 1, lbatch, &w->data_s))
        return _fail("data", torus_error_msg());
    return _GO;
}

/* Step parts 2-3 as calls: forward and backward (the gradient hook starts
 * the all-reduce of finished buckets while backward goes on). */
static int _fwd_bwd(_run *r)
{
    ttrain_trace_begin(_trace, "forward");
    if (teng_net_forward(r->net, 1))
        return -1;
    ttrain_trace_end(_trace);
    ttrain_trace_begin(_trace, "backward");
    if (teng_net_backward(r->net))
        return -1;
    ttrain_trace_end(_trace);
    return 0;
}

/* Records parts 2-3 and the exchange's end as a step graph. Every rank
 * takes the same decision (they must all launch the same collectives):
 * a failure on any rank leaves every rank eager for good, reported once.
 * Returns 1 recorded, 0 not (run eagerly), -1 error. */
static int _graph_record(_run *r)
{
    teng_graph *g = NULL;
    char why[256] = "on another rank";
    int bad = teng_net_graph_begin(r->net) != 0;
    if (!bad) {
        bad = _fwd_bwd(r) || ttrain_exchange_finish_device(r->ex) ||
              (r->sg.update && topt_sgd_dstep(&r->opt, 0, TENG_DSTEP_QUEUE));
        bad |= teng_net_graph_end(r->net, &g) != 0; /* ends it in any case */
    }
    if (bad) {
        snprintf(why, sizeof why, "%s", torus_error_msg());
        teng_net_graph_free(r->net, g);
        g = NULL;
        ttrain_exchange_abandon(r->ex);
    }
    double v = bad;
    if (r->cfg.world > 1 && tcomm_max_double(r->comm, &v))
        return _fail("step graph", torus_error_msg()), -1;
    if (v != 0.0 && g) {
        teng_net_graph_free(r->net, g);
        g = NULL;
    }
    if (ttrain_sg_recorded(&r->sg, g != NULL) && (bad || r->info.rank == 0))
        fprintf(stderr,
                "torus-train: warning: rank %d: recording the step as a CUDA "
                "graph failed (%s); every step runs eagerly from now on\n",
                r->info.rank, why);
    r->graph = g;
    return g != NULL;
}

/* Parts 2-3 of a step: as calls, or as the step graph (ttrain_step_graph.h:
 * recorded once per plan, global batch, loss scale and restore, after one
 * eager step with them). *replayed: the graph ran them. */
static int _fwd_bwd_step(_run *r, int lbatch, double scale, int *replayed)
{
    ttrain_sg_key k = {teng_net_plan_id(r->net), lbatch * r->cfg.world, scale,
                       r->restores};
    int drop, got = 0;
    ttrain_sg_act act = ttrain_sg_next(&r->sg, &k, &drop);
    if (drop) { /* a stale graph goes once its last replay is done */
        if (teng_net_sync(r->net))
            return _fail("step", torus_error_msg());
        teng_net_graph_free(r->net, r->graph);
        r->graph = NULL;
    }
    if (act == TTRAIN_SG_RECORD && (got = _graph_record(r)) < 0)
        return TTRAIN_EXIT_FAIL;
    *replayed = act == TTRAIN_SG_REPLAY || got == 1;
    r->upd_eager = ttrain_sg_update_eager(&r->sg, *replayed);
    if (*replayed) {
        if (teng_net_graph_replay(r->net, r->graph))
            return _fail("step", torus_error_msg());
        ttrain_sg_replayed(&r->sg);
    } else if (_fwd_bwd(r)) {
        return _fail("step", torus_error_msg());
    }
    return _GO;
}

/* Step parts 1-3: the input, forward and backward, the next batch's fetch
 * and copy, and the rest of the gradient exchange. */
static int _step_grads(_run *r, int epoch, long step, long steps, int lbatch,
                       double lr, _window *w)
{
    int rc, replayed = 0;
    if ((rc = _step_input(r, epoch, step, lbatch, w)) != _GO)
        return rc;
    ttrain_test_sleep("step", r->info.rank, r->gstep + 1);
    /* The loss gradient is scaled; an injected overflow scales it by inf,
     * which makes this rank's gradients inf/nan as a real one would. */
    double scale = ttrain_test_overflow(r->info.rank, r->gstep + 1)
                       ? INFINITY
                       : r->ls.scale;
    teng_net_set_loss_scale(r->net, scale);
    /* The device step's lr goes into its pinned ring before the launch. */
    if (r->dstep && topt_sgd_dstep(&r->opt, lr, TENG_DSTEP_BEGIN))
        return _fail("optimizer", torus_error_msg());
    /* Under the device step the backward reads the device's scale (an
     * injected inf is the host's value again): one graph for any scale. */
    if ((rc = _fwd_bwd_step(r, lbatch, r->dstep && isfinite(scale) ? 0 : scale,
                            &replayed)) != _GO)
        return rc;
    if ((rc = _prefetch(r, epoch, step, steps, lbatch, w)) != _GO)
        return rc;
    ttrain_trace_begin(_trace, "exchange wait");
    if (ttrain_exchange_wait(r->ex, r->net, replayed, r->dstep))
        return _fail("gradient exchange", torus_error_msg());
    ttrain_trace_end(_trace);
    return _GO;
}

/* The device step: on a backend that has it (cuda) and unless
 * TCUDA_DSTEP=0, the update, the skip decision and the loss scale run on
 * the device with no host wait; the host learns them in _dstep_sync. */
static int _dstep_open(_run *r)
{
    const char *env = getenv("TCUDA_DSTEP");
    if (!teng_net_dstep_supported(r->net) || (env && !strcmp(env, "0")))
        return _GO;
    const topt_loss_scale_config *c = &r->ls_cfg;
    teng_dstep_config dc = {.min_scale = c->min_scale,
                            .max_scale = c->max_scale,
                            .growth = c->growth,
                            .backoff = c->backoff,
                            .interval = c->interval,
                            .dynamic = r->ls_mode == TOPT_LOSS_SCALE_DYNAMIC};
    teng_dstep_state s = {.scale = r->ls.scale,
                          .used = r->ls.scale,
                          .clean = r->ls.clean,
                          .overflows = r->ls.overflows,
                          .skipped = r->skipped};
    if (topt_sgd_dstep_open(&r->opt, &dc, &s) ||
        teng_net_dstep_read(r->net, &r->dseen, 1))
        return _fail("device step", torus_error_msg());
    r->dstep = 1;
    ttrain_sg_set_update(&r->sg, 1); /* recordings hold the update */
    if (r->info.rank == 0)
        printf("torus-train: update, skips and loss scale on the device "
               "(read back every --print-every steps)\n");
    return _GO;
}

/* What the device decided since the last read (one wait for its last
 * queued decision): the loss scale, skips (warned late, here), the
 * --max-nonfinite run, the optimizer's step count and last lr, and, for
 * a progress window w, its loss sum and applied steps (a new window
 * starts on the device). */
static int _dstep_sync(_run *r, _window *w, double lr)
{
    teng_dstep_state d;
    /* Steps end the exchange on the device only (_grads_wait): wait here
     * under its deadline, so a lost peer is named, not waited for. */
    if (ttrain_exchange_sync(r->ex))
        return _fail("gradient exchange", torus_error_msg());
    if (teng_net_dstep_read(r->net, &d, w != NULL))
        return _fail("device step", torus_error_msg());
    long decided = d.decided - r->dseen.decided;
    long skips = d.overflows - r->dseen.overflows;
    r->skipped = (int)d.skipped;
    topt_sgd_dstep_seen(&r->opt, &r->ls, &r->dseen, &d);
    r->dseen = d;
    if (w) {
        w->loss_sum = d.loss_sum;
        w->n = (int)d.applied;
    }
    if (skips && r->info.rank == 0)
        fprintf(stderr,
                "torus-train: warning: by global step %ld: %ld of the last "
                "%ld steps skipped for inf/nan in the summed gradients (the "
                "device decides; seen late, at this read); loss scale now "
                "%g\n",
                r->gstep, skips, decided, d.scale);
    if (d.worst > r->cfg.max_nonfinite) {
        TORUS_FAIL(TTRAIN_EDIVERGED,
                   "by global step %ld: the summed gradients held inf/nan in "
                   "%ld steps in a row (--max-nonfinite %d; lr %.5g): the "
                   "training has diverged; lower --lr or resume from a "
                   "checkpoint",
                   r->gstep, d.worst, r->cfg.max_nonfinite, lr);
        return _fail("training diverged", torus_error_msg());
    }
    return _GO;
}

/* The warning for a skipped step (rank 0): what overflowed, and either
 * the loss scale backing off or how many skips in a row there were. */
static void _skip_warning(const _run *r, double scale, int backs_off)
{
    char what[64] = "inf/nan in the gradients";
    int counted;
    size_t nf = ttrain_exchange_nonfinite(r->ex, &counted);
    if (counted)
        snprintf(what, sizeof(what),
                 "%zu inf/nan values in the summed gradients", nf);
    if (r->info.rank != 0)
        return;
    if (backs_off)
        fprintf(stderr,
                "torus-train: warning: global step %ld: %s at loss scale %g; "
                "update skipped, loss scale now %g\n",
                r->gstep + 1, what, scale, r->ls.scale);
    else
        fprintf(stderr,
                "torus-train: warning: global step %ld: %s; update skipped "
                "(%d of --max-nonfinite %d in a row)\n",
                r->gstep + 1, what, r->skipped, r->cfg.max_nonfinite);
}

/* Step part 4: the update at this step's learning rate lr from gradients
 * that are the loss scale times the true ones (the update divides it out,
 * no pass of its own). A step whose summed gradients hold inf/nan is
 * skipped on every rank alike (they all see the same count after the
 * all-reduce, so their loss scales stay equal too) and backs the scale
 * off; clean steps grow it. Too many skips in a row end the run before the
 * weights are lost to it; under a dynamic scale only skips at its minimum
 * count, as backing off is the cure for the others. */
static int _step_update(_run *r, double lr, _window *w)
{
    const ttrain_config *cfg = &r->cfg;
    if (r->dstep) /* queued (or in the step graph); decided on the device */
        return topt_sgd_dstep(&r->opt, lr,
                              r->upd_eager ? TENG_DSTEP_QUEUE | TENG_DSTEP_END
                                           : TENG_DSTEP_END)
                   ? _fail("optimizer", torus_error_msg())
                   : _GO;
    double scale = r->ls.scale;
    int counted, finite = !ttrain_exchange_nonfinite(r->ex, &counted);
    topt_loss_scale_update(&r->ls, &r->ls_cfg, finite);
    if (finite) {
        r->skipped = 0;
        if (topt_sgd_step_scaled(&r->opt, lr, scale) || teng_net_sync(r->net))
            return _fail("optimizer", torus_error_msg());
        w->loss_sum += teng_net_loss(r->net);
        w->n++;
        return _GO;
    }
    int backs_off =
        r->ls_mode == TOPT_LOSS_SCALE_DYNAMIC && scale > r->ls_cfg.min_scale;
    if (!backs_off && ++r->skipped > cfg->max_nonfinite) {
        TORUS_FAIL(TTRAIN_EDIVERGED,
                   "global step %ld: the summed gradients hold inf/nan in %d "
                   "steps in a row (--max-nonfinite %d; lr %.5g): the training "
                   "has diverged; lower --lr or resume from a checkpoint",
                   r->gstep + 1, r->skipped, cfg->max_nonfinite, lr);
        if (r->mf) /* a record a sweep can tell from a crash */
            fprintf(r->mf, "{\"diverged\":1,\"global_step\":%ld}\n",
                    r->gstep + 1);
        return _fail("training diverged", torus_error_msg());
    }
    _skip_warning(r, scale, backs_off);
    return _GO;
}

/* Device memory in use now, if more than seen so far (GPU backends; the
 * arenas are allocated at compile, so a step's own use shows after the
 * first progress line). */
static void _device_peak(_run *r)
{
    size_t used, total;
    if (!tbackends_device_memory(r->bk, &used, &total) && used > r->dev_peak)
        r->dev_peak = used;
}

/* Step part 5: every --print-every steps and at the end of the epoch, the
 * progress line (the loss of the global batch: the mean of the ranks')
 * and its metrics; then a new window. */
static int _progress(_run *r, int epoch, long step, long steps, int gbatch,
                     double lr, _window *w)
{
    if (r->gstep % r->cfg.print_every != 0 && step != steps - 1)
        return _GO;
    if (r->dstep && _dstep_sync(r, w, lr) != _GO)
        return TTRAIN_EXIT_FAIL;
    if (ttrain_exchange_sum(r->ex, &w->loss_sum, 1))
        return _fail("loss", torus_error_msg());
    /* NAN when every step of the window was skipped */
    double loss = w->n ? w->loss_sum / r->cfg.world / w->n : NAN;
    double dt = _now() - w->t0, ips = w->n * (double)gbatch / dt;
    double comm = ttrain_exchange_wait_s(r->ex, 1) / dt;
    printf("epoch %d step %ld/%ld | %.1f img/s | loss %.4f | lr "
           "%.5g | batch %d | data %.1f%% comm %.1f%%\n",
           epoch, step + 1, steps, ips, loss, lr, gbatch, 100 * w->data_s / dt,
           100 * comm);
    fflush(stdout);
    _metrics(r->mf, epoch, step + 1, r->gstep, ips, loss, lr, gbatch,
             w->data_s / dt, comm);
    *w = (_window){.t0 = _now()};
    _device_peak(r);
    return _GO;
}

/* Step part 6: the position is that of the next step; a checkpoint at
 * the last step, every --checkpoint-every steps, or when a stop is
 * pending. The stop is agreed, as all ranks must take part in the BN
 * average below, or none. */
static int _checkpoint(_run *r, int epoch, long step, long steps)
{
    const ttrain_config *cfg = &r->cfg;
    int more = step + 1 < steps;
    /* A batch fetched ahead (_prefetch) is not served yet. */
    uint64_t served = ttrain_input_served(&r->in);
    r->at = (ttrain_progress){.epoch = more ? epoch : epoch + 1,
                              .step = more ? step + 1 : 0,
                              .global_step = r->gstep,
                              .samples = served,
                              .dropout_step = teng_net_dropout_step(r->net),
                              .ls = r->ls};
    int last = (cfg->max_steps && r->gstep >= cfg->max_steps) ||
               (!more && epoch + 1 == cfg->sched.epochs);
    r->stopping = _agree_stop(r->ex);
    if (!cfg->ckpt_dir[0] ||
        !(r->stopping || last ||
          (cfg->ckpt_every && r->gstep % cfg->ckpt_every == 0)))
        return _GO;
    /* The checkpoint records the device's true loss-scale state. */
    if (r->dstep && _dstep_sync(r, NULL, 0) != _GO)
        return TTRAIN_EXIT_FAIL;
    r->at.ls = r->ls;
    /* The file gets the ranks' average; this rank's own statistics stay
     * live when training goes on, and are saved for the resume at a stop
     * (ttrain_bn_stash.h): checkpoints change nothing, resumes are
     * bitwise. */
    int multi = cfg->world > 1;
    if (multi && (ttrain_bn_stash_take(&r->bn, r->net) ||
                  (r->stopping &&
                   ttrain_bn_stash_save(&r->bn, cfg->ckpt_dir, r->meta.run,
                                        r->info.rank, cfg->world, r->gstep))))
        return _fail("checkpoint", torus_error_msg());
    if (ttrain_exchange_stats_average(r->ex, r->net))
        return _fail("BN statistics", torus_error_msg());
    if (ttrain_exchange_check_agreement(r->ex, r->net))
        return _fail("checkpoint", torus_error_msg());
    /* Only rank 0 writes; all ranks hold the same weights. */
    ttrain_trace_begin(_trace, r->info.rank == 0 ? "checkpoint write"
                                                 : "checkpoint wait");
    int rc = _write_or_wait(r);
    ttrain_trace_end(_trace);
    if (rc != _GO || !multi || r->stopping)
        return rc;
    if (last) /* the run is complete: nothing left to resume */
        ttrain_bn_stash_remove(cfg->ckpt_dir, r->meta.run, r->info.rank);
    else if (ttrain_bn_stash_put(&r->bn, r->net))
        return _fail("checkpoint", torus_error_msg());
    return _GO;
}

/* --target-top1: the first evaluation at or above the target ends the
 * run; the step and the time (of this run, since its start or resume)
 * go to stdout and, as a "target_top1" record, to the metrics. */
static void _target(_run *r, double top1)
{
    if (!(r->cfg.target_top1 > 0) || top1 < r->cfg.target_top1)
        return;
    double t = _now() - r->t_start;
    r->reached = 1;
    printf("target top-1 %.2f%% reached at global step %ld after %.1f s\n",
           r->cfg.target_top1, r->gstep, t);
    fflush(stdout);
    if (r->mf) {
        fprintf(r->mf,
                "{\"target_top1\":%.4f,\"global_step\":%ld,\"top1\":%.4f,"
                "\"time\":%.3f}\n",
                r->cfg.target_top1, r->gstep, top1, t);
        fflush(r->mf);
    }
}

/* Evaluation on the test split at the end of an epoch, and every
 * --eval-every steps (never twice at one step). */
static int _epoch_eval(_run *r, int epoch, int lbatch)
{
    double c[4], t0 = _now();
    if (r->eval_step == r->gstep)
        return _GO;
    r->eval_step = r->gstep;
    if (_evaluate(r->ex, &r->src, r->net, lbatch, c))
        return _fail("evaluation", torus_error_msg());
    double top1 = 100 * c[0] / c[2];
    if (top1 > r->best)
        r->best = top1, r->best_at = _now() - r->t_start;
    printf("epoch %d test: top-1 %.2f%% top-5 %.2f%% loss %.4f "
           "(%.0f images, %.1f s)\n",
           epoch, top1, 100 * c[1] / c[2], c[3] / c[2], c[2], _now() - t0);
    fflush(stdout);
    if (r->mf) {
        fprintf(r->mf,
                "{\"epoch\":%d,\"global_step\":%ld,\"top1\":%.4f,"
                "\"top5\":%.4f,\"test_loss\":%.6f,\"time\":%.3f}\n",
                epoch, r->gstep, top1, 100 * c[1] / c[2], c[3] / c[2],
                _now() - r->t_start);
        fflush(r->mf);
    }
    _target(r, top1);
    return _GO;
}

/* One epoch: the batch from the schedule (batch-size control: the new
 * batch reuses the same arenas), then its steps of
 *   data -> forward -> backward (+ exchange) -> update -> log -> checkpoint. */
static int _epoch(_run *r, int epoch)
{
    const ttrain_config *cfg = &r->cfg;
    int gbatch = topt_batch_at(&cfg->sched, epoch),
        lbatch = gbatch / cfg->world;
    long steps = topt_steps_in_epoch(&cfg->sched, epoch);
    long first = epoch == r->at.epoch ? r->at.step : 0;
    if (teng_net_set_batch(r->net, lbatch))
        return _fail("batch schedule", torus_error_msg());
    teng_net_set_global_batch(r->net, gbatch);
    if (r->src.start && r->src.start(&r->src, epoch, first, lbatch))
        return _fail("data", torus_error_msg());
    _window w = {.t0 = _now()};
    ttrain_exchange_wait_s(r->ex, 1);
    int rc = _GO;
    for (long step = first; step < steps && rc == _GO; step++) {
        if ((cfg->max_steps && r->gstep >= cfg->max_steps) || r->stopping)
            break;
        double lr = topt_lr_at_step(&cfg->sched, epoch, step);
        ttrain_trace_begin(_trace, "step");
        if ((rc = _step_grads(r, epoch, step, steps, lbatch, lr, &w)) != _GO)
            break;
        ttrain_trace_begin(_trace, "update");
        if ((rc = _step_update(r, lr, &w)) != _GO)
            break;
        ttrain_trace_end(_trace);
        r->gstep++;
        r->images += gbatch;
        if ((rc = _progress(r, epoch, step, steps, gbatch, lr, &w)) == _GO)
            rc = _checkpoint(r, epoch, step, steps);
        if (rc == _GO && cfg->eval_every && r->gstep % cfg->eval_every == 0 &&
            !r->stopping)
            rc = _epoch_eval(r, epoch, lbatch);
        ttrain_trace_endf(_trace, "\"step\":%ld,\"epoch\":%d", r->gstep, epoch);
        if (r->reached)
            break;
    }
    if (rc == _GO && r->have_src && !r->stopping && !r->reached)
        rc = _epoch_eval(r, epoch, lbatch);
    return rc;
}

/* The epochs from the starting position, until the schedule ends,
 * --max-steps is reached or a signal stops the run. */
static int _train(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    r->gstep = r->at.global_step;
    if (_dstep_open(r) != _GO)
        return TTRAIN_EXIT_FAIL;
    r->t_start = _now();
    r->best = -1;
    r->eval_step = -1;
    for (int epoch = r->at.epoch;
         epoch < cfg->sched.epochs && !r->stopping && !r->reached; epoch++) {
        int rc = _epoch(r, epoch);
        if (rc != _GO)
            return rc;
        if (cfg->max_steps && r->gstep >= cfg->max_steps)
            break;
    }
    return _GO;
}

/* The stop message, the summary, and everything freed. */
static int _finish(_run *r)
{
    int status = TTRAIN_EXIT_OK;
    if (r->stopping) {
        fprintf(stderr,
                "torus-train: stopped by signal %d at global step %ld%s\n",
                r->stopping, r->gstep,
                r->cfg.ckpt_dir[0] ? " after writing a checkpoint"
                                   : " (no --checkpoint-dir: nothing saved)");
        status = TTRAIN_EXIT_PREEMPTED;
    }
    double total = _now() - r->t_start;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("done: global step %ld; this run: %.0f images in %.1f s, %.2f "
           "img/s, peak RSS %.0f MB\n",
           r->gstep, r->images, total, r->images / total,
           ru.ru_maxrss / 1024.0);
    _device_peak(r);
    if (r->dev_peak)
        printf("peak device memory %.0f MB in use on GPU %d (cudaMemGetInfo: "
               "every process's), %.0f MB of it this net's arenas\n",
               r->dev_peak / 1e6, r->device,
               teng_net_alloc_bytes(r->net) / 1e6);
    if (r->dstep && _dstep_sync(r, NULL, 0) != _GO)
        status = TTRAIN_EXIT_FAIL;
    if (r->ls_mode != TOPT_LOSS_SCALE_OFF)
        printf("loss scale %g at the end, %ld overflow steps skipped in all\n",
               r->ls.scale, r->ls.overflows);
    if (r->best >= 0)
        printf("best test top-1 %.2f%%, reached after %.1f s\n", r->best,
               r->best_at);
    /* The fingerprint of the final weights and BN statistics (the ranks
     * agree on it): a stopped-and-resumed run must end on the same one as
     * an uninterrupted run (tests/integration/jobs_imagenet.sh). */
    uint64_t h;
    if (r->info.rank == 0 && ttrain_state_hash(r->net, &h) == 0)
        printf("state hash %016" PRIx64 " at global step %ld\n", h, r->gstep);
    if (r->device >= 0)
        printf("step graphs %s: %ld recorded, %ld steps replayed\n",
               ttrain_sg_state(&r->sg), r->sg.records, r->sg.replays);
    ttrain_exchange_summary(r->ex, r->dstep, stdout);
    if (r->cfg.target_top1 > 0 && !r->reached && !r->stopping)
        printf("target top-1 %.2f%% not reached by global step %ld\n",
               r->cfg.target_top1, r->gstep);
    size_t events;
    if (_trace && ttrain_trace_close(_trace, r->comm, &events)) {
        fprintf(stderr, "torus-train: %s\n", torus_error_msg());
        status = TTRAIN_EXIT_FAIL;
    } else if (_trace) {
        printf("trace: %zu events of %d rank(s) in %s\n", events, r->cfg.world,
               r->cfg.trace);
    }
    if (r->mf)
        fclose(r->mf);
    r->src.close(&r->src);
    free(r->plan);
    ttrain_bn_stash_free(&r->bn);
    topt_sgd_free(&r->opt);
    if (r->graph && !teng_net_sync(r->net))
        teng_net_graph_free(r->net, r->graph);
    teng_net_destroy(r->net);
    teng_backend_close(r->bk);
    ttrain_exchange_close(r->ex);
    tcomm_finalize(r->comm);
    return status;
}

int main(int argc, char **argv)
{
    static _run r; /* zeroed: no source, no net, no checkpoint yet */
    torus_report_set("torus-train", NULL);
    int rc;
    if ((rc = _parse(&r, argc, argv)) != _GO || (rc = _bootstrap(&r)) != _GO ||
        (rc = _open_data(&r)) != _GO || (rc = _build_net(&r)) != _GO ||
        (rc = _restore(&r)) != _GO || (rc = _train(&r)) != _GO)
        return rc;
    return _finish(&r);
}
