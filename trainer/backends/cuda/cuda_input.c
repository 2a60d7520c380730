/* trainer/backends/cuda/cuda_input.c: the cuda backend's 8-bit input path
 * (engine/backend.h, input_stage/input_use): u8 NHWC batches from the
 * loader's page-locked buffers go to one of two device staging slots on a
 * copy stream of their own, so the copy of the next batch overlaps the
 * step that runs; the data input tensor is then written by one kernel on
 * the compute stream (tcuda_k_input_u8: normalise and mirror with
 * data/read/tdata_norm.h's maths, NCHW fp32 or NHWC fp16 like tensor I/O).
 *
 * Ordering: a slot's copy waits (on the copy stream) for the kernel that
 * last read the slot (event used[slot]); input_use waits for the copy on
 * the host (event copied[slot]: the loader may reuse the buffer as soon as
 * it returns; by then the copy has long finished when the pipeline keeps
 * up) and on the compute stream. Device staging grows on the first batch
 * and on a larger batch only, never within steady steps.
 *
 * Labels (_tcuda_labels, the engine's upload_labels): copied into one of
 * two pinned slots, then to the device labels on the copy stream, which
 * first waits (on the device) for the last kernel that read them (event
 * lab_free, recorded by _tcuda_labels_read right after each loss kernel,
 * as an external event inside a step graph), not for all the compute
 * queued so far: the copy of the next step's labels overlaps the rest of
 * this step's backward and update. The compute stream waits for the copy
 * (event lab_copied[slot]). The host waits only to reuse a slot whose
 * copy, two steps back, has not run. */
#include <string.h>

#include "common/torus_error.h"
#include "trainer/backends/cuda/cuda_internal.h"
#include "trainer/backends/cuda/cuda_kernels.h"
#include "trainer/backends/cuda/cuda_stem.h"

int _tcuda_input_open(tcuda_impl *im)
{
    TCUDA_RT(cudaStreamCreateWithFlags(&im->copy, cudaStreamNonBlocking));
    TCUDA_RT(cudaEventCreateWithFlags(&im->lab_free, cudaEventDisableTiming));
    for (int i = 0; i < 2; i++) {
        TCUDA_RT(cudaEventCreateWithFlags(&im->lab_copied[i],
                                          cudaEventDisableTiming));
        TCUDA_RT(
            cudaEventCreateWithFlags(&im->copied[i], cudaEventDisableTiming));
        TCUDA_RT(
            cudaEventCreateWithFlags(&im->used[i], cudaEventDisableTiming));
    }
    return TENG_OK;
}

void _tcuda_input_close(tcuda_impl *im)
{
    if (im->copy)
        cudaStreamSynchronize(im->copy);
    for (int i = 0; i < 2; i++) {
        if (im->lab_host[i])
            cudaFreeHost(im->lab_host[i]);
        if (im->lab_copied[i])
            cudaEventDestroy(im->lab_copied[i]);
        if (im->stage[i])
            cudaFree(im->stage[i]);
        if (im->copied[i])
            cudaEventDestroy(im->copied[i]);
        if (im->used[i])
            cudaEventDestroy(im->used[i]);
    }
    if (im->lab_free)
        cudaEventDestroy(im->lab_free);
    if (im->copy)
        cudaStreamDestroy(im->copy);
}

int _tcuda_labels(teng_backend *bk, teng_net *net, const int32_t *labels, int n)
{
    tcuda_impl *im = _tcuda(bk);
    int s = im->lab_slot;
    if (im->lab_live[s]) /* its copy two steps back */
        TCUDA_RT(cudaEventSynchronize(im->lab_copied[s]));
    if ((size_t)n > im->lab_cap[s]) { /* the first batch, a larger one */
        if (im->lab_host[s])
            TCUDA_RT(cudaFreeHost(im->lab_host[s]));
        im->lab_host[s] = NULL;
        im->lab_cap[s] = 0;
        TCUDA_RT(cudaMallocHost((void **)&im->lab_host[s],
                                sizeof(int32_t) * (size_t)n));
        im->lab_cap[s] = (size_t)n;
    }
    memcpy(im->lab_host[s], labels, sizeof(int32_t) * (size_t)n);
    TCUDA_RT(cudaStreamWaitEvent(im->copy, im->lab_free, 0));
    TCUDA_RT(cudaMemcpyAsync(net->labels, im->lab_host[s],
                             sizeof(int32_t) * (size_t)n,
                             cudaMemcpyHostToDevice, im->copy));
    TCUDA_RT(cudaEventRecord(im->lab_copied[s], im->copy));
    TCUDA_RT(cudaStreamWaitEvent(im->stream, im->lab_copied[s], 0));
    im->lab_live[s] = 1;
    im->lab_slot = s ^ 1;
    return TENG_OK;
}

