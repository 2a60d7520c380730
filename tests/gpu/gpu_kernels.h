/* gpu_kernels.h: C launchers for the GPU smoke check's kernels. */
#ifndef TORUS_TESTS_GPU_KERNELS_H
#define TORUS_TESTS_GPU_KERNELS_H
#include <stddef.h>

/* d_in holds k vectors of n floats; each is scaled, rounded to fp16 into
 * d_half (k*n halves), then summed per element in fp32 into d_acc. */
int gk_fp16_sum(const float *d_in, void *d_half, float *d_acc, float scale,
                int k, size_t n);
/* *d_out = sum of d_in[0..n) in double precision. */
int gk_sum(const float *d_in, double *d_out, size_t n);

#endif
