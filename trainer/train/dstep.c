/* train/dstep.c: the device step's opening and the host's reads of what
 * the device decided (see ttrain_dstep.h). */
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "trainer/train/ttrain_dstep.h"
#include "trainer/train/ttrain_error.h"

int ttrain_dstep_open(ttrain_dstep *d, const topt_loss_scale_config *c,
                      int dynamic, int skipped)
{
    const char *env = getenv("TCUDA_DSTEP");
    d->on = 0;
    if (!teng_net_dstep_supported(d->net) || (env && !strcmp(env, "0")))
        return 0;
    teng_dstep_config dc = {.min_scale = c->min_scale,
                            .max_scale = c->max_scale,
                            .growth = c->growth,
                            .backoff = c->backoff,
                            .interval = c->interval,
                            .dynamic = dynamic};
    teng_dstep_state s = {.scale = d->ls->scale,
                          .used = d->ls->scale,
                          .clean = d->ls->clean,
                          .overflows = d->ls->overflows,
                          .skipped = skipped};
    int rc = topt_sgd_dstep_open(d->opt, &dc, &s);
    if (!rc)
        rc = teng_net_dstep_read(d->net, &d->seen, 1);
    if (rc)
        return torus_error_prefix(rc, "device step");
    d->on = 1;
    return 0;
}

int ttrain_dstep_sync(ttrain_dstep *d, long gstep, double lr, int *skipped,
                      double *loss_sum, int *applied)
{
    teng_dstep_state now;
    /* Steps end the exchange on the device only: wait here under its
     * deadline, so a lost peer is named, not waited for. */
    int rc = ttrain_exchange_sync(d->ex);
    if (rc)
        return torus_error_prefix(rc, "gradient exchange");
    if ((rc = teng_net_dstep_read(d->net, &now, loss_sum != NULL)))
        return torus_error_prefix(rc, "device step");
    long decided = now.decided - d->seen.decided;
    long skips = now.overflows - d->seen.overflows;
    *skipped = (int)now.skipped;
    topt_sgd_dstep_seen(d->opt, d->ls, &d->seen, &now);
    d->seen = now;
    if (loss_sum && applied) {
        *loss_sum = now.loss_sum;
        *applied = (int)now.applied;
    }
    if (skips && d->rank == 0)
        torus_warn("by global step %ld: %ld of the last %ld steps skipped "
                   "for inf/nan in the summed gradients (the device decides; "
                   "seen late, at this read); loss scale now %g",
                   gstep, skips, decided, now.scale);
    if (now.worst <= d->max_nonfinite)
        return 0;
    rc = TORUS_FAIL(TTRAIN_EDIVERGED,
                    "by global step %ld: the summed gradients held inf/nan in "
                    "%ld steps in a row (--max-nonfinite %d; lr %.5g): the "
                    "training has diverged; lower --lr or resume from a "
                    "checkpoint",
                    gstep, now.worst, d->max_nonfinite, lr);
    return torus_error_prefix(rc, "training diverged");
}