int _tcuda_labels_read(tcuda_impl *im)
{
    TCUDA_RT(cudaEventRecordWithFlags(im->lab_free, im->stream,
                                      cudaEventRecordExternal));
    return TENG_OK;
}

void *_tcuda_host_alloc(teng_backend *bk, size_t bytes)
{
    void *p = NULL;
    (void)bk;
    return cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) ==
                   cudaSuccess
               ? p
               : NULL;
}

void _tcuda_host_free(teng_backend *bk, void *p)
{
    (void)bk;
    if (p)
        cudaFreeHost(p);
}

/* Slot `slot` holds at least bytes; a new one only after its last reader
 * and copy finished. */
static int _room(tcuda_impl *im, int slot, size_t bytes)
{
    if (bytes <= im->stage_cap[slot])
        return TENG_OK;
    TCUDA_RT(cudaEventSynchronize(im->used[slot]));
    TCUDA_RT(cudaEventSynchronize(im->copied[slot]));
    if (im->stage[slot])
        TCUDA_RT(cudaFree(im->stage[slot]));
    im->stage[slot] = NULL;
    im->stage_cap[slot] = 0;
    TCUDA_RT(cudaMalloc((void **)&im->stage[slot], bytes));
    im->stage_cap[slot] = bytes;
    return TENG_OK;
}

int _tcuda_input_stage(teng_backend *bk, teng_net *net, int slot,
                       const uint8_t *px, const uint8_t *flips, int n)
{
    tcuda_impl *im = _tcuda(bk);
    size_t bytes =
        teng_tensor_count(net, net->input) / (size_t)net->batch * (size_t)n;
    int rc = _room(im, slot, bytes + (size_t)n);
    if (rc)
        return rc;
    TCUDA_RT(cudaStreamWaitEvent(im->copy, im->used[slot], 0));
    TCUDA_RT(cudaMemcpyAsync(im->stage[slot], px, bytes, cudaMemcpyHostToDevice,
                             im->copy));
    TCUDA_RT(cudaMemcpyAsync(im->stage[slot] + bytes, flips, (size_t)n,
                             cudaMemcpyHostToDevice, im->copy));
    TCUDA_RT(cudaEventRecord(im->copied[slot], im->copy));
    im->stage_n[slot] = n;
    return TENG_OK;
}

int _tcuda_input_use(teng_backend *bk, teng_net *net, int slot,
                     const float *scale, const float *bias)
{
    tcuda_impl *im = _tcuda(bk);
    teng_shape s = net->t[net->input].shape;
    size_t n = teng_tensor_count(net, net->input);
    int chw[3] = {s.c, s.h, s.w};
    if (im->stage_n[slot] != net->batch)
        return TORUS_FAIL(TENG_ESTATE,
                          "input slot %d holds %d images, the batch is %d",
                          slot, im->stage_n[slot], net->batch);
    TCUDA_RT(cudaEventSynchronize(im->copied[slot]));
    TCUDA_RT(cudaStreamWaitEvent(im->stream, im->copied[slot], 0));
    const tcuda_net *cn = net->bkstate;
    if (cn->stem >= 0) /* the padded layout, in the same one pass */
        TCUDA_K(tcuda_k_stem_input_u8(
            im->stream, im->stage[slot], im->stage[slot] + n,
            net->t[net->input].data, n / (size_t)s.c * (size_t)cn->stem_cp,
            chw, cn->stem_cp, scale, bias));
    else
        TCUDA_K(tcuda_k_input_u8(im->stream, im->half, im->stage[slot],
                                 im->stage[slot] + n, net->t[net->input].data,
                                 n, chw, scale, bias));
    TCUDA_RT(cudaEventRecord(im->used[slot], im->stream));
    im->stage_n[slot] = 0;
    return TENG_OK;
}
