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
 * all-reduce of every bucket that backward has completed; the update seam
 * waits for the rest before the update). With one rank both reduce to the
 * single-process path. The update runs on the host or, where the backend
 * has it, on the device (trainer/train/ttrain_update.h): decided once in
 * _train; the steps only call the seam.
 */
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "common/torus_share.h"
#include "config.h"
#include "trainer/backends/tbackends.h"
#include "trainer/comm/tcomm.h"
#include "trainer/engine/rng.h"
#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"
#include "trainer/optim/topt_loss_scale.h"
#include "trainer/train/ttrain_checkpoint.h"
#include "trainer/train/ttrain_ckpt_run.h"
#include "trainer/train/ttrain_device.h"
#include "trainer/train/ttrain_diverge.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_exchange.h"
#include "trainer/train/ttrain_input.h"
#include "trainer/train/ttrain_metrics.h"
#include "trainer/train/ttrain_options.h"
#include "trainer/train/ttrain_report.h"
#include "trainer/train/ttrain_source.h"
#include "trainer/train/ttrain_step.h"
#include "trainer/train/ttrain_tdata_source.h"
#include "trainer/train/ttrain_test_hooks.h"
#include "trainer/train/ttrain_trace.h"
#include "trainer/train/ttrain_update.h"

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

/* First thing in main: a signal during start-up (MPI, data, checkpoint
 * load) must not kill the rank, or the job ends FAILED with no requeue;
 * it is answered at the first step boundary like any other. */
