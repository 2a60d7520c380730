/* train/diverge.c: the divergence rule on a finite loss (see
 * ttrain_diverge.h). */
#include <math.h>

#include "common/torus_error.h"
#include "trainer/train/ttrain_diverge.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_metrics.h"

int ttrain_diverge_on(const ttrain_diverge *d)
{
    return d->limit > 0;
}

int ttrain_diverge_check(ttrain_diverge *d, long gstep, double lr,
                         double loss)
{
    if (!ttrain_diverge_on(d) || isnan(loss))
        return 0;
    if (!(loss > d->limit)) {
        d->above = 0;
        return 0;
    }
    if (d->above++ == 0)
        d->first = gstep;
    if (d->above < d->points)
        return 0;
    /* The record first: a sweep reading the metrics of a run that has
     * stopped finds it whatever the exit did after. */
    ttrain_metrics_diverged(d->mf, gstep);
    int rc = TORUS_FAIL(TTRAIN_EDIVERGED,
                        "global step %ld: the training loss %.4g is above "
                        "--diverge-loss %g at %d progress points in a row "
                        "(global steps %ld to %ld; lr %.5g): the training "
                        "has diverged; lower --lr or resume from a "
                        "checkpoint",
                        gstep, loss, d->limit, d->above, d->first, gstep, lr);
    return torus_error_prefix(rc, "training diverged");
}
