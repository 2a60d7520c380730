/* read/shuffle.c: the per-epoch global permutation and its k contiguous slices
 * (Goyal et al., remark 4: one random shuffle of the whole training set
 * per epoch, partitioned into k parts, one per worker).
 * The permutation depends only on (seed, epoch), through a counter-based
 * generator, so every rank computes the same one without communicating and
 * a resumed run replays the same order from the same sample. The
 * generator is format/rng.c. */
#include <stdint.h>

#include "data/read/read.h"

/* Unbiased integer in [0, n) (Lemire's multiply-shift with rejection). */
static uint64_t _below(tdata_rng *r, uint64_t n)
{
    __uint128_t m = (__uint128_t)tdata_rng_next(r) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t t = -n % n;
        while (low < t) {
            m = (__uint128_t)tdata_rng_next(r) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

void tdata_perm(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm)
{
    tdata_rng r = {tdata_mix64(seed ^ tdata_mix64(epoch + 0x51ED270B27A5ull))};
    for (uint64_t i = 0; i < n; i++)
        perm[i] = i;
    /* Fisher-Yates from the top. */
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = _below(&r, i);
        uint64_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

void tdata_partition(uint64_t n, int k, int r, int even, uint64_t *begin,
                     uint64_t *end)
{
    if (k < 1 || r < 0 || r >= k) {
        *begin = *end = 0;
        return;
    }
    if (even) {
        uint64_t per = n / (uint64_t)k;
        *begin = per * (uint64_t)r;
        *end = *begin + per;
    } else {
        *begin = n * (uint64_t)r / (uint64_t)k;
        *end = n * (uint64_t)(r + 1) / (uint64_t)k;
    }
}
