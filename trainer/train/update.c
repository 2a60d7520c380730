/* train/update.c: the update seam (see ttrain_update.h). Two
 * implementations fill one table: _host, where the host decides every
 * step from the exchange's inf/nan count, and _device, which queues the
 * update and the decision on the device (the device step, dstep.c) and
 * reads back only at sync. ttrain_update_open picks one; the public calls
 * only dispatch, so the training loop takes the same path on both. */
#include <math.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_metrics.h"
#include "trainer/train/ttrain_update.h"

struct ttrain_update_ops {
    int device; /* for the summary's wording only */
    int (*begin)(ttrain_update *u, double lr, double scale, double *bwd);
    int (*wait)(ttrain_update *u, int replayed);
    int (*apply)(ttrain_update *u, long gstep, double lr);
    int (*sync)(ttrain_update *u, long gstep, double lr, double *loss_sum,
                int *applied);
    void (*describe)(const ttrain_update *u, FILE *f);
};

/* ---- host: decided on the host, every step ---- */

static int _host_begin(ttrain_update *u, double lr, double scale, double *bwd)
{
    (void)u, (void)lr;
    *bwd = scale;
    return 0;
}

/* The host waits for the exchange's inf/nan count (dstep 0). */
static int _host_wait(ttrain_update *u, int replayed)
{
    return ttrain_exchange_wait(u->ex, u->net, replayed, 0);
}

/* The warning for a skipped step (rank 0): what overflowed, and either
 * the loss scale backing off or how many skips in a row there were. */
static void _host_skip_warning(const ttrain_update *u, long gstep,
                               double scale, int backs_off)
{
    char what[64] = "inf/nan in the gradients";
    int counted;
    size_t nf = ttrain_exchange_nonfinite(u->ex, &counted);
    if (counted)
        snprintf(what, sizeof(what),
                 "%zu inf/nan values in the summed gradients", nf);
    if (u->rank != 0)
        return;
    if (backs_off)
        torus_warn("global step %ld: %s at loss scale %g; update skipped, "
                   "loss scale now %g",
                   gstep + 1, what, scale, u->ls->scale);
    else
        torus_warn("global step %ld: %s; update skipped (%d of "
                   "--max-nonfinite %d in a row)",
                   gstep + 1, what, u->skipped, u->max_nonfinite);
}

/* Every rank sees the same inf/nan count after the all-reduce, so all
 * skip alike and their loss scales stay equal; clean steps grow the
 * scale. Under a dynamic scale only skips at its minimum count towards
 * --max-nonfinite, as backing off is the cure for the others. */
static int _host_apply(ttrain_update *u, long gstep, double lr)
{
    double scale = u->ls->scale;
    int counted, rc, finite = !ttrain_exchange_nonfinite(u->ex, &counted);
    topt_loss_scale_update(u->ls, u->ls_cfg, finite);
    if (finite) {
        u->skipped = 0;
        if ((rc = topt_sgd_step_scaled(u->opt, lr, scale)) ||
            (rc = teng_net_sync(u->net)))
            return torus_error_prefix(rc, "optimizer");
        u->loss_sum += teng_net_loss(u->net);
        u->applied++;
        return 0;
    }
    int backs_off = u->dynamic && scale > u->ls_cfg->min_scale;
    if (!backs_off && ++u->skipped > u->max_nonfinite) {
        rc = TORUS_FAIL(TTRAIN_EDIVERGED,
                        "global step %ld: the summed gradients hold inf/nan "
                        "in %d steps in a row (--max-nonfinite %d; lr %.5g): "
                        "the training has diverged; lower --lr or resume "
                        "from a checkpoint",
                        gstep + 1, u->skipped, u->max_nonfinite, lr);
        ttrain_metrics_diverged(u->mf, gstep + 1);
        return torus_error_prefix(rc, "training diverged");
    }
    _host_skip_warning(u, gstep, scale, backs_off);
    return 0;
}

/* The host's values are true already; the window is its own. */
static int _host_sync(ttrain_update *u, long gstep, double lr,
                      double *loss_sum, int *applied)
{
    (void)gstep, (void)lr;
    if (loss_sum && applied) {
        *loss_sum = u->loss_sum;
        *applied = u->applied;
        u->loss_sum = 0;
        u->applied = 0;
    }
    return 0;
}

