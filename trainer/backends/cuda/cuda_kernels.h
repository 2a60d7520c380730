/* trainer/backends/cuda/cuda_kernels.h: launchers of the cuda backend's
 * own kernels (cuda_kernels.cu), for the layers no cuDNN or cuBLAS call
 * covers: residual add, ReLU backward from the output, gradient fan-in
 * sums, dropout, softmax cross-entropy, the FC bias. The per-element maths
 * is in cuda_math.h (tested on the CPU). Each launcher queues its kernel
 * on stream (a cudaStream_t), never waits, and returns the launch's
 * cudaError_t (0: queued), which the caller reports. n is elements. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_KERNELS_H
#define TORUS_TRAINER_BACKENDS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y = a + b, then max(0, y) if relu (y may be a). */
int tcuda_k_add(void *stream, const float *a, const float *b, float *y,
                size_t n, int relu);
/* dx = y > 0 ? dy : 0 (dx may be dy). */
int tcuda_k_relu_bwd(void *stream, const float *y, const float *dy, float *dx,
                     size_t n);
/* dst = c[0] + ... + c[nc-1], 1 <= nc <= 4 (dst may be c[0]). */
int tcuda_k_grad_sum(void *stream, float *const *c, int nc, float *dst,
                     size_t n);
/* Inverted dropout with teng_host_dropout_fwd's masks. */
int tcuda_k_dropout_fwd(void *stream, const float *x, float *y, uint8_t *mask,
                        size_t n, float p, uint64_t key);
int tcuda_k_dropout_bwd(void *stream, const float *dy, float *dx,
                        const uint8_t *mask, size_t n, float p);
/* Per row of n rows of k logits: loss[i] (device doubles) and, if dz is
 * not NULL, dL/dz / norm (teng_host_xent's maths). */
int tcuda_k_xent(void *stream, const float *z, const int32_t *labels, int n,
                 int k, float s, float norm, double *loss, float *dz);
/* y[i][j] += b[j] over n rows of k; db[j] = sum over rows of dy[i][j]. */
int tcuda_k_bias_add(void *stream, float *y, const float *b, int n, int k);
int tcuda_k_bias_grad(void *stream, const float *dy, float *db, int n, int k);

#ifdef __cplusplus
}
#endif

#endif