static void _catch_signals(void)
{
    struct sigaction sa = {.sa_handler = _on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
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

/* Set once several ranks run: a rank that fails takes the job down
 * rather than leave its peers waiting in a collective. */
static tcomm_t *_job;

/* The boundary's report of an error: "torus-train: WHAT: MSG". */
static void _say(const char *what, const char *msg)
{
    fprintf(stderr, "torus-train: %s: %s\n", what, msg);
}

/* The job ends with msg (said already): with the peer-lost status when
 * the comm layer gave up on a rank, so a job script can relaunch on the
 * nodes still up instead of calling the run broken. */
_Static_assert((int)TTRAIN_EXIT_PEER_LOST == (int)TCOMM_EXIT_LOST,
               "one peer-lost status, whoever ends the job");
static int _end(const char *msg)
{
    int rc = tcomm_peer_lost(_job) ? TTRAIN_EXIT_PEER_LOST : TTRAIN_EXIT_FAIL;
    if (_job) {
        fflush(NULL);
        tcomm_abort(_job, rc, msg);
    }
    return rc;
}

static int _fail(const char *what, const char *msg)
{
    _say(what, msg);
    return _end(msg);
}

/* A module's error, whose message names what failed; or one this rank
 * said before the others heard of it (said). */
static int _failed(int said)
{
    if (!said)
        fprintf(stderr, "torus-train: %s\n", torus_error_msg());
    return _end(torus_error_msg());
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
    int max_local;  /* the largest local batch of the schedule */
    int max_global; /* a global batch with that local batch */
    teng_backend *bk;
    int device;          /* a GPU backend's device, else -1 */
    int u8;              /* 8-bit input batches (--input) */
    ttrain_input in;     /* each step's batch, maybe fetched ahead */
    char device_why[64]; /* why that one (ttrain_device_pick) */
    teng_net *net;
    topt_sgd opt;
    /* loss scaling (--loss-scale, resolved for the backend) */
    topt_loss_scale_mode ls_mode;
    topt_loss_scale_config ls_cfg;
    topt_loss_scale_state ls;
    ttrain_exchange *ex; /* the gradient exchange, host or device */
    FILE *mf;            /* --metrics, rank 0 only */
    /* the run id, where training (re)starts, then the next step, and what
     * checkpoints carry (ttrain_ckpt_run.h) */
    ttrain_ckpt_run ck;
    ttrain_step step; /* forward and backward, as calls or a CUDA graph */
    ttrain_update upd; /* the update seam: host or device, chosen once */
    ttrain_diverge dv; /* --diverge-loss, at the progress points */
    ttrain_report rp; /* the banner's and the summary's facts */
    /* the training loop */
    long gstep;
    double t_start, images, best, best_at;
    int stopping;
    int reached;    /* --target-top1 reached: training ends */
    long eval_step; /* global step of the last evaluation (-1: none) */
} _run;

/* A progress window: what the next progress line averages over (its
 * loss is the update seam's, read at the line). */
typedef struct {
    double t0, data_s;
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
    /* The output paths before any work (a bad one found at the first
     * checkpoint wasted the training before it), each where it is
     * written: --metrics and --trace by rank 0, --checkpoint-dir by all. */
    if (ttrain_config_check_paths(&r->cfg, r->info.rank)) {
        _failed(0);
        return TTRAIN_EXIT_USAGE;
    }
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
        if (ttrain_report_cuda_plan(cfg, stdout))
            return _fail("--dry-run", torus_error_msg());
        return TTRAIN_EXIT_OK;
    }
    /* Rank 0 has the largest share of any global batch. */
    for (int i = 0; i < cfg->sched.nstages; i++) {
        int g = cfg->sched.stage[i].global_batch, first,
            n = torus_share(g, cfg->world, 0, &first);
        if (n > r->max_local)
            r->max_local = n, r->max_global = g;
    }
    return _GO;
}

/* --decode-threads, or auto: 1 beside a CPU backend, whose threads use
 * the cores; beside a GPU the decoding is the host's work: every core this
 * process may use but 2 (the step's thread and the loader's reader). A
 * mask of every CPU online with several ranks on the node means an
 * unbound task (no srun -c / --cpu-bind): this rank's share of them, or
 * each rank would start a decoder per core of the node. */
static int _decode_threads(const _run *r)
{
    cpu_set_t set;
    if (r->cfg.decode_threads)
        return r->cfg.decode_threads;
    if (r->device < 0 || sched_getaffinity(0, sizeof(set), &set))
        return 1;
    int n = CPU_COUNT(&set);
    if (r->info.local_size > 1 && n >= sysconf(_SC_NPROCESSORS_ONLN))
        n /= r->info.local_size;
    n -= 2;
    return n < 1 ? 1 : n > 64 ? 64 : n;
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
        return strcmp(r->cfg.backend, "auto")
                   ? 0
                   : ttrain_device_unused_grant(r->info.rank,
                                                tbackends_auto_why());
    if (in.local_size < 1) /* one process without PMIx */
        in.local_size = 1, in.local_rank = 0;
    if (ttrain_device_pick(&in, device, r->device_why, sizeof(r->device_why)))
        return -1;
    r->device = *device;
    return 0;
}

/* The most text of convolution algorithms a rank takes from rank 0. */
#define _TUNE_TEXT_MAX ((uint64_t)64 << 20)

/* Compiles the net. With several ranks on a cuda backend that measures
 * its convolution algorithms, rank 0 compiles first (measuring, or
 * reading its tune cache) and sends its table; the others take it as
 * their tune cache and compile with it, so every rank runs the same
 * algorithms. The others wait for rank 0's measurements: the no-progress
 * deadline is lengthened to --checkpoint-timeout meanwhile. Rank 0's
 * failure reaches them as a length of UINT64_MAX, never a hang. The
 * compile itself must hold no collective for this order: the shared
 * gradient memory (_shared_grads, collective) is only asked for by a
 * host-memory backend, never by the cuda one. */
static int _compile(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    char *text = NULL;
    size_t len = 0;
    if (cfg->world < 2 || tbackends_tune_export(r->bk, &text, &len))
        return teng_net_compile(r->net, r->bk, r->max_local);
    free(text); /* the table before any plan: empty of this net's shapes */
    text = NULL;
    double t = tcomm_set_timeout(r->comm, cfg->ckpt_timeout);
    int rc = 0;
    uint64_t n = 0;
    if (r->info.rank == 0) {
        rc = teng_net_compile(r->net, r->bk, r->max_local);
        n = !rc && !tbackends_tune_export(r->bk, &text, &len) ? len
                                                              : UINT64_MAX;
    }
    if (tcomm_bcast_bytes(r->comm, &n, sizeof n, 0))
        rc = rc ? rc : TENG_EBACKEND;
    else if (n == UINT64_MAX)
        rc = rc ? rc
                : TORUS_FAIL(TENG_EBACKEND, "rank 0 could not plan the "
                                            "net (see its message)");
    else if (r->info.rank != 0 &&
             (n > _TUNE_TEXT_MAX || !(text = malloc(n + 1))))
        rc = TORUS_FAIL(TENG_ENOMEM, "rank 0's convolution algorithms: %llu "
                                     "bytes",
                        (unsigned long long)n);
    if (!rc && tcomm_bcast_bytes(r->comm, text, n, 0))
        rc = TENG_EBACKEND;
    if (!rc && r->info.rank != 0) {
        tbackends_tune_import(r->bk, text, n);
        rc = teng_net_compile(r->net, r->bk, r->max_local);
    }
    tcomm_set_timeout(r->comm, t);
    free(text);
    return rc;
}

/* Model, memory and optimizer: everything the steps use is allocated
 * here. */
static int _build_net(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    teng_backend_opts bopts = {.threads = cfg->threads,
                               .tune_cache = cfg->tune_cache};
    ttrain_test_sleep("start", r->info.rank, 0); /* a slow start-up */
    if (_pick_device(r, &bopts.device) ||
        tbackends_open(cfg->backend, &bopts, &r->bk))
        return _fail("backend", torus_error_msg());
    if (teng_net_create(&r->net))
        return _fail("model", torus_error_msg());
    if (cfg->world > 1)
        teng_net_set_grads_alloc(r->net, _shared_grads, r->comm);
    if (tmodel_build(r->net, &cfg->model) < 0 || _compile(r) ||
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
    return _GO;
}

/* The step's machinery: the trace, the gradient exchange, each step's
 * input and the step as calls or a CUDA graph. */
static int _open_step(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    if (cfg->trace[0] && ttrain_trace_open(cfg->trace, r->comm, r->info.rank,
                                           cfg->world, &_trace))
        return _fail("--trace", torus_error_msg());
    ttrain_exchange_config xc = {
        .comm = r->comm,
        .rank = r->info.rank,
        .world = cfg->world,
        .algo = r->algo,
        .wire = (tcomm_wire)tcomm_wire_parse(cfg->wire),
        /* --eval-only reduces no gradients: nothing for auto to time */
        .bucket_kb = cfg->eval_only && cfg->bucket_kb < 0 ? 0 : cfg->bucket_kb,
        .trace = _trace};
    if (ttrain_exchange_open(&xc, r->net, r->bk, &r->ex))
        return _fail("gradient exchange", torus_error_msg());
    r->in = (ttrain_input){
        .src = &r->src, .net = r->net, .trace = _trace, .rank = r->info.rank};
    r->step = (ttrain_step){.net = r->net,
                            .ex = r->ex,
                            .opt = &r->opt,
                            .comm = r->comm,
                            .rank = r->info.rank,
                            .world = cfg->world,
                            .trace = _trace};
    ttrain_step_open(&r->step);
    if (cfg->verbose && r->info.rank == 0) /* the banner's rank only */
        teng_net_summary(r->net, stderr);
    return _GO;
}

/* The input (8-bit batches or not, decode threads), the banner, then the
 * synthetic pool. */
static int _open_input(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    /* --input: 8-bit batches where the backend has the path (auto), or
     * where asked (the engine's host path: the same values). */
    r->u8 = !strcmp(cfg->input, "u8") ||
            (!strcmp(cfg->input, "auto") && teng_backend_has_input_u8(r->bk) &&
             (r->have_src || cfg->model.in_channels == 3));
    if (r->u8 && r->have_src)
        ttrain_tdata_use_u8(&r->src, r->bk);
    if (r->have_src)
        ttrain_tdata_set_decode_threads(&r->src, _decode_threads(r));
    r->rp = (ttrain_report){.cfg = cfg,
                            .info = &r->info,
                            .net = r->net,
                            .bk = r->bk,
                            .ex = r->ex,
                            .sg = &r->step.sg,
                            .device = r->device,
                            .device_why = r->device_why,
                            .ls_mode = r->ls_mode,
                            .ls_cfg = &r->ls_cfg,
                            .ls = &r->ls};
    ttrain_report_setup(&r->rp, r->max_local,
                        r->have_src ? _decode_threads(r) : 0, r->u8, stdout);
    int first;
    torus_share(r->max_global, cfg->world, r->info.rank, &first);
    if (!r->have_src &&
        ttrain_synthetic_open(&r->src, &cfg->model, r->max_local, first,
                              cfg->seed, r->info.rank, cfg->world))
        return _fail("data", "out of memory for the synthetic pool");
    /* Synthetic 8-bit batches take the production input path. */
    if (r->u8 && !r->have_src &&
        ttrain_synthetic_use_u8(&r->src, &cfg->model, r->bk, cfg->seed))
        return _fail("data", torus_error_msg());
    return _GO;
}

/* --eval-only: evaluate the checkpoint just loaded, then exit. */
static int _eval_only(_run *r)
{
    double c[4], t0 = _now();
    if (!r->ck.found) {
        TORUS_FAIL(TTRAIN_ENOCKPT, "no checkpoint in %s", r->cfg.ckpt_dir);
        return _fail("--eval-only", torus_error_msg());
    }
    if (teng_net_set_batch(r->net, r->max_local))
        return _fail("evaluation", torus_error_msg());
    if (_evaluate(r->ex, &r->src, r->net, r->max_local, c))
        return _fail("evaluation", torus_error_msg());
    printf("%s (epoch %d, global step %ld) test: top-1 %.2f%% top-5 "
           "%.2f%% loss %.4f (%.0f images, %.1f s)\n",
           r->ck.path, r->ck.at.epoch, r->ck.at.global_step, 100 * c[0] / c[2],
           100 * c[1] / c[2], c[3] / c[2], c[2], _now() - t0);
    /* The same record a training run writes after its evaluations. */
    ttrain_metrics_eval(r->mf, r->ck.at.epoch, r->ck.at.global_step,
                        100 * c[0] / c[2], 100 * c[1] / c[2], c[3] / c[2],
                        _now() - t0);
    ttrain_metrics_close(r->mf);
    r->mf = NULL;
    r->src.close(&r->src);
    if (ttrain_trace_close(_trace, r->comm, NULL)) /* no steps: names only */
        return _fail("--trace", torus_error_msg());
    tcomm_finalize(r->comm);
    return TTRAIN_EXIT_OK;
}

/* --metrics, on rank 0, once the start is known. A run resumed at global
 * step S trains the steps after S again, which the run that stopped after
 * its checkpoint at S had recorded: their records go first, so the file
 * holds each global step once. A fresh run and --eval-only append. */
static int _open_metrics(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    long at = r->ck.at.global_step, dropped = 0;
    if (r->info.rank == 0 && cfg->metrics[0] && r->ck.found &&
        !cfg->eval_only) {
        if (ttrain_metrics_trim(cfg->metrics, at, &dropped)) {
            _failed(0); /* like a bad output path (_bootstrap) */
            return TTRAIN_EXIT_USAGE;
        }
        if (dropped)
            printf("torus-train: --metrics %s: %ld record%s past the resumed "
                   "global step %ld dropped\n",
                   cfg->metrics, dropped, dropped == 1 ? "" : "s", at);
    }
    if (ttrain_metrics_open(cfg->metrics, r->info.rank, &r->mf))
        return _failed(0);
    return _GO;
}

/* Where to start (ttrain_ckpt_run.h): afresh, or from the checkpoint every
 * rank agrees on (--resume), or only evaluate it (--eval-only). Then the
 * signals that ask for a stop. */
static int _restore(_run *r)
{
    const ttrain_config *cfg = &r->cfg;
    ttrain_ckpt_run *ck = &r->ck;
    *ck = (ttrain_ckpt_run){.cfg = cfg,
                            .comm = r->comm,
                            .rank = r->info.rank,
                            .have_src = r->have_src,
                            .src = &r->src,
                            .net = r->net,
                            .opt = &r->opt,
                            .ex = r->ex,
                            .ls_mode = r->ls_mode,
                            .ls_cfg = &r->ls_cfg,
                            .ls = &r->ls,
                            .trace = _trace,
                            .say = _say,
                            .fail = _fail};
    if (ttrain_ckpt_run_open(ck))
        return _failed(0);
    if ((cfg->resume || cfg->eval_only) && ttrain_ckpt_run_load(ck))
        return _failed(ck->said);
    int rc;
    if (cfg->eval_only)
        return (rc = _open_metrics(r)) != _GO ? rc : _eval_only(r);
    if (ck->found) {
        if (ttrain_ckpt_run_restore(ck))
            return _failed(0);
        r->step.restores++; /* a step graph recorded before is stale */
        printf("torus-train: resumed from %s at epoch %d step %ld "
               "(global step %ld)\n",
               ck->path, ck->at.epoch, ck->at.step, ck->at.global_step);
        if (r->ls_mode == TOPT_LOSS_SCALE_DYNAMIC)
            printf("torus-train: loss scale %g, %ld clean steps, %ld "
                   "overflows so far\n",
                   r->ls.scale, r->ls.clean, r->ls.overflows);
    } else if (cfg->resume) {
        printf("torus-train: no checkpoint in %s, starting afresh\n",
               cfg->ckpt_dir);
    }
    if ((rc = _open_metrics(r)) != _GO)
        return rc;
    ttrain_ckpt_run_clean(ck);
    tcomm_startup_done(r->comm);
    return _GO;
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
    /* Parts 2-3, as calls or as the step graph (ttrain_step.h), keyed by
     * the scale the update seam says the backward reads. */
    double bwd_scale;
    if (ttrain_update_begin(&r->upd, lr, scale, &bwd_scale) ||
        ttrain_step_run(&r->step, lbatch, bwd_scale, &replayed))
        return _failed(0);
    if ((rc = _prefetch(r, epoch, step, steps, lbatch, w)) != _GO)
        return rc;
    ttrain_trace_begin(_trace, "exchange wait");
    if (ttrain_update_wait(&r->upd, replayed))
        return _failed(0);
    ttrain_trace_end(_trace);
    return _GO;
}

/* Step part 4: the update at this step's learning rate lr, or its skip
 * for inf/nan gradients, through the update seam (ttrain_update.h). */
static int _step_update(_run *r, double lr)
{
    return ttrain_update_apply(&r->upd, r->gstep, lr) ? _failed(0) : _GO;
}

/* --diverge-loss on the progress point's loss. The ranks' sums of it may
 * differ in the last bit (MPI need not add in one order everywhere): the
 * rule sees their maximum, the same on every rank, so all ranks stop at
 * the same point or none does. */
static int _diverge(_run *r, double loss, double lr)
{
    if (!ttrain_diverge_on(&r->dv))
        return _GO;
    if (ttrain_exchange_max(r->ex, &loss))
        return _fail("loss", torus_error_msg());
    return ttrain_diverge_check(&r->dv, r->gstep, lr, loss) ? _failed(0)
                                                             : _GO;
}

/* Step part 5: every --print-every steps and at the end of the epoch, the
 * progress line (the loss of the global batch: the mean of the ranks')
 * and its metrics, then the --diverge-loss rule; then a new window. */
static int _progress(_run *r, int epoch, long step, long steps, int gbatch,
                     double lr, _window *w)
{
    if (r->gstep % r->cfg.print_every != 0 && step != steps - 1)
        return _GO;
    double loss_sum;
    int n; /* steps updated (not skipped) */
    if (ttrain_update_sync(&r->upd, r->gstep, lr, &loss_sum, &n))
        return _failed(0);
    if (ttrain_exchange_sum(r->ex, &loss_sum, 1))
        return _fail("loss", torus_error_msg());
    /* NAN when every step of the window was skipped */
    double loss = n ? loss_sum / r->cfg.world / n : NAN;
    double dt = _now() - w->t0, ips = n * (double)gbatch / dt;
    double comm = ttrain_exchange_wait_s(r->ex, 1) / dt;
    printf("epoch %d step %ld/%ld | %.1f img/s | loss %.4f | lr "
           "%.5g | batch %d | data %.1f%% comm %.1f%%\n",
           epoch, step + 1, steps, ips, loss, lr, gbatch, 100 * w->data_s / dt,
           100 * comm);
    fflush(stdout);
    ttrain_metrics_step(
        r->mf, &(ttrain_metrics_progress){epoch, step + 1, r->gstep, ips, loss,
                                          lr, gbatch, w->data_s / dt, comm});
    *w = (_window){.t0 = _now()};
    ttrain_report_device_peak(&r->rp);
    return _diverge(r, loss, lr);
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
    ttrain_ckpt_run *ck = &r->ck;
    ck->at = (ttrain_progress){.epoch = more ? epoch : epoch + 1,
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
    /* The checkpoint records the true loss-scale state (the device's). */
    if (ttrain_update_sync(&r->upd, r->gstep, 0, NULL, NULL))
        return _failed(0);
    ck->at.ls = r->ls;
    return ttrain_ckpt_run_write(ck, r->stopping, last) ? _failed(ck->said)
                                                        : _GO;
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
    ttrain_metrics_target(r->mf, r->cfg.target_top1, r->gstep, top1, t);
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
    ttrain_metrics_eval(r->mf, epoch, r->gstep, top1, 100 * c[1] / c[2],
                        c[3] / c[2], _now() - r->t_start);
    _target(r, top1);
    return _GO;
}

/* One epoch: the batch from the schedule (batch-size control: the new
 * batch reuses the same arenas), then its steps of
 *   data -> forward -> backward (+ exchange) -> update -> log -> checkpoint. */
static int _epoch(_run *r, int epoch)
{
    const ttrain_config *cfg = &r->cfg;
    /* Any number of ranks: this rank's share of the global batch (the
     * loss is divided by the global batch and the exchange sums, so the
     * shares' gradients add up to the global batch's). */
    int gbatch = topt_batch_at(&cfg->sched, epoch), at,
        lbatch = torus_share(gbatch, cfg->world, r->info.rank, &at);
    long steps = topt_steps_in_epoch(&cfg->sched, epoch);
    long first = epoch == r->ck.at.epoch ? r->ck.at.step : 0;
    if (teng_net_set_batch(r->net, lbatch))
        return _fail("batch schedule", torus_error_msg());
    teng_net_set_global_batch(r->net, gbatch);
    r->src.global_batch = gbatch;
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
        if ((rc = _step_update(r, lr)) != _GO)
            break;
        ttrain_trace_end(_trace);
        r->gstep++;
        r->images += gbatch;
        if ((rc = _progress(r, epoch, step, steps, gbatch, lr, &w)) == _GO)
            rc = _checkpoint(r, epoch, step, steps);
        if (rc == _GO && cfg->eval_every && r->gstep % cfg->eval_every == 0 &&
            !r->stopping)
            rc = _epoch_eval(r, epoch, lbatch);
        ttrain_trace_end_step(_trace, r->gstep, epoch);
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
    r->gstep = r->ck.at.global_step;
    /* Host or device: decided here, once. */
    r->upd = (ttrain_update){.net = r->net,
                             .ex = r->ex,
                             .opt = &r->opt,
                             .step = &r->step,
                             .ls = &r->ls,
                             .ls_cfg = &r->ls_cfg,
                             .dynamic = r->ls_mode == TOPT_LOSS_SCALE_DYNAMIC,
                             .rank = r->info.rank,
                             .max_nonfinite = cfg->max_nonfinite,
                             .mf = r->mf};
    if (ttrain_update_open(&r->upd))
        return _failed(0);
    r->dv = (ttrain_diverge){.limit = cfg->diverge_loss,
                             .points = cfg->diverge_points,
                             .mf = r->mf};
    if (r->info.rank == 0)
        ttrain_update_describe(&r->upd, stdout);
    r->t_start = _now();
    r->best = -1;
    r->eval_step = -1;
    for (int epoch = r->ck.at.epoch;
         epoch < cfg->sched.epochs && !r->stopping && !r->reached; epoch++) {
        int rc = _epoch(r, epoch);
        if (rc != _GO)
            return rc;
        if (cfg->max_steps && r->gstep >= cfg->max_steps)
            break;
    }
    return _GO;
}

/* The stop message and the summary (the device's true loss scale). */
static int _summary(_run *r)
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
    ttrain_tally t = {.gstep = r->gstep,
                      .images = r->images,
                      .seconds = _now() - r->t_start,
                      .best = r->best,
                      .best_at = r->best_at,
                      .dstep = ttrain_update_on_device(&r->upd),
                      .target_left = r->cfg.target_top1 > 0 && !r->reached &&
                                     !r->stopping};
    ttrain_report_done(&r->rp, &t, stdout);
    if (ttrain_update_sync(&r->upd, r->gstep, 0, NULL, NULL))
        status = _failed(0);
    ttrain_report_summary(&r->rp, &t, stdout);
    return status;
}

/* The summary, the trace written, and everything freed. */
static int _finish(_run *r)
{
    int status = _summary(r);
    size_t events;
    if (_trace && ttrain_trace_close(_trace, r->comm, &events)) {
        fprintf(stderr, "torus-train: %s\n", torus_error_msg());
        status = TTRAIN_EXIT_FAIL;
    } else if (_trace) {
        printf("trace: %zu events of %d rank(s) in %s\n", events, r->cfg.world,
               r->cfg.trace);
    }
    ttrain_metrics_close(r->mf);
    r->src.close(&r->src);
    ttrain_ckpt_run_close(&r->ck);
    topt_sgd_free(&r->opt);
    ttrain_step_close(&r->step);
    teng_net_destroy(r->net);
    teng_backend_close(r->bk);
    ttrain_exchange_close(r->ex);
    tcomm_finalize(r->comm);
    return status;
}

int main(int argc, char **argv)
{
    static _run r; /* zeroed: no source, no net, no checkpoint yet */
    _catch_signals();
    torus_report_set("torus-train", NULL);
    int rc;
    if ((rc = _parse(&r, argc, argv)) != _GO || (rc = _bootstrap(&r)) != _GO ||
        (rc = _open_data(&r)) != _GO || (rc = _build_net(&r)) != _GO ||
        (rc = _open_step(&r)) != _GO || (rc = _open_input(&r)) != _GO ||
        (rc = _restore(&r)) != _GO || (rc = _train(&r)) != _GO)
        return rc;
    return _finish(&r);
}
