/* host_kernels.h: f32 kernels on host memory for the pieces no library
 * primitive covers (loss, dropout, running statistics; the optimizer's
 * update is step_math.h's, inline).
 * Any backend whose device memory is host memory (the CPU backends) uses
 * these; a GPU backend provides its own with the same semantics. */
#ifndef TORUS_TRAINER_HOST_KERNELS_H
#define TORUS_TRAINER_HOST_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Softmax cross-entropy over n rows of k logits with label smoothing s:
 * the target is (1 - s) on the label plus s/k everywhere. Returns the sum
 * of per-row losses; if dlogits is not NULL writes dL/dlogits with every
 * row's gradient divided by norm (the global batch). */
double teng_host_xent(const float *logits, const int32_t *labels, int n, int k,
                      float s, float norm, float *dlogits);

/* Inverted dropout over n elements: y = x * mask / (1 - p), where mask[i]
 * is decided by hash(key + i) so it needs no stored random state. */
void teng_host_dropout_fwd(const float *x, float *y, uint8_t *mask, size_t n,
                           float p, uint64_t key);
void teng_host_dropout_bwd(const float *dy, float *dx, const uint8_t *mask,
                           size_t n, float p);

/* running = (1 - m) * running + m * batch; the variance is made unbiased
 * with count / (count - 1) first, as PyTorch does. */
void teng_host_bn_running(float *rmean, float *rvar, const float *mean,
                          const float *var, int c, float m, size_t count);

#endif
