/* trainer/backends/cuda/cuda_grid.h: the launch geometry the backend's
 * element-wise kernels share (cuda_kernels.cu, cuda_stem.cu): 256 threads
 * a block, at most 65535 blocks, and grid-stride loops over the rest, so a
 * launch is valid for any element count on any GPU. Device code only. */
#ifndef TORUS_CUDA_GRID_H
#define TORUS_CUDA_GRID_H

#include <stddef.h>

#define TCUDA_THREADS 256

/* Enough blocks to fill any GPU; the loops stride over the rest. */
static inline unsigned tcuda_blocks(size_t n)
{
    size_t b = (n + TCUDA_THREADS - 1) / TCUDA_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

#define TCUDA_FOR(i, n)                                                     \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

#endif
