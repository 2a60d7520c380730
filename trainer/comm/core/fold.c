/* core/fold.c: the pre-scale and the inf/nan count around an all-reduce
 * (tc_fold, comm.h), for the algorithms that cannot fold them into their
 * shared-memory casts. Called by algo/allreduce.c and by hier.c and
 * torus2d.c below it, so it lies below all three. */
#include "trainer/comm/core/comm.h"
#include "trainer/comm/core/wire.h"

void tc_fold_before(tc_fold *f, float *x, size_t count)
{
    if (f->scale != 1.0f)
        tc_scale(x, count, f->scale);
    f->scale = 1.0f;
}

void tc_fold_after(tc_fold *f, const float *x, size_t count)
{
    if (f->bad)
        *f->bad += tc_count_nonfinite(x, count);
    f->bad = NULL;
}
