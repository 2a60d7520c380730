/* trainer/backends/cuda/chunk_plan.h: the multi-tensor chunk plan of the
 * cuda optimizer kernels (prefix tcuda_plan_), plain C.
 *
 * Contract:
 * - The plan cuts every param (in order) into chunks of at most chunk
 *   elements; chunk c is the element range [begin, end) of param
 *   chunks[c].param. A param of n > 0 elements gets ceil(n / chunk) chunks,
 *   one of 0 elements gets none. Chunks are in param order, so param i owns
 *   chunks [first[i], first[i + 1]) and first[np] is the number of chunks.
 * - One GPU block handles one chunk: a launch over all chunks touches every
 *   element of every param exactly once, whatever the number of params.
 * - The plan is plain data (no pointers inside a chunk), built once and
 *   copied to the device as it is.
 * - tcuda_plan_build fails with TENG_EINVAL (np < 0, chunk == 0, more
 *   chunks than a launch grid holds) or TENG_ENOMEM, after TORUS_FAIL. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_CHUNK_PLAN_H
#define TORUS_TRAINER_BACKENDS_CUDA_CHUNK_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 64 KiB of fp32 per chunk: 64 elements per thread of a 256-thread block. */
#define TCUDA_PLAN_CHUNK 16384u
/* Most chunks one plan holds (a 1-D grid, with room to spare). */
#define TCUDA_PLAN_MAX_CHUNKS 0x7fffffffu

typedef struct {
    uint32_t param; /* index into the param list */
    uint32_t pad_;
    uint64_t begin, end; /* element range within that param */
} tcuda_chunk;

typedef struct {
    int np;
    uint32_t nchunks;
    tcuda_chunk *chunks; /* nchunks entries */
    uint32_t *first;     /* np + 1 entries */
} tcuda_plan;

/* counts[i] = elements of param i. */
int tcuda_plan_build(const size_t *counts, int np, size_t chunk,
                     tcuda_plan *out);
void tcuda_plan_free(tcuda_plan *p);

#ifdef __cplusplus
}
#endif

#endif
