/* trainer/backends/cuda/cuda_kernels.h: launchers of the cuda backend's
 * own kernels (cuda_kernels.cu), for the layers no cuDNN or cuBLAS call
 * covers: residual add, ReLU backward from the output, gradient fan-in
 * sums, dropout, softmax cross-entropy, the FC bias, and the fp32 <-> fp16
 * conversions of the FP16 mode. The per-element maths is in cuda_math.h
 * (tested on the CPU). Each launcher queues its kernel on stream (a
 * cudaStream_t), never waits, and returns the launch's cudaError_t (0:
 * queued), which the caller reports. n is elements. half: the activation
 * buffers (x, y, a, b, dy, dx, c, the FC output) hold fp16, else fp32;
 * masks are bytes, biases, their gradients and the losses stay fp32. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_KERNELS_H
#define TORUS_TRAINER_BACKENDS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 unless TCUDA_VEC=0: whether the element-wise kernels (and the
 * optimizer's inf/nan count) take 16 bytes per access where the pointers
 * allow, and the cross-entropy a warp per row (cuda_kernels.cu). */
int tcuda_k_vec(void);
/* y = a + b, then max(0, y) if relu (y may be a). */
int tcuda_k_add(void *stream, int half, const void *a, const void *b, void *y,
                size_t n, int relu);
/* dx = y > 0 ? dy : 0 (dx may be dy). */
int tcuda_k_relu_bwd(void *stream, int half, const void *y, const void *dy,
                     void *dx, size_t n);
/* dst = c[0] + ... + c[nc-1], 1 <= nc <= 4 (dst may be c[0]), summed in
 * fp32. */
int tcuda_k_grad_sum(void *stream, int half, void *const *c, int nc, void *dst,
                     size_t n);
/* Inverted dropout with teng_host_dropout_fwd's masks; with nhwc, x and y
 * are NHWC images of chw = {C, H, W} and each element's mask is hashed
 * from its NCHW offset, so both layouts drop the same elements. */
int tcuda_k_dropout_fwd(void *stream, int half, const void *x, void *y,
                        uint8_t *mask, size_t n, float p, uint64_t key,
                        int nhwc, const int chw[3]);
int tcuda_k_dropout_bwd(void *stream, int half, const void *dy, void *dx,
                        const uint8_t *mask, size_t n, float p);
/* Per row of n rows of k fp32 logits: loss[i] (device doubles) and, if dz
 * is not NULL, dL/dz / norm in fp32 (teng_host_xent's maths). */
int tcuda_k_xent(void *stream, const float *z, const int32_t *labels, int n,
                 int k, float s, float norm, double *loss, float *dz);
/* The same with the normaliser formed on the device when it runs:
 * norm = (float)(gbatch / *scale), scale a device double (the loss
 * scale that the device's loss-scale decision keeps). */
int tcuda_k_xent_dev(void *stream, const float *z, const int32_t *labels, int n,
                     int k, float s, double gbatch, const double *scale,
                     double *loss, float *dz);
/* y[i][j] += b[j] over n rows of k; db[j] = sum over rows of dy[i][j]. */
int tcuda_k_bias_add(void *stream, int half, void *y, const float *b, int n,
                     int k);
int tcuda_k_bias_grad(void *stream, int half, const void *dy, float *db, int n,
                      int k);
/* fp32 -> fp16 (round to nearest even) and fp16 -> fp32. */
int tcuda_k_to_f16(void *stream, const float *src, uint16_t *dst, size_t n);
int tcuda_k_to_f32(void *stream, const uint16_t *src, float *dst, size_t n);
/* The same with the layout change of tensor I/O in FP16 mode: fp32 NCHW
 * images of chw = {C, H, W} to fp16 NHWC, and back. */
int tcuda_k_to_f16_nhwc(void *stream, const float *src, uint16_t *dst, size_t n,
                        const int chw[3]);
int tcuda_k_to_f32_nchw(void *stream, const uint16_t *src, float *dst, size_t n,
                        const int chw[3]);

/* The data input from u8 NHWC images px (n elements of the output, whose
 * images are chw = {C, H, W}; flips: a byte per image): each element
 * normalised with scale/bias of its channel and mirrored where its image's
 * flip byte is set (data/read/tdata_norm.h), into y as fp32 NCHW, or with
 * half as fp16 NHWC (round to nearest even). */
int tcuda_k_input_u8(void *stream, int half, const uint8_t *px,
                     const uint8_t *flips, void *y, size_t n, const int chw[3],
                     const float scale[3], const float bias[3]);

#ifdef __cplusplus
}
#endif

#endif
