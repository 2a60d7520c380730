/* trainer/backends/cuda/cuda_optim.cu: the cuda backend's multi-tensor
 * optimizer kernels behind tcuda_optim.h.
 *
 * A call is a fixed number of launches over the chunk plan (chunk_plan.h,
 * one block per chunk of at most 64 KiB of fp32), whatever the number of
 * params:
 * - sumsq: one kernel writes each chunk's fp32 partial sum of squares, one
 *   kernel (a warp per param) folds a param's partials in a fixed order
 *   (deterministic: no atomics), then one D2H copy and one stream sync.
 * - sgd: the per-param args go up in one async H2D copy from a pinned
 *   slot (a ring of slots, each reused only after its copy has run, so
 *   the host never overwrites a copy still queued), then one kernel runs
 *   tcuda_sgd_elem and writes the rounded working copy (optim_math.h: the
 *   maths the CPU tests check).
 * - refresh: one kernel, working copies := rounded masters.
 * The per-thread loops are optim_math.h's, which the CPU tests run over
 * the same plan.
 * Every CUDA error becomes TENG_EBACKEND after TORUS_FAIL naming the call. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "common/torus_error.h"
}
#include "trainer/backends/cuda/chunk_plan.h"
#include "trainer/backends/cuda/tcuda_optim.h"
#include "trainer/backends/cuda/optim_math.h"

#define THREADS 256 /* per block; 64 elements per thread in a full chunk */
#define SLOTS   4   /* pinned argument slots in flight */

struct tcuda_optim {
    cudaStream_t stream;
    int np;
    uint32_t nchunks;
    tcuda_dparam *d_params;
    tcuda_chunk *d_chunks;
    uint32_t *d_first; /* np + 1: param i owns chunks [first[i], first[i+1]) */
    float *d_part;     /* nchunks partial sums */
    float *d_sums;     /* np sums */
    float *h_sums;     /* pinned, np */
    teng_sgd_args *d_args;
    teng_sgd_args *h_args[SLOTS]; /* pinned */
    cudaEvent_t ev[SLOTS];        /* recorded after slot's copy */
    int ev_live[SLOTS];
    int slot;
};

#define _CK(call)                                                             \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess)                                                \
            return TORUS_FAIL(TENG_EBACKEND, "cuda optimizer: %s: %s", #call, \
                              cudaGetErrorString(e_));                        \
    } while (0)

/* ------------------------------------------------------------- kernels */

__global__ static void _k_sumsq(const tcuda_chunk *chunks,
                                const tcuda_dparam *ps, const char *buf,
                                float *part)
{
    __shared__ float red[THREADS];
    tcuda_chunk c = chunks[blockIdx.x];
    red[threadIdx.x] = tcuda_sumsq_thread(&ps[c.param], buf, c.begin, c.end,
                                          threadIdx.x, THREADS);
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        part[blockIdx.x] = red[0];
}

/* One warp per param: lanes take its partials in turn, then fold. */
__global__ static void _k_sumsq_param(const uint32_t *first, const float *part,
                                      float *sums)
{
    uint32_t p = blockIdx.x;
    float s = 0.f;
    for (uint32_t c = first[p] + threadIdx.x; c < first[p + 1]; c += 32)
        s += part[c];
    for (int off = 16; off > 0; off /= 2)
        s += __shfl_down_sync(0xffffffffu, s, off);
    if (threadIdx.x == 0)
        sums[p] = s;
}

__global__ static void _k_sgd(const tcuda_chunk *chunks, const tcuda_dparam *ps,
                              char *vel, const teng_sgd_args *args)
{
    tcuda_chunk c = chunks[blockIdx.x];
    tcuda_dparam p = ps[c.param];
    teng_sgd_args a = args[c.param];
    tcuda_sgd_thread(&p, vel, &a, c.begin, c.end, threadIdx.x, THREADS);
}

