/* fusion/gpu_staged.c: the device fusion's staged path (gpu_path.h): each
 * bucket's span is copied to pinned host memory on the path's own stream
 * once the compute stream has produced it, the host fusion (fusion.c)
 * reduces it over the MPI transport, and its sum is copied back. One CUDA
 * event pair per bucket, recorded once per step (the plan launches each
 * bucket once per step), so events are created at seal and reused by
 * every step. The host fusion resolves its own routes (theta of one
 * byte: one host bucket per device bucket, same order). */
#include <stdlib.h>

#include "trainer/comm/fusion/gpu_path.h"

typedef struct {
    cudaStream_t comm;    /* copies both ways */
    tcomm_fusion_t *host; /* one tensor per bucket: its staged span */
    float *stage;         /* pinned: every bucket's span, bucket order */
    size_t *stage_off;    /* per bucket, floats into stage */
    cudaEvent_t *ready;   /* per bucket, on compute: its last layer */
    cudaEvent_t *staged;  /* per bucket, on comm: its copy to the host */
    cudaEvent_t done;     /* on comm: every copy back */
    int hnext;            /* next bucket handed to the host fusion */
} _staged;

#define CUDA_TRY(call) TC_GPU_CUDA_TRY(call)

static tcomm_rc _open(tcomm_gpu_t *g)
{
    _staged *s = calloc(1, sizeof *s);
    if (!s)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for the staged path");
    g->impl = s;
    CUDA_TRY(cudaStreamCreateWithFlags(&s->comm, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
    return TCOMM_OK;
}

/* Pinned memory for every bucket's span, one event pair per bucket, and
 * the host fusion over the staged spans. */
static tcomm_rc _seal(tcomm_gpu_t *g, size_t max_floats)
{
    _staged *s = g->impl;
    int nb = g->plan.nb;
    (void)max_floats;
    s->stage_off = calloc((size_t)nb + 1, sizeof *s->stage_off);
    s->ready = calloc((size_t)nb + 1, sizeof *s->ready);
    s->staged = calloc((size_t)nb + 1, sizeof *s->staged);
    if (!s->stage_off || !s->ready || !s->staged)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %d buckets", nb);
    for (int b = 0; b < nb; b++)
        s->stage_off[b + 1] =
            s->stage_off[b] + (g->plan.b[b].hi - g->plan.b[b].lo) / 4;
    CUDA_TRY(cudaMallocHost((void **)&s->stage,
                            (s->stage_off[nb] ? s->stage_off[nb] : 1) * 4));
    for (int b = 0; b < nb; b++) {
        CUDA_TRY(
            cudaEventCreateWithFlags(&s->ready[b], cudaEventDisableTiming));
        CUDA_TRY(
            cudaEventCreateWithFlags(&s->staged[b], cudaEventDisableTiming));
    }
    tcomm_fusion_options fo = {.bucket_bytes = 1,
                               .algo = g->o.algo,
                               .wire = g->o.wire,
                               .flags = g->o.flags};
    tcomm_rc rc = tcomm_fusion_create(g->c, &fo, &s->host);
    for (int b = 0; !rc && b < nb; b++)
        rc = tcomm_fusion_add(s->host, s->stage + s->stage_off[b],
                              s->stage_off[b + 1] - s->stage_off[b], "bucket",
                              NULL);
    return rc ? rc : tcomm_fusion_seal(s->host);
}

/* The host fusion's routes are the ones that run. */
static int _plan_text(const tcomm_gpu_t *g, char *buf, size_t n)
{
    const _staged *s = g->impl;
    return tcomm_fusion_plan_text(s->host, buf, n);
}

/* Staged buckets whose copy to the host is done go to the host fusion,
 * in order; block: wait for each (a local copy: no peer can hold it). */
static tcomm_rc _hand_over(tcomm_gpu_t *g, int block)
{
    _staged *s = g->impl;
    while (s->hnext < tc_plan_launched(&g->plan)) {
        cudaEvent_t ev = s->staged[s->hnext];
        cudaError_t e = block ? cudaEventSynchronize(ev) : cudaEventQuery(ev);
        if (e == cudaErrorNotReady)
            return TCOMM_OK;
        CUDA_TRY(e);
        tcomm_rc rc = tcomm_fusion_ready(s->host, s->hnext);
        if (rc)
            return rc;
        s->hnext++;
    }
    return TCOMM_OK;
}

static tcomm_rc _progress(tcomm_gpu_t *g)
{
    return _hand_over(g, 0);
}

static tcomm_rc _launch(tcomm_gpu_t *g, int b)
{
    _staged *s = g->impl;
    const tc_pbucket *k = &g->plan.b[b];
    size_t span = (k->hi - k->lo) / 4;
    CUDA_TRY(cudaEventRecord(s->ready[b], g->compute));
    CUDA_TRY(cudaStreamWaitEvent(s->comm, s->ready[b], 0));
    if (span)
        CUDA_TRY(cudaMemcpyAsync(s->stage + s->stage_off[b], (void *)k->lo,
                                 span * 4, cudaMemcpyDeviceToHost, s->comm));
    CUDA_TRY(cudaEventRecord(s->staged[b], s->comm));
    return TCOMM_OK;
}

/* Bucket b's sum back to the device, on the comm stream. */
static tcomm_rc _copy_back(tcomm_gpu_t *g, int b)
{
    _staged *s = g->impl;
    const tc_pbucket *k = &g->plan.b[b];
    if (k->hi > k->lo)
        CUDA_TRY(cudaMemcpyAsync((void *)k->lo, s->stage + s->stage_off[b],
                                 k->hi - k->lo, cudaMemcpyHostToDevice,
                                 s->comm));
    return TCOMM_OK;
}

/* The host sums; each bucket is copied back as soon as the host fusion
 * has reduced it (they are reduced in order), while it reduces the next;
 * then the compute stream waits for the last copy. The host's part is
 * the whole of it (never recorded). */
static tcomm_rc _finish_device(tcomm_gpu_t *g, tcomm_fusion_stats *st)
{
    _staged *s = g->impl;
    int nb = g->plan.nb, b = 0;
    tcomm_rc rc = _hand_over(g, 1); /* every bucket ready on the host */
    for (; !rc && b < nb && tcomm_fusion_wait(s->host, b + 1) > b; b++)
        rc = _copy_back(g, b);
    if (!rc)
        rc = tcomm_fusion_finish(s->host, st);
    for (; !rc && b < nb; b++) /* without a communication thread */
        rc = _copy_back(g, b);
    if (rc)
        return rc;
    CUDA_TRY(cudaEventRecord(s->done, s->comm));
    CUDA_TRY(cudaStreamWaitEvent(g->compute, s->done, 0));
    return TCOMM_OK;
}

/* A new step: no bucket handed over yet. */
static void _reset(tcomm_gpu_t *g)
{
    _staged *s = g->impl;
    if (s)
        s->hnext = 0;
}

static void _close(tcomm_gpu_t *g)
{
    _staged *s = g->impl;
    if (!s)
        return;
    if (s->comm)
        cudaStreamSynchronize(s->comm);
    tcomm_fusion_destroy(s->host);
    for (int b = 0; s->ready && b < g->plan.nb; b++) {
        if (s->ready[b])
            cudaEventDestroy(s->ready[b]);
        if (s->staged && s->staged[b])
            cudaEventDestroy(s->staged[b]);
    }
    if (s->done)
        cudaEventDestroy(s->done);
    if (s->comm)
        cudaStreamDestroy(s->comm);
    cudaFreeHost(s->stage);
    free(s->stage_off);
    free(s->ready);
    free(s->staged);
    free(s);
    g->impl = NULL;
}

const tc_gpu_ops tc_gpu_staged_ops = {
    .open = _open,
    .seal = _seal,
    .plan_text = _plan_text,
    .launch = _launch,
    .progress = _progress,
    .finish_device = _finish_device,
    .finish_host = NULL,
    .reset = _reset,
    .close = _close,
    .capturable = 0,
};
