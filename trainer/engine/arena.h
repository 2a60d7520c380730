/* arena.h: offset planning for buffers with known lifetimes.
 *
 * Activation gradients live only from the layer that writes them to the
 * layer that reads them in backward, so many can share memory. The planner
 * gets (size, first step, last step) per buffer and gives each an offset
 * in one arena such that buffers alive at the same step never overlap.
 * Greedy: buffers in order of first use, each at the lowest offset that
 * clears every live buffer. Lifetimes are closed intervals.
 */
#ifndef TORUS_TRAINER_ARENA_H
#define TORUS_TRAINER_ARENA_H

#include <stddef.h>

typedef struct {
    size_t bytes;
    int first, last; /* steps, inclusive */
    size_t offset;   /* output */
} teng_interval;

/* Plans offsets for n buffers; returns the arena size needed. Offsets
 * are multiples of align (a power of two). */
size_t teng_arena_plan(teng_interval *buf, int n, size_t align);

#endif
