/* trainer/backends/cuda/tcuda.h: the cuDNN/cuBLAS GPU backend's descriptor
 * (prefix tcuda_), for the registry (trainer/backends/registry.c) only.
 * Built when configure found CUDA, cuDNN and cuBLAS (TORUS_HAVE_CUDNN). */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_H
#define TORUS_TRAINER_BACKENDS_CUDA_H

#include "trainer/engine/backend.h"

/* "cuda" (alias "gpu"); its probe is 1 when cudaGetDeviceCount finds a
 * device. */
extern const teng_backend_desc tcuda_backend_desc;
/* "cuda-fp16": fp16 activations and working copies, fp32 masters (see
 * cuda_internal.h); never chosen by "auto". */
extern const teng_backend_desc tcuda_backend_fp16_desc;
/* Devices this process sees (cudaGetDeviceCount; 0 when CUDA fails). */
int tcuda_device_count(void);
/* Device memory in use and in all on bk's device (cudaMemGetInfo: every
 * process's use, not only this backend's). Returns 0, or -1 when bk is not
 * a cuda backend or the query fails. */
int tcuda_device_memory(const teng_backend *bk, size_t *used, size_t *total);

#endif
