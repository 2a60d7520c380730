/* torus-train.c: the training program. Reads top to bottom like the recipe:
 * configure, build the model, initialise it, then for every epoch set the
 * batch from the schedule and run steps of
 *   data -> forward -> backward (+ gradient all-reduce) -> SGD/LARS -> log.
 *
 * One process, or one rank of many (srun --mpi=pmix, mpirun): the two
 * places where ranks meet are the data source (trainer/train/source.h:
 * each rank reads its slice of the epoch) and the gradient exchange (the
 * engine's per-layer gradient hook starts the all-reduce of every bucket
 * that backward has completed; _grads_wait() waits for the rest before
 * the update). With one rank both reduce to the single-process path.
 */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "config.h"
#include "trainer/comm/tcomm.h"
#include "trainer/comm/tcomm_fusion.h"
#include "trainer/engine/backend.h"
#include "trainer/engine/rng.h"
#include "trainer/models/models.h"
#include "trainer/optim/optim.h"
#include "trainer/train/checkpoint.h"
#include "trainer/train/options.h"
#include "trainer/train/source.h"
#include "trainer/train/state_hash.h"
#include "trainer/train/tdata_source.h"

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* SIGUSR1/SIGTERM ask for a checkpoint at the next step boundary. */
static volatile sig_atomic_t _stop;

static void _on_signal(int sig)
{
    _stop = sig;
}

/* ---- gradient exchange (libtcomm) ----
 * With one rank the sum over ranks is the local gradient: no fusion, no
 * communication, the single-process path unchanged. With several, every
 * param's gradient is registered with tcomm's fusion in backward order
 * (params lie in forward order, so that is the reverse); the per-layer
 * hook marks a layer's params ready, and a bucket starts its all-reduce
 * on the communication thread as soon as it is complete, while backward
 * goes on. _grads_wait() flushes and waits for the rest. The loss is
 * already divided by the global batch, so the all-reduce is a plain sum
 * (remark 3), and each rank's gradient is already its 1/world share of the
 * mean when it is cast to the wire (--wire, fp16 by default): no rank's
 * value is world times larger than the result, so the cast cannot overflow
 * where the sum would not. tcomm sums in fp32 and rounds the sum to the
 * wire precision; inf/nan in it skip the step on every rank. */
typedef struct {
    tcomm_t *comm;
    int rank, world;
    tcomm_algo algo;
    tcomm_wire wire;
    tcomm_fusion_t *fusion;
    int np;           /* params; param i is fusion index np - 1 - i */
    double wait_s;    /* time blocked in _grads_wait, for the progress line */
    size_t nonfinite; /* inf/nan in this step's summed gradients */
} _exchange;

static int _exchange_open(_exchange *ex, teng_net *net, int bucket_kb,
                          char *err, size_t n)
{
    if (ex->world == 1)
        return 0;
    tcomm_fusion_options fo = {.bucket_bytes = (size_t)bucket_kb << 10,
                               .algo = ex->algo,
                               .wire = ex->wire};
    if (tcomm_fusion_create(ex->comm, &fo, &ex->fusion))
        goto fail;
    ex->np = net->np;
    for (int i = net->np - 1; i >= 0; i--) {
        int idx;
        /* The backend's layout may pad a param: padding gradients are
         * zero, and summing zeros keeps them zero. */
        if (tcomm_fusion_add(ex->fusion, net->p[i].grad,
                             net->p[i].bytes / sizeof(float), net->p[i].name,
                             &idx))
            goto fail;
    }
    if (tcomm_fusion_seal(ex->fusion))
        goto fail;
    return 0;
fail:
    snprintf(err, n, "rank %d: %s", ex->rank, tcomm_error());
    return -1;
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
                tcomm_error());
        return NULL;
    }
    return p;
}

static int _grads_ready(void *ctx, teng_net *net, int layer)
{
    _exchange *ex = ctx;
    if (!ex->fusion)
        return 0;
    const teng_layer *l = &net->l[layer];
    for (int i = l->param0; i < l->param0 + l->nparam; i++)
        if (tcomm_fusion_ready(ex->fusion, ex->np - 1 - i))
            return -1;
    return 0;
}

