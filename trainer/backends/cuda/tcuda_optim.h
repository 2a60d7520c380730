/* trainer/backends/cuda/tcuda_optim.h: the optimizer kernels of the cuda
 * backend (prefix tcuda_optim_), the seam between the backend's ops
 * (cuda_backend.c: param_sumsq, sgd_update, refresh_work of
 * trainer/engine/backend.h) and the multi-tensor kernels
 * (cuda_optim.cu).
 *
 * Contract:
 * - A plan is built once per bind from the net's params (their device
 *   pointers do not move until the next release/bind). It holds the
 *   multi-tensor chunk plan (which block handles which slice of which
 *   param) in device memory, so a call launches a fixed, small number of
 *   kernels whatever the number of tensors (ResNet-50: 161), and never one
 *   launch or one host sync per tensor.
 * - All work goes to the given stream, in order. tcuda_optim_sumsq is the
 *   only call that waits for the stream: it returns host values (LARS needs
 *   every tensor's norms on the host to form the trust ratios).
 * - Sums of squares are accumulated in fp32 (per block) and combined in
 *   fp32; the update is teng_host_sgd's maths element by element
 *   (trainer/engine/host_kernels.c): v = momentum * v + lr * (g + wd * w);
 *   w -= v; then the working copy, where it is not the master, becomes the
 *   rounded master (fp16 round-to-nearest-even, or bf16).
 * - Errors follow common/torus_error.h: a teng_status after TORUS_FAIL,
 *   naming the CUDA call and its error string. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_OPTIM_H
#define TORUS_TRAINER_BACKENDS_CUDA_OPTIM_H

#include <stddef.h>

#include "trainer/engine/teng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tcuda_optim tcuda_optim;

/* One param as the kernels see it (device pointers). */
typedef struct {
    float *master;          /* fp32 master weights, count elements */
    void *work;             /* working copy; == master when work_dtype is TENG_F32 */
    teng_dtype work_dtype;  /* TENG_F32, TENG_F16 or TENG_BF16 */
    const float *grad;      /* fp32 gradient, count elements */
    size_t offset;          /* byte offset of the param in the params arena:
                             * also its place in optimizer-state buffers and in
                             * any buffer "laid out like the params arena" */
    size_t count;           /* elements */
} tcuda_optim_param;

/* Build the plan for np params; stream is a cudaStream_t. */
int tcuda_optim_create(const tcuda_optim_param *p, int np, void *stream,
                       tcuda_optim **out);
/* out[i] = sum of squares of param i's slice of buf (a device buffer laid
 * out like the params arena: the master weights or the gradients); out is
 * host memory of np floats. Waits for the stream. */
int tcuda_optim_sumsq(tcuda_optim *o, const void *buf, float *out);
/* For every param i, with a[i] (host memory, np entries): the momentum SGD
 * update of its master and its slice of vel (laid out like the params
 * arena), then its working copy. Does not wait. */
int tcuda_optim_sgd(tcuda_optim *o, void *vel, const teng_sgd_args *a);
/* Working copies := rounded masters, for every param (after the engine
 * wrote masters: initialisation, a restored checkpoint). Does not wait. */
int tcuda_optim_refresh(tcuda_optim *o);
void tcuda_optim_destroy(tcuda_optim *o);

#ifdef __cplusplus
}
#endif

#endif