__global__ static void _k_refresh(const tcuda_chunk *chunks,
                                  const tcuda_dparam *ps)
{
    tcuda_chunk c = chunks[blockIdx.x];
    tcuda_dparam p = ps[c.param];
    tcuda_refresh_thread(&p, c.begin, c.end, threadIdx.x, THREADS);
}

/* ---------------------------------------------------------------- host */

static int _check_param(const tcuda_optim_param *p, int i)
{
    if (p->work_dtype != TENG_F32 && p->work_dtype != TENG_F16 &&
        p->work_dtype != TENG_BF16)
        return TORUS_FAIL(TENG_EINVAL, "cuda optimizer: param %d: dtype %d", i,
                          (int)p->work_dtype);
    if (p->offset % sizeof(float))
        return TORUS_FAIL(TENG_EINVAL,
                          "cuda optimizer: param %d: offset %zu is not a "
                          "multiple of 4",
                          i, p->offset);
    if (p->count && (!p->master || !p->grad || !p->work))
        return TORUS_FAIL(TENG_EINVAL,
                          "cuda optimizer: param %d: NULL "
                          "master, gradient or working copy",
                          i);
    if (p->work_dtype == TENG_F32 && p->work != p->master)
        return TORUS_FAIL(TENG_EINVAL,
                          "cuda optimizer: param %d: an fp32 working copy "
                          "must be the master",
                          i);
    return TENG_OK;
}

/* The device tables: params, chunks, first; and the scratch buffers. */
static int _upload(tcuda_optim *o, const tcuda_optim_param *p,
                   const tcuda_plan *plan)
{
    size_t np = (size_t)o->np, nc = plan->nchunks ? plan->nchunks : 1;
    tcuda_dparam *h = (tcuda_dparam *)calloc(np ? np : 1, sizeof *h);
    if (!h)
        return TORUS_FAIL(TENG_ENOMEM, "cuda optimizer: no host memory");
    for (size_t i = 0; i < np; i++)
        h[i] = (tcuda_dparam){p[i].master, p[i].work, p[i].grad, p[i].offset,
                              (int)p[i].work_dtype};
    cudaError_t e =
        cudaMalloc((void **)&o->d_params, (np ? np : 1) * sizeof *h);
    if (e == cudaSuccess)
        e = cudaMemcpy(o->d_params, h, np * sizeof *h, cudaMemcpyHostToDevice);
    free(h);
    _CK(e);
    _CK(cudaMalloc((void **)&o->d_chunks, nc * sizeof(tcuda_chunk)));
    _CK(cudaMemcpy(o->d_chunks, plan->chunks,
                   plan->nchunks * sizeof(tcuda_chunk),
                   cudaMemcpyHostToDevice));
    _CK(cudaMalloc((void **)&o->d_first, (np + 1) * sizeof(uint32_t)));
    _CK(cudaMemcpy(o->d_first, plan->first, (np + 1) * sizeof(uint32_t),
                   cudaMemcpyHostToDevice));
    _CK(cudaMalloc((void **)&o->d_part, nc * sizeof(float)));
    _CK(cudaMalloc((void **)&o->d_sums, (np ? np : 1) * sizeof(float)));
    _CK(cudaMalloc((void **)&o->d_args, (np ? np : 1) * sizeof(teng_sgd_args)));
    _CK(cudaMallocHost((void **)&o->h_sums, (np ? np : 1) * sizeof(float)));
    for (int s = 0; s < SLOTS; s++) {
        _CK(cudaMallocHost((void **)&o->h_args[s],
                           (np ? np : 1) * sizeof(teng_sgd_args)));
        _CK(cudaEventCreateWithFlags(&o->ev[s], cudaEventDisableTiming));
    }
    return TENG_OK;
}