/* Waits for the rest of the exchange and sets ex->nonfinite to the inf/nan
 * count of the summed gradients: tcomm counts them in the reduced buckets
 * (so every rank sees the same count); one rank checks its own gradients
 * (their sum of squares is finite or not: the count is then 0 or 1). */
static int _grads_wait(_exchange *ex, teng_net *net)
{
    ex->nonfinite = 0;
    if (!ex->fusion) {
        float s = 0;
        if (net->bk->ops->sumsq(net->bk, net->grads,
                                net->params_bytes / sizeof(float), &s))
            return -1;
        ex->nonfinite = !isfinite(s);
        return 0;
    }
    tcomm_fusion_stats st;
    if (tcomm_fusion_finish(ex->fusion, &st))
        return -1;
    ex->wait_s += st.wait_s;
    ex->nonfinite = st.nonfinite;
    return 0;
}

/* BN running statistics are per worker while training (Goyal); the
 * average over ranks is what evaluation and checkpoints see. They stay
 * fp32 on the wire whatever --wire says: they are a few KB once per
 * evaluation, and a variance rounded to fp16 would change the evaluation,
 * not the speed. */
static int _stats_average(_exchange *ex, teng_net *net)
{
    if (ex->world == 1 || !net->stats_bytes)
        return 0;
    tcomm_result r;
    return tcomm_allreduce(ex->comm, net->stats,
                           net->stats_bytes / sizeof(float), ex->algo,
                           TCOMM_WIRE_FP32, TCOMM_AVERAGE, &r)
               ? -1
               : 0;
}

/* Every rank must hold the same weights and BN statistics after the
 * average (the gradient sums are identical on all ranks, bit for bit).
 * Ranks that differ mean a bug or a broken node, not noise: name the first
 * one instead of training, evaluating or checkpointing a mixture. */
static int _check_agreement(_exchange *ex, teng_net *net, char *err, size_t n)
{
    if (ex->world == 1)
        return 0;
    uint64_t h;
    if (ttrain_state_hash(net, &h)) {
        snprintf(err, n, "rank %d: %s", ex->rank, teng_net_error(net));
        return -1;
    }
    /* Every rank's hash, as two exact 32-bit halves, by one sum. */
    double *v = calloc(2 * (size_t)ex->world, sizeof(double));
    if (!v) {
        snprintf(err, n, "rank %d: out of memory", ex->rank);
        return -1;
    }
    v[2 * ex->rank] = (double)(h >> 32);
    v[2 * ex->rank + 1] = (double)(h & 0xffffffffu);
    int rc = 0;
    if (tcomm_sum_double(ex->comm, v, 2 * ex->world)) {
        snprintf(err, n, "rank %d: %s", ex->rank, tcomm_error());
        rc = -1;
    }
    for (int r = 1; r < ex->world && !rc; r++)
        if (v[2 * r] != v[0] || v[2 * r + 1] != v[1]) {
            snprintf(err, n,
                     "rank %d's weights or BN statistics differ from rank "
                     "0's (state hash %08" PRIx32 "%08" PRIx32 " vs %08" PRIx32
                     "%08" PRIx32 "): the ranks have "
                     "diverged",
                     r, (uint32_t)v[2 * r], (uint32_t)v[2 * r + 1],
                     (uint32_t)v[0], (uint32_t)v[1]);
            rc = -1;
        }
    free(v);
    return rc;
}

/* A signal reaches ranks at different moments: every rank stops at the
 * first step boundary where any rank has seen one, so none is left
 * waiting in a collective. Returns the signal (0: go on). */
static int _agree_stop(_exchange *ex)
{
    double v = _stop;
    if (ex->world > 1 && tcomm_max_double(ex->comm, &v))
        return _stop ? (int)_stop : SIGTERM;
    return (int)v;
}

/* Sums n doubles over ranks in place. */
static int _sum(_exchange *ex, double *v, int n)
{
    return ex->world == 1 ? 0 : tcomm_sum_double(ex->comm, v, n) ? -1 : 0;
}

