/* transport/nccl_kernels.h: the CUDA kernels of the NCCL transport
 * (nccl_kernels.cu), callable from C. wire is a tcomm_wire. Each returns a
 * cudaError_t. */
#ifndef TORUS_TCOMM_NCCL_KERNELS_H
#define TORUS_TCOMM_NCCL_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* w[i] = wire(x[i] * scale) for i < n, 0 for n <= i < npad. */
int tcomm_cuda_pack(const float *x, void *w, size_t n, size_t npad, float scale,
                    int wire, cudaStream_t s);
/* x[i] = float(w[i]) for i < n; adds the inf/nan count to *bad. */
int tcomm_cuda_unpack(const void *w, float *x, size_t n, int wire,
                      unsigned long long *bad, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
