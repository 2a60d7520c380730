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
 *   fp32; the update is teng_sgd_span's maths element by element
 *   (teng_sgd_elem, trainer/engine/step_math.h):
 *   v = momentum * v + lr * (g + wd * w);
 *   w -= v; then the working copy, where it is not the master, becomes the
 *   rounded master (fp16 round-to-nearest-even, or bf16).
 * - Errors follow common/torus_error.h: a teng_status after TORUS_FAIL,
 *   naming the CUDA call and its error string. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_OPTIM_H
#define TORUS_TRAINER_BACKENDS_CUDA_OPTIM_H

#include <stddef.h>

#include "trainer/backends/cuda/optim_math.h"
#include "trainer/engine/teng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tcuda_optim tcuda_optim;

/* One param as the kernels see it (device pointers). */
typedef struct {
    float *master; /* fp32 master weights, count elements */
    void *work;    /* working copy; == master when work_dtype is TENG_F32 */
    teng_dtype work_dtype; /* TENG_F32, TENG_F16 or TENG_BF16 */
    const float *grad;     /* fp32 gradient, count elements */
    size_t offset;         /* byte offset of the param in the params arena:
                            * also its place in optimizer-state buffers and in
                            * any buffer "laid out like the params arena" */
    size_t count;          /* elements */
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

/* ---- the device step: an update with no host wait ----
 * device_open: the per-tensor constant hyper-parameters h (np entries,
 * topt_sgd_tensor_hyper), the loss-scale machine's config c and state s
 * (at the start, or restored from a checkpoint). Blocking: call it
 * outside a step; again to restore a state.
 * bad: the device count (unsigned long long) that the step's inf/nan
 * counts are added into (the exchange's, or count_nonfinite's with one
 * rank); the decision clears it. scale: the device double that holds the
 * loss scale the next step runs at (for teng_net_set_loss_scale_dev).
 * count_nonfinite: queue the count of every gradient's inf/nan into bad.
 * step: queue the update at lr: LARS norms on the device, the momentum
 * (teng_momentum, from the last applied step's lr that the device keeps)
 * and each tensor's arguments formed on the device by teng_sgd_hyper at
 * the scale the step ran at, nothing changed when bad is not 0; then the
 * decision (teng_ls_decide, with the step's loss from the loss layer's
 * nrows per-row losses at device loss_rows over batch; NULL: none) and
 * the async copy of its state to a pinned mirror. No host wait (the host
 * waits only when it is 4 steps ahead of the device, for a pinned
 * argument slot).
 * step is step_begin (host: the lr into the pinned ring, waiting only
 * for a slot 4 steps back), step_queue (device work only, the same every
 * step: a step graph may record it and replay it between a begin and an
 * end) and step_end (host: the events that order the ring and the mirror).
 * ls_read: waits for the last queued decision's copy; *s = its state;
 * with reset_window, the window (loss sum, applied steps) restarts at 0
 * from the next decision on. */
typedef struct {
    double lr;
} tcuda_step_args;

typedef struct {
    teng_dstep_state s;
    teng_dstep_config c;
    unsigned long long bad;
} tcuda_ls_dev;

int tcuda_optim_device_open(tcuda_optim *o, const teng_tensor_hyper *h,
                            const teng_dstep_config *c,
                            const teng_dstep_state *s);
unsigned long long *tcuda_optim_bad(tcuda_optim *o);
const double *tcuda_optim_scale(tcuda_optim *o);
int tcuda_optim_count_nonfinite(tcuda_optim *o);
int tcuda_optim_step(tcuda_optim *o, void *vel, double lr,
                     const double *loss_rows, int nrows, int batch);
int tcuda_optim_step_begin(tcuda_optim *o, double lr);
int tcuda_optim_step_queue(tcuda_optim *o, void *vel, const double *loss_rows,
                           int nrows, int batch);
int tcuda_optim_step_end(tcuda_optim *o);
int tcuda_optim_ls_read(tcuda_optim *o, teng_dstep_state *s, int reset_window);
void tcuda_optim_destroy(tcuda_optim *o);

#ifdef __cplusplus
}
#endif

#endif