/* Evaluation on the test split: the BN statistics are averaged first,
 * every rank then evaluates its slice with the same weights and statistics
 * (checked), and the counts are summed: c = top-1 hits, top-5 hits,
 * images, loss sum. Errors name what failed in err. */
static int _evaluate(_exchange *ex, ttrain_source *src, teng_net *net,
                     int batch, double c[4], char *err, size_t n)
{
    c[0] = c[1] = c[2] = c[3] = 0;
    if (_stats_average(ex, net)) {
        snprintf(err, n, "BN statistics: %s", tcomm_error());
        return -1;
    }
    if (_check_agreement(ex, net, err, n))
        return -1;
    if (ttrain_tdata_eval(src, net, batch, c)) {
        snprintf(err, n, "%s", src->err);
        return -1;
    }
    if (_sum(ex, c, 4)) {
        snprintf(err, n, "summing the counts: %s", tcomm_error());
        return -1;
    }
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

int main(int argc, char **argv)
{
    /* ---- configuration ---- */
    ttrain_config cfg;
    ttrain_config_defaults(&cfg);
    int rc = ttrain_config_parse(&cfg, argc, argv);
    if (rc)
        return rc == 1 ? TTRAIN_EXIT_OK : rc;
    char err[1024];

    /* ---- ranks: PMIx bootstrap when launched by srun/mpirun, else one
     * process (tcomm's singleton: no MPI, nothing changes) ---- */
    tcomm_t *comm = NULL;
    tcomm_info info = {.size = 1};
    int algo = tcomm_algo_parse(cfg.algo);
    if (algo < 0) {
        fprintf(stderr,
                "torus-train: --algo: unknown algorithm '%s' (flat, ring, "
                "hier, hier-rs, torus2d, hybrid)\n",
                cfg.algo);
        return TTRAIN_EXIT_USAGE;
    }
    if (!cfg.dry_run) {
        tcomm_options to = {0};
        if (tcomm_init(&to, &comm))
            return _fail("bootstrap", tcomm_error());
        tcomm_info_get(comm, &info);
        cfg.world = info.size;
        if (info.size > 1)
            _job = comm;
        /* One progress report per job: rank 0's. */
        if (info.rank != 0 && !freopen("/dev/null", "w", stdout))
            return _fail("stdout", "cannot redirect to /dev/null");
    }

    /* ---- data ----
     * A packed dataset fixes the epoch length; open it before the
     * schedule is validated. */
    ttrain_source src = {0};
    int have_src = 0;
    if (cfg.data[0] && !cfg.synthetic) {
        long n = 0;
        if (ttrain_tdata_open(&src, cfg.data, &cfg.model, info.rank, cfg.world,
                              cfg.seed, &n, err, sizeof(err))) {
            _fail("--data", err);
            return TTRAIN_EXIT_USAGE;
        }
        cfg.sched.dataset_size = n;
        have_src = 1;
    }
    if ((rc = ttrain_config_validate(&cfg)))
        return rc;
    if (cfg.dry_run) {
        ttrain_print_plan(&cfg, stdout);
        return TTRAIN_EXIT_OK;
    }
    const topt_schedule *sched = &cfg.sched;
    int max_local = 0;
    for (int i = 0; i < sched->nstages; i++)
        if (sched->stage[i].global_batch / cfg.world > max_local)
            max_local = sched->stage[i].global_batch / cfg.world;

    /* ---- model, memory and optimizer: everything allocated here ---- */
    teng_backend_opts bopts = {.threads = cfg.threads};
    teng_backend *bk;
    if (teng_backend_open(cfg.backend, &bopts, &bk, err, sizeof(err)))
        return _fail("backend", err);
    teng_net net;
    teng_net_init(&net);
    if (cfg.world > 1)
        teng_net_set_grads_alloc(&net, _shared_grads, comm);
    if (tmodel_build(&net, &cfg.model) < 0 ||
        teng_net_compile(&net, bk, max_local) || tmodel_init(&net, cfg.seed))
        return _fail("model", teng_net_error(&net));
    topt_sgd opt;
    if (topt_sgd_init(&opt, &net, &cfg.opt))
        return _fail("optimizer", teng_net_error(&net));
    /* Dropout masks hash (seed, step, layer, element): the seed must also
     * carry the rank once there are several, or ranks drop alike. */
    net.dropout_seed = teng_hash64((cfg.seed ^ 0xd2095e7dULL) +
                                   0x9e3779b97f4a7c15ULL * (uint64_t)info.rank);
    _exchange ex = {.comm = comm,
                    .rank = info.rank,
                    .world = cfg.world,
                    .algo = (tcomm_algo)algo,
                    .wire = (tcomm_wire)tcomm_wire_parse(cfg.wire)};
    if (_exchange_open(&ex, &net, cfg.bucket_kb, err, sizeof(err)))
        return _fail("gradient exchange", err);
    teng_net_set_grad_hook(&net, _grads_ready, &ex);
    if (cfg.verbose)
        teng_net_summary(&net, stderr);
    printf("torus-train: %s, %zu parameters, %.0f MB of activations at local "
           "batch %d, backend %s with %d threads\n",
           tmodel_name(cfg.model.kind), teng_net_param_count(&net),
           net.acts_bytes / 1e6, max_local, bk->ops->name, cfg.threads);
    if (cfg.world > 1)
        printf("torus-train: %d ranks on %d nodes, grid %dx%d (%s), "
               "gradients in %zu buckets%s, all-reduce %s, %s wire\n",
               info.size, info.nnodes, info.rows, info.cols,
               info.source ? info.source : "?",
               tcomm_fusion_bucket_count(ex.fusion),
               tcomm_fusion_shared(ex.fusion) ? " of node-shared memory" : "",
               tcomm_algo_name(ex.algo), tcomm_wire_name(ex.wire));

    if (!have_src && ttrain_synthetic_open(&src, &cfg.model, max_local,
                                           cfg.seed, info.rank, cfg.world))
        return _fail("data", "out of memory for the synthetic pool");
    FILE *mf =
        cfg.metrics[0] && info.rank == 0 ? fopen(cfg.metrics, "a") : NULL;
    if (cfg.metrics[0] && info.rank == 0 && !mf)
        return _fail("--metrics", "cannot open the file for appending");

    /* ---- where to start: afresh, or from the newest checkpoint ---- */
    ttrain_progress at = {0};
    char *plan = _plan_text(&cfg);
    const char *model = tmodel_name(cfg.model.kind);
    if (cfg.resume || cfg.eval_only) {
        char path[1100];
        rc = ttrain_ckpt_load_latest(cfg.ckpt_dir, &net, &opt, &at, model, path,
                                     sizeof(path), err, sizeof(err));
        if (rc < 0)
            return _fail(cfg.eval_only ? "--eval-only" : "--resume", err);
        if (cfg.eval_only) {
            /* ---- evaluation of a checkpoint, then exit ---- */
            double c[4], t0 = _now();
            if (rc > 0) {
                snprintf(err, sizeof(err), "no checkpoint in %s", cfg.ckpt_dir);
                return _fail("--eval-only", err);
            }
            if (teng_net_set_batch(&net, max_local))
                return _fail("evaluation", teng_net_error(&net));
            if (_evaluate(&ex, &src, &net, max_local, c, err, sizeof(err)))
                return _fail("evaluation", err);
            printf("%s (epoch %d, global step %ld) test: top-1 %.2f%% top-5 "
                   "%.2f%% loss %.4f (%.0f images, %.1f s)\n",
                   path, at.epoch, at.global_step, 100 * c[0] / c[2],
                   100 * c[1] / c[2], c[3] / c[2], c[2], _now() - t0);
            src.close(&src);
            tcomm_finalize(comm);
            return TTRAIN_EXIT_OK;
        }
        if (rc == 0) {
            if (src.seek(&src, at.samples))
                return _fail("--resume", src.err);
            net.step = at.dropout_step;
            printf("torus-train: resumed from %s at epoch %d step %ld "
                   "(global step %ld)\n",
                   path, at.epoch, at.step, at.global_step);
        } else {
            printf("torus-train: no checkpoint in %s, starting afresh\n",
                   cfg.ckpt_dir);
        }
    }
    struct sigaction sa = {.sa_handler = _on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* ---- training ---- */
    long gstep = at.global_step;
    double t_start = _now(), images = 0, best = -1, best_at = 0;
    int status = TTRAIN_EXIT_OK, stopping = 0, skipped = 0;
    for (int epoch = at.epoch; epoch < sched->epochs && !stopping; epoch++) {
        int gbatch = topt_batch_at(sched, epoch), lbatch = gbatch / cfg.world;
        long steps = topt_steps_in_epoch(sched, epoch);
        long first = epoch == at.epoch ? at.step : 0;
        /* Batch-size control: the new batch reuses the same arenas. */
        if (teng_net_set_batch(&net, lbatch))
            return _fail("batch schedule", teng_net_error(&net));
        teng_net_set_global_batch(&net, gbatch);
        if (src.start && src.start(&src, epoch, first, lbatch))
            return _fail("data", src.err);
        double t_win = _now(), data_s = 0, loss_sum = 0;
        ex.wait_s = 0;
        int nwin = 0;
        for (long step = first; step < steps; step++) {
            if ((cfg.max_steps && gstep >= cfg.max_steps) || stopping)
                break;
            /* 1. the next batch (waiting for it counts as data time; the
             * copy into the input tensor is part of the step) */
            ttrain_batch b;
            if (src.next(&src, lbatch, &b))
                return _fail("data", src.err);
            /* Epochs hold whole global batches and slices are even, so
             * a short batch is a data-source bug, never to be trained. */
            if (b.n != lbatch) {
                snprintf(err, sizeof(err),
                         "rank %d: the source gave %d samples for a local "
                         "batch of %d at epoch %d step %ld",
                         info.rank, b.n, lbatch, epoch, step);
                return _fail("data", err);
            }
            data_s += b.wait_s;
            if (teng_net_set_input(&net, b.x) || teng_net_set_labels(&net, b.y))
                return _fail("data", teng_net_error(&net));
            /* 2. forward and backward; the gradient hook starts the
             * all-reduce of finished buckets while backward goes on */
            if (teng_net_forward(&net, 1) || teng_net_backward(&net))
                return _fail("step", teng_net_error(&net));
            /* 3. the rest of the gradient exchange */
            if (_grads_wait(&ex, &net))
                return _fail("gradient exchange",
                             ex.fusion ? tcomm_error() : bk->err);
            /* 4. the update at this step's learning rate; a step whose
             * summed gradients hold inf/nan is skipped on every rank
             * alike (they all see the same count), and too many in a row
             * end the run before the weights are lost to it */
            double lr = topt_lr_at_step(sched, epoch, step);
            if (ex.nonfinite) {
                if (++skipped > cfg.max_nonfinite) {
                    snprintf(err, sizeof(err),
                             "global step %ld: the summed gradients hold "
                             "inf/nan in %d steps in a row (--max-nonfinite "
                             "%d; lr %.5g): the training has diverged; "
                             "lower --lr or resume from a checkpoint",
                             gstep + 1, skipped, cfg.max_nonfinite, lr);
                    return _fail("training diverged", err);
                }
                char what[64] = "inf/nan in the gradients";
                if (ex.fusion)
                    snprintf(what, sizeof(what),
                             "%zu inf/nan values in the summed gradients",
                             ex.nonfinite);
                if (info.rank == 0)
                    fprintf(stderr,
                            "torus-train: warning: global step %ld: %s; "
                            "update skipped (%d of --max-nonfinite %d in a "
                            "row)\n",
                            gstep + 1, what, skipped, cfg.max_nonfinite);
            } else {
                skipped = 0;
                if (topt_sgd_step(&opt, lr) || teng_net_sync(&net))
                    return _fail("optimizer", teng_net_error(&net));
                loss_sum += teng_net_loss(&net);
                nwin++;
            }
            /* 5. progress */
            gstep++;
            images += gbatch;
            if (gstep % cfg.print_every == 0 || step == steps - 1) {
                /* the loss of the global batch: the mean of the ranks' */
                if (_sum(&ex, &loss_sum, 1))
                    return _fail("loss", tcomm_error());
                /* NAN when every step of the window was skipped */
                loss_sum = nwin ? loss_sum / cfg.world / nwin : NAN;
                double dt = _now() - t_win, ips = nwin * (double)gbatch / dt;
                printf("epoch %d step %ld/%ld | %.1f img/s | loss %.4f | lr "
                       "%.5g | batch %d | data %.1f%% comm %.1f%%\n",
                       epoch, step + 1, steps, ips, loss_sum, lr, gbatch,
                       100 * data_s / dt, 100 * ex.wait_s / dt);
                fflush(stdout);
                _metrics(mf, epoch, step + 1, gstep, ips, loss_sum, lr, gbatch,
                         data_s / dt, ex.wait_s / dt);
                t_win = _now();
                data_s = loss_sum = 0;
                ex.wait_s = 0;
                nwin = 0;
            }
            /* 6. checkpoint: the position is that of the next step */
            at = (ttrain_progress){step + 1 < steps ? epoch : epoch + 1,
                                   step + 1 < steps ? step + 1 : 0, gstep,
                                   src.samples, net.step};
            int last = (cfg.max_steps && gstep >= cfg.max_steps) ||
                       (step + 1 == steps && epoch + 1 == sched->epochs);
            /* A pending stop checkpoints here; the answer is agreed, as
             * all ranks must take part in the BN average below, or none. */
            stopping = _agree_stop(&ex);
            if (cfg.ckpt_dir[0] &&
                (stopping || last ||
                 (cfg.ckpt_every && gstep % cfg.ckpt_every == 0))) {
                if (_stats_average(&ex, &net))
                    return _fail("BN statistics", tcomm_error());
                if (_check_agreement(&ex, &net, err, sizeof(err)))
                    return _fail("checkpoint", err);
                /* Only rank 0 writes; all ranks hold the same weights. */
                if (info.rank == 0 &&
                    ttrain_ckpt_save(cfg.ckpt_dir, cfg.keep, &net, &opt, &at,
                                     model, plan ? plan : "", err, sizeof(err)))
                    return _fail("checkpoint", err);
            }
        }
        /* evaluation on the test split at the end of each epoch */
        if (have_src && !stopping) {
            double c[4], t0 = _now();
            if (_evaluate(&ex, &src, &net, lbatch, c, err, sizeof(err)))
                return _fail("evaluation", err);
            double top1 = 100 * c[0] / c[2];
            if (top1 > best)
                best = top1, best_at = _now() - t_start;
            printf("epoch %d test: top-1 %.2f%% top-5 %.2f%% loss %.4f "
                   "(%.0f images, %.1f s)\n",
                   epoch, top1, 100 * c[1] / c[2], c[3] / c[2], c[2],
                   _now() - t0);
            fflush(stdout);
            if (mf) {
                fprintf(mf,
                        "{\"epoch\":%d,\"global_step\":%ld,\"top1\":%.4f,"
                        "\"top5\":%.4f,\"test_loss\":%.6f,\"time\":%.3f}\n",
                        epoch, gstep, top1, 100 * c[1] / c[2], c[3] / c[2],
                        _now() - t_start);
                fflush(mf);
            }
        }
        if (cfg.max_steps && gstep >= cfg.max_steps)
            break;
    }

    if (stopping) {
        fprintf(stderr,
                "torus-train: stopped by signal %d at global step "
                "%ld%s\n",
                stopping, gstep,
                cfg.ckpt_dir[0] ? " after writing a checkpoint"
                                : " (no --checkpoint-dir: nothing saved)");
        status = TTRAIN_EXIT_PREEMPTED;
    }

    /* ---- summary ---- */
    double total = _now() - t_start;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("done: global step %ld; this run: %.0f images in %.1f s, %.2f "
           "img/s, peak RSS %.0f MB\n",
           gstep, images, total, images / total, ru.ru_maxrss / 1024.0);
    if (best >= 0)
        printf("best test top-1 %.2f%%, reached after %.1f s\n", best, best_at);
    if (mf)
        fclose(mf);
    src.close(&src);
    free(plan);
    topt_sgd_free(&opt);
    teng_net_free(&net);
    teng_backend_close(bk);
    if (ex.fusion)
        tcomm_fusion_destroy(ex.fusion);
    tcomm_finalize(comm);
    return status;
}
