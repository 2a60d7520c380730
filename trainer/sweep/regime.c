/* regime.c: where a steps-to-target curve bends (Shallue et al. 2019):
 * it leaves perfect scaling when the steps exceed tol times the perfect
 * line through the first point that reached the target, and it stops
 * gaining at the first point that no larger batch beats by a factor of
 * (their batch ratio)^gain_min in steps. Pure arithmetic on the points,
 * so the unit tests drive it with synthetic curves. */
#include <math.h>

#include "trainer/sweep/tsweep.h"

static int _reached(double s)
{
    return isfinite(s) && s > 0;
}

/* The gain from point i to point j along the batch axis, as the exponent
 * of the power law steps ~ batch^-e between them: 1 is perfect, 0 is
 * flat; a miss at j is no gain (-1). */
static double _gain(const int *batch, const double *steps, int i, int j)
{
    if (!_reached(steps[j]))
        return -1;
    return log(steps[i] / steps[j]) / log((double)batch[j] / batch[i]);
}

/* The first reached point from ref on that no larger batch beats by the
 * gain: not the first doubling that gains too little, as one noisy point
 * (a crossing caught late, at a target crossed while the LR is high)
 * would end the curve there although larger batches take far fewer
 * steps. The last point, with nothing to beat it, is no stop. */
static int _stop(const int *batch, const double *steps, int n, int ref,
                 double gain_min)
{
    for (int i = ref; i < n - 1; i++) {
        int gains = 0;
        for (int j = i + 1; j < n && !gains; j++)
            gains = _gain(batch, steps, i, j) >= gain_min;
        if (_reached(steps[i]) && !gains)
            return i;
    }
    return -1;
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
    out->stop = _stop(batch, steps, n, ref, gain_min);
}