extern "C" int tcuda_optim_create(const tcuda_optim_param *p, int np,
                                  void *stream, tcuda_optim **out)
{
    *out = NULL;
    if (np < 0 || (np > 0 && !p))
        return TORUS_FAIL(TENG_EINVAL, "cuda optimizer: %d params", np);
    size_t *counts = (size_t *)malloc((np ? (size_t)np : 1) * sizeof *counts);
    tcuda_optim *o = (tcuda_optim *)calloc(1, sizeof *o);
    if (!counts || !o) {
        free(counts);
        free(o);
        return TORUS_FAIL(TENG_ENOMEM, "cuda optimizer: no host memory");
    }
    int rc = TENG_OK;
    for (int i = 0; i < np && !rc; i++) {
        rc = _check_param(&p[i], i);
        counts[i] = p[i].count;
    }
    tcuda_plan plan = {};
    if (!rc)
        rc = tcuda_plan_build(counts, np, TCUDA_PLAN_CHUNK, &plan);
    free(counts);
    o->stream = (cudaStream_t)stream;
    o->np = np;
    o->nchunks = plan.nchunks;
    if (!rc)
        rc = _upload(o, p, &plan);
    tcuda_plan_free(&plan);
    if (rc) {
        tcuda_optim_destroy(o);
        return rc;
    }
    *out = o;
    return TENG_OK;
}

extern "C" int tcuda_optim_sumsq(tcuda_optim *o, const void *buf, float *out)
{
    if (o->np == 0)
        return TENG_OK;
    if (o->nchunks)
        _k_sumsq<<<o->nchunks, THREADS, 0, o->stream>>>(
            o->d_chunks, o->d_params, (const char *)buf, o->d_part);
    _k_sumsq_param<<<o->np, 32, 0, o->stream>>>(o->d_first, o->d_part,
                                                o->d_sums);
    _CK(cudaGetLastError());
    _CK(cudaMemcpyAsync(o->h_sums, o->d_sums, (size_t)o->np * sizeof(float),
                        cudaMemcpyDeviceToHost, o->stream));
    _CK(cudaStreamSynchronize(o->stream));
    memcpy(out, o->h_sums, (size_t)o->np * sizeof(float));
    return TENG_OK;
}

extern "C" int tcuda_optim_sgd(tcuda_optim *o, void *vel,
                               const teng_sgd_args *a)
{
    if (o->nchunks == 0)
        return TENG_OK;
    int s = o->slot;
    /* The slot's previous copy must have run before the host rewrites it
     * (it waits only when the host is SLOTS updates ahead of the GPU). */
    if (o->ev_live[s])
        _CK(cudaEventSynchronize(o->ev[s]));
    size_t bytes = (size_t)o->np * sizeof(teng_sgd_args);
    memcpy(o->h_args[s], a, bytes);
    _CK(cudaMemcpyAsync(o->d_args, o->h_args[s], bytes, cudaMemcpyHostToDevice,
                        o->stream));
    _CK(cudaEventRecord(o->ev[s], o->stream));
    o->ev_live[s] = 1;
    o->slot = (s + 1) % SLOTS;
    _k_sgd<<<o->nchunks, THREADS, 0, o->stream>>>(o->d_chunks, o->d_params,
                                                  (char *)vel, o->d_args);
    _CK(cudaGetLastError());
    return TENG_OK;
}

extern "C" int tcuda_optim_refresh(tcuda_optim *o)
{
    if (o->nchunks == 0)
        return TENG_OK;
    _k_refresh<<<o->nchunks, THREADS, 0, o->stream>>>(o->d_chunks, o->d_params);
    _CK(cudaGetLastError());
    return TENG_OK;
}

extern "C" void tcuda_optim_destroy(tcuda_optim *o)
{
    if (!o)
        return;
    for (int s = 0; s < SLOTS; s++) {
        /* A queued copy must have read its pinned slot before it goes. */
        if (o->ev_live[s])
            cudaEventSynchronize(o->ev[s]);
        if (o->ev[s])
            cudaEventDestroy(o->ev[s]);
        cudaFreeHost(o->h_args[s]);
    }
    cudaFreeHost(o->h_sums);
    cudaFree(o->d_args);
    cudaFree(o->d_sums);
    cudaFree(o->d_part);
    cudaFree(o->d_first);
    cudaFree(o->d_chunks);
    cudaFree(o->d_params);
    free(o);
}
