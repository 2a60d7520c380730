/* rng.h: the engine's deterministic random numbers.
 *
 * xoshiro256** for streams (initialisation, shuffles) whose 32-byte state
 * goes into checkpoints, and a stateless counter hash for dropout masks so
 * that a mask depends only on (seed, step, layer, element) and resume
 * reproduces it without saving anything.
 */
#ifndef TORUS_TRAINER_RNG_H
#define TORUS_TRAINER_RNG_H

#include <stdint.h>

#include "trainer/engine/elem_math.h" /* teng_hash64 */

typedef struct {
    uint64_t s[4];
} teng_rng;

void teng_rng_seed(teng_rng *r, uint64_t seed);
uint64_t teng_rng_next(teng_rng *r);
/* Uniform in [0, 1) with 24 random bits (exact in float). */
float teng_rng_uniform(teng_rng *r);
/* Standard normal (Box-Muller, one value per call). */
float teng_rng_normal(teng_rng *r);

#endif
