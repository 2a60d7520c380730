/* regime.c: where a steps-to-target curve bends (Shallue et al. 2019):
 * it leaves perfect scaling when the steps exceed tol times the perfect
 * line through the first point that reached the target, and it stops
 * gaining at the first doubling that no longer cuts the steps by a
 * factor 2^gain_min. Pure arithmetic on the points, so the unit tests
 * drive it with synthetic curves. */
#include <math.h>

#include "trainer/sweep/tsweep.h"

static int _reached(double s)
{
    return isfinite(s) && s > 0;
}

void tsweep_regimes_find(const int *batch, const double *steps, int n,
                         double tol, double gain_min, tsweep_regimes *out)
{
    *out = (tsweep_regimes){-1, -1, -1, -1};
    int ref = 0;
    while (ref < n && !_reached(steps[ref]))
        ref++;
    if (ref == n)
        return;
    out->ref = ref;
    out->last_perfect = n - 1;
    for (int i = ref + 1; i < n; i++) {
        double perfect = steps[ref] * batch[ref] / batch[i];
        if (!_reached(steps[i]) || steps[i] > tol * perfect) {
            out->leave = i;
            out->last_perfect = i - 1;
            break;
        }
    }
    /* The gain of each step along the batch axis, as the exponent of the
     * local power law steps ~ batch^-e: 1 is perfect, 0 is flat. */
    for (int i = ref + 1; i < n; i++) {
        double e = _reached(steps[i]) ? log(steps[i - 1] / steps[i]) /
                                            log((double)batch[i] / batch[i - 1])
                                      : -1;
        if (e < gain_min) {
            out->stop = i - 1;
            break;
        }
    }
}