static void _host_describe(const ttrain_update *u, FILE *f)
{
    (void)u, (void)f;
}

static const ttrain_update_ops _host = {.device = 0,
                                        .begin = _host_begin,
                                        .wait = _host_wait,
                                        .apply = _host_apply,
                                        .sync = _host_sync,
                                        .describe = _host_describe};

/* ---- device: queued on the device, read back at sync ---- */

/* The step's lr goes into the device's pinned ring before the launch;
 * the backward reads the device's scale (an injected inf is the host's
 * value again), so one step graph serves any scale. */
static int _dev_begin(ttrain_update *u, double lr, double scale, double *bwd)
{
    *bwd = isfinite(scale) ? 0 : scale;
    int rc = topt_sgd_dstep(u->opt, lr, TENG_DSTEP_BEGIN);
    return rc ? torus_error_prefix(rc, "optimizer") : 0;
}

/* The device counts inf/nan and decides: the host waits for nothing. */
static int _dev_wait(ttrain_update *u, int replayed)
{
    return ttrain_exchange_wait(u->ex, u->net, replayed, 1);
}

/* Queued, or already in the step graph that ran (upd_eager 0). */
static int _dev_apply(ttrain_update *u, long gstep, double lr)
{
    (void)gstep;
    int rc = topt_sgd_dstep(u->opt, lr,
                            u->step->upd_eager
                                ? TENG_DSTEP_QUEUE | TENG_DSTEP_END
                                : TENG_DSTEP_END);
    return rc ? torus_error_prefix(rc, "optimizer") : 0;
}

/* The device's --max-nonfinite stop is seen here, late: the "diverged"
 * record as on the host, so a sweep tells it from a crash. */
static int _dev_sync(ttrain_update *u, long gstep, double lr,
                     double *loss_sum, int *applied)
{
    int rc = ttrain_dstep_sync(&u->ds, gstep, lr, &u->skipped, loss_sum,
                               applied);
    if (rc == TTRAIN_EDIVERGED)
        ttrain_metrics_diverged(u->mf, gstep);
    return rc;
}

static void _dev_describe(const ttrain_update *u, FILE *f)
{
    (void)u;
    fprintf(f, "torus-train: update, skips and loss scale on the device "
               "(read back every --print-every steps)\n");
}

static const ttrain_update_ops _device = {.device = 1,
                                          .begin = _dev_begin,
                                          .wait = _dev_wait,
                                          .apply = _dev_apply,
                                          .sync = _dev_sync,
                                          .describe = _dev_describe};

/* ---- the interface ---- */

int ttrain_update_open(ttrain_update *u)
{
    u->ds = (ttrain_dstep){.net = u->net,
                           .ex = u->ex,
                           .opt = u->opt,
                           .ls = u->ls,
                           .rank = u->rank,
                           .max_nonfinite = u->max_nonfinite};
    u->ops = &_host;
    int rc = ttrain_dstep_open(&u->ds, u->ls_cfg, u->dynamic, u->skipped);
    if (rc || !u->ds.on)
        return rc;
    u->ops = &_device;
    ttrain_sg_set_update(&u->step->sg, 1); /* recordings hold the update */
    return 0;
}

int ttrain_update_on_device(const ttrain_update *u)
{
    return u->ops->device;
}

void ttrain_update_describe(const ttrain_update *u, FILE *f)
{
    u->ops->describe(u, f);
}

int ttrain_update_begin(ttrain_update *u, double lr, double scale,
                        double *bwd_scale)
{
    return u->ops->begin(u, lr, scale, bwd_scale);
}

int ttrain_update_wait(ttrain_update *u, int replayed)
{
    int rc = u->ops->wait(u, replayed);
    return rc ? torus_error_prefix(rc, "gradient exchange") : 0;
}

int ttrain_update_apply(ttrain_update *u, long gstep, double lr)
{
    return u->ops->apply(u, gstep, lr);
}

int ttrain_update_sync(ttrain_update *u, long gstep, double lr,
                       double *loss_sum, int *applied)
{
    return u->ops->sync(u, gstep, lr, loss_sum, applied);
}
