/* train/report.c: torus-train's banner and summary (see ttrain_report.h). */
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/torus_error.h"
#include "trainer/backends/cuda/tcuda_plan.h"
#include "trainer/backends/tbackends.h"
#include "trainer/models/tmodel.h"
#include "trainer/train/ttrain_report.h"
#include "trainer/train/ttrain_state_hash.h"

/* The loss scale's line, if it is not off. */
static void _loss_scale(const ttrain_report *rp, FILE *f)
{
    const topt_loss_scale_config *c = rp->ls_cfg;
    if (rp->ls_mode == TOPT_LOSS_SCALE_DYNAMIC)
        fprintf(f,
                "torus-train: dynamic loss scale from %g (halved on inf/nan, "
                "doubled after %ld clean steps, in [%g, %g])\n",
                rp->ls->scale, c->interval, c->min_scale, c->max_scale);
    else if (rp->ls_mode == TOPT_LOSS_SCALE_STATIC)
        fprintf(f, "torus-train: static loss scale %g\n", rp->ls->scale);
}

/* More compute threads than CPUs in this task's mask run by turns: say
 * so, with the usual cause (since Slurm 22.05 a step does not inherit the
 * job's --cpus-per-task; the job script must pass srun -c). */
static void _cpu_mask(int threads, FILE *f)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set))
        return;
    int cpus = CPU_COUNT(&set);
    if (threads > cpus)
        fprintf(f,
                "torus-train: warning: %d compute threads on %d CPU(s) of "
                "this task's CPU mask: they run by turns (under Slurm, pass "
                "srun -c %d: a step does not inherit --cpus-per-task)\n",
                threads, cpus, threads);
}

void ttrain_report_setup(const ttrain_report *rp, int max_local,
                         int decode_threads, int u8, FILE *f)
{
    const ttrain_config *cfg = rp->cfg;
    fprintf(f,
            "torus-train: %s, %zu parameters, %.0f MB of activations at "
            "local batch %d, backend %s with %d threads\n",
            tmodel_name(cfg->model.kind), teng_net_param_count(rp->net),
            teng_net_acts_bytes(rp->net) / 1e6, max_local,
            teng_backend_name(rp->bk), cfg->threads);
    _cpu_mask(cfg->threads, f);
    if (!strcmp(cfg->backend, "auto"))
        fprintf(f, "torus-train: --backend auto chose %s: %s\n",
                teng_backend_name(rp->bk), tbackends_auto_why());
    if (rp->device >= 0) {
        fprintf(f, "torus-train: rank 0 on GPU %d (%s) of %d visible\n",
                rp->device, rp->device_why, tbackends_gpus(cfg->backend));
        if (tbackends_module_versions())
            fprintf(f, "torus-train: cuda module %s: %s\n",
                    tbackends_module_path(), tbackends_module_versions());
        fprintf(f, "torus-train: step graphs %s\n", ttrain_sg_state(rp->sg));
    }
    if (decode_threads)
        fprintf(f, "torus-train: %d decode thread(s) for the training images\n",
                decode_threads);
    if (u8)
        fprintf(f,
                "torus-train: 8-bit input batches, normalised and mirrored "
                "%s\n",
                teng_backend_has_input_u8(rp->bk)
                    ? "on the device (the next batch copied during the step)"
                    : "on the host");
    _loss_scale(rp, f);
    ttrain_exchange_describe(rp->ex, rp->info, rp->cfg->verbose, f);
}

void ttrain_report_device_peak(ttrain_report *rp)
{
    size_t used, total;
    if (!tbackends_device_memory(rp->bk, &used, &total) && used > rp->dev_peak)
        rp->dev_peak = used;
}

void ttrain_report_done(ttrain_report *rp, const ttrain_tally *t, FILE *f)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(f,
            "done: global step %ld; this run: %.0f images in %.1f s, %.2f "
            "img/s, peak RSS %.0f MB\n",
            t->gstep, t->images, t->seconds, t->images / t->seconds,
            ru.ru_maxrss / 1024.0);
    ttrain_report_device_peak(rp);
    if (rp->dev_peak)
        fprintf(f,
                "peak device memory %.0f MB in use on GPU %d (cudaMemGetInfo: "
                "every process's), %.0f MB of it this net's arenas\n",
                rp->dev_peak / 1e6, rp->device,
                teng_net_alloc_bytes(rp->net) / 1e6);
}

/* A cuda backend's fast-path counters, the one line tests/gpu/run-gpu
 * reads (tcuda_fastpath.h). */
static void _fastpath(const ttrain_report *rp, FILE *f)
{
    tcuda_fastpath c;
    char line[256];
    if (tbackends_fastpath(rp->bk, &c))
        return;
    tcuda_fastpath_format(&c, line, sizeof line);
    fprintf(f, "%s\n", line);
}

void ttrain_report_summary(const ttrain_report *rp, const ttrain_tally *t,
                           FILE *f)
{
    if (rp->ls_mode != TOPT_LOSS_SCALE_OFF)
        fprintf(f,
                "loss scale %g at the end, %ld overflow steps skipped in all\n",
                rp->ls->scale, rp->ls->overflows);
    if (t->best >= 0)
        fprintf(f, "best test top-1 %.2f%%, reached after %.1f s\n", t->best,
                t->best_at);
    /* The fingerprint of the final weights and BN statistics (the ranks
     * agree on it): a stopped-and-resumed run must end on the same one as
     * an uninterrupted run (tests/integration/jobs_imagenet.sh). */
    uint64_t h;
    if (rp->info->rank == 0 && ttrain_state_hash(rp->net, &h) == 0)
        fprintf(f, "state hash %016" PRIx64 " at global step %ld\n", h,
                t->gstep);
    if (rp->device >= 0)
        fprintf(f, "step graphs %s: %ld recorded, %ld steps replayed\n",
                ttrain_sg_state(rp->sg), rp->sg->records, rp->sg->replays);
    _fastpath(rp, f);
    ttrain_exchange_summary(rp->ex, t->dstep, f);
    if (t->target_left)
        fprintf(f, "target top-1 %.2f%% not reached by global step %ld\n",
                rp->cfg->target_top1, t->gstep);
}

int ttrain_report_cuda_plan(const ttrain_config *cfg, FILE *f)
{
    const char *b = cfg->backend;
    int half = !strcmp(b, "cuda-fp16");
    if (!half && strcmp(b, "cuda") && strcmp(b, "gpu"))
        return 0;
    teng_net *net = NULL;
    const char *tune = getenv("TCUDA_TUNE");
    /* Tuning (cuda_tune.h) measures each shape once or reads it from the
     * tune cache; which of the two needs the device to tell. */
    tcuda_plan_in in = {.half_nhwc = half,
                        .conv = tune && !strcmp(tune, "0")
                                    ? TCUDA_ALGO_HEURISTIC
                                    : TCUDA_ALGO_TUNED};
    tcuda_plan_totals tot;
    int rc = teng_net_create(&net);
    if (!rc && tmodel_build(net, &cfg->model) < 0)
        rc = TENG_EINVAL;
    if (!rc)
        rc = tcuda_plan_report(net, &in, f, &tot);
    teng_net_destroy(net);
    return rc ? torus_error_prefix(rc, "the cuda plan") : 0;
}
