/* format/rng.c: the seeded splitmix64 stream of libtdata.
 * One generator serves the packer's shard plan and the reader's
 * permutation and augmentation, so a run replays exactly from its seed. */
#include <stdint.h>

#include "data/format/format.h"

#define _GOLDEN 0x9E3779B97F4A7C15ull /* splitmix64's Weyl increment */

/* splitmix64 finaliser: a bijective, well-mixed 64-bit hash. */
uint64_t tdata_mix64(uint64_t x)
{
    x += _GOLDEN;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The stream is mix64 of its counter before each step: the same values as
 * the textbook "s += K; finalise(s)". */
uint64_t tdata_rng_next(tdata_rng *r)
{
    uint64_t x = r->s;
    r->s += _GOLDEN;
    return tdata_mix64(x);
}

double tdata_rng_uniform(tdata_rng *r)
{
    return (double)(tdata_rng_next(r) >> 11) * 0x1.0p-53;
}
