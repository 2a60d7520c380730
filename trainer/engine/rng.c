/* rng.c: xoshiro256** streams and the splitmix64 counter hash. */
#include "trainer/engine/rng.h"

#include <math.h>

void teng_rng_seed(teng_rng *r, uint64_t seed)
{
    /* splitmix64 expands the seed so that nearby seeds give unrelated
     * streams and the state is never all zero. */
    for (int i = 0; i < 4; i++) {
        seed += 0x9e3779b97f4a7c15ULL;
        r->s[i] = teng_hash64(seed);
    }
}

static uint64_t _rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t teng_rng_next(teng_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = _rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = _rotl(s[3], 45);
    return out;
}

float teng_rng_uniform(teng_rng *r)
{
    return (float)(teng_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

float teng_rng_normal(teng_rng *r)
{
    /* 1 - u keeps the log argument in (0, 1]. */
    double u1 = 1.0 - (double)(teng_rng_next(r) >> 11) * 0x1.0p-53;
    double u2 = (double)(teng_rng_next(r) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}
