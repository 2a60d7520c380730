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
 *   teng_sgd_elem and writes the rounded working copy (optim_math.h: the
 *   maths the CPU tests check).
 * - refresh: one kernel, working copies := rounded masters.
 * - the device step (tcuda_optim_step), with no host wait: the
 *   LARS sums of squares of masters and gradients in one pass into device
 *   arrays (when a tensor uses LARS), the step's LR up in one async H2D
 *   copy of a fixed pinned ring, one kernel that forms each tensor's
 *   arguments itself (teng_sgd_hyper: trust ratio, 1/scale folded in) and
 *   updates, and returns at once when the step's inf/nan count is not 0;
 *   then a one-thread kernel runs the loss-scale decision
 *   (teng_ls_decide), clears the count and its state goes to a pinned
 *   mirror by an async copy, which the host reads when it wants to.
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
#include "trainer/backends/cuda/cuda_kernels.h"
#include "trainer/backends/cuda/optim_math.h"
#include "trainer/backends/cuda/tcuda_optim.h"

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
    /* the device step (tcuda_optim_device_open) */
    int dev_open, any_lars;
    teng_tensor_hyper *d_hyper;   /* np constant hyper-parameters */
    float *d_w2, *d_g2, *d_gpart; /* np, np, nchunks */
    /* the steps' lr: a pinned ring of SLOTS, copied whole to the device
     * ring every step (one fixed source: a step graph can record it);
     * step q reads slot q % SLOTS, q counted by the device (decided) and
     * the host (q) alike; the host rewrites a slot after sev[slot], which
     * follows the step that last used it */
    tcuda_step_args *d_step; /* SLOTS */
    tcuda_step_args *h_step; /* pinned, SLOTS */
    cudaEvent_t sev[SLOTS];
    int sev_live[SLOTS];
    long q;             /* the next step's number (teng_dstep_state.decided) */
    tcuda_ls_dev *d_ls; /* state, config, inf/nan count */
    teng_dstep_state *h_ls; /* pinned mirror of d_ls->s */
    cudaEvent_t ev_ls;      /* after the mirror's last copy */
    int ls_live;
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

/* Both partial sums of squares of a chunk: masters into wpart, gradients
 * into gpart (the block reduction of _k_sumsq, twice). */
__global__ static void _k_sumsq2(const tcuda_chunk *chunks,
                                 const tcuda_dparam *ps, float *wpart,
                                 float *gpart)
{
    __shared__ float rw[THREADS], rg[THREADS];
    tcuda_chunk c = chunks[blockIdx.x];
    tcuda_sumsq2_thread(&ps[c.param], c.begin, c.end, threadIdx.x, THREADS,
                        &rw[threadIdx.x], &rg[threadIdx.x]);
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) {
            rw[threadIdx.x] += rw[threadIdx.x + w];
            rg[threadIdx.x] += rg[threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        wpart[blockIdx.x] = rw[0];
        gpart[blockIdx.x] = rg[0];
    }
}

/* The update with the arguments formed here from the device norms; a
 * step whose inf/nan count is not 0 changes nothing. ls->s.scale is the
 * scale the step ran at (the decision that changes it runs after). */
__global__ static void _k_step(const tcuda_chunk *chunks,
                               const tcuda_dparam *ps, char *vel,
                               const teng_tensor_hyper *hyp, const float *w2,
                               const float *g2, const tcuda_step_args *ring,
                               const tcuda_ls_dev *ls)
{
    if (ls->bad)
        return;
    const tcuda_step_args *st = &ring[ls->s.decided % SLOTS];
    tcuda_chunk c = chunks[blockIdx.x];
    tcuda_dparam p = ps[c.param];
    teng_tensor_hyper h = hyp[c.param];
    /* (float) of the double, as sgd.c's host code rounds it */
    float mom = (float)teng_momentum(ls->c.momentum, ls->c.correction, st->lr,
                                     ls->s.prev_lr);
    tcuda_step_thread(&p, vel, &h, w2[c.param], g2[c.param], st->lr, mom,
                      ls->s.scale, 0, c.begin, c.end, threadIdx.x, THREADS);
}

/* The inf/nan count of every gradient, added into ls->bad (one rank: no
 * exchange counts them). */
__global__ static void _k_nonfinite(const tcuda_chunk *chunks,
                                    const tcuda_dparam *ps, tcuda_ls_dev *ls,
                                    int vec)
{
    tcuda_chunk c = chunks[blockIdx.x];
    unsigned n = vec ? tcuda_nonfinite_thread_v(&ps[c.param], c.begin, c.end,
                                                threadIdx.x, THREADS)
                     : tcuda_nonfinite_thread(&ps[c.param], c.begin, c.end,
                                              threadIdx.x, THREADS);
    if (n)
        atomicAdd(&ls->bad, (unsigned long long)n);
}

/* One thread: the step's decision (with its loss from the loss layer's
 * per-row losses, NULL: none), then the count starts again at 0. */
__global__ static void _k_decide(tcuda_ls_dev *ls, const tcuda_step_args *ring,
                                 const double *rows, int n, int batch)
{
    const tcuda_step_args *st = &ring[ls->s.decided % SLOTS];
    double loss = rows ? teng_step_loss(rows, n, batch) : 0.0;
    teng_ls_decide(&ls->s, &ls->c, ls->bad, st->lr, loss);
    ls->bad = 0;
}

__global__ static void _k_window_reset(tcuda_ls_dev *ls)
{
    ls->s.loss_sum = 0.0;
    ls->s.applied = 0;
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
    if (o->ls_live)
        cudaEventSynchronize(o->ev_ls);
    if (o->ev_ls)
        cudaEventDestroy(o->ev_ls);
    for (int s = 0; s < SLOTS; s++) {
        if (o->sev_live[s])
            cudaEventSynchronize(o->sev[s]);
        if (o->sev[s])
            cudaEventDestroy(o->sev[s]);
    }
    cudaFreeHost(o->h_ls);
    cudaFreeHost(o->h_step);
    cudaFree(o->d_ls);
    cudaFree(o->d_step);
    cudaFree(o->d_gpart);
    cudaFree(o->d_g2);
    cudaFree(o->d_w2);
    cudaFree(o->d_hyper);
    cudaFreeHost(o->h_sums);
    cudaFree(o->d_args);
    cudaFree(o->d_sums);
    cudaFree(o->d_part);
    cudaFree(o->d_first);
    cudaFree(o->d_chunks);
    cudaFree(o->d_params);
    free(o);
}

/* ------------------------------------------------- the device step */

static int _device_alloc(tcuda_optim *o)
{
    size_t np = o->np ? (size_t)o->np : 1, nc = o->nchunks ? o->nchunks : 1;
    _CK(cudaMalloc((void **)&o->d_hyper, np * sizeof(teng_tensor_hyper)));
    _CK(cudaMalloc((void **)&o->d_w2, np * sizeof(float)));
    _CK(cudaMalloc((void **)&o->d_g2, np * sizeof(float)));
    _CK(cudaMalloc((void **)&o->d_gpart, nc * sizeof(float)));
    _CK(cudaMalloc((void **)&o->d_step, SLOTS * sizeof(tcuda_step_args)));
    for (int s = 0; s < SLOTS; s++)
        _CK(cudaEventCreateWithFlags(&o->sev[s], cudaEventDisableTiming));
    _CK(cudaMallocHost((void **)&o->h_step, SLOTS * sizeof(tcuda_step_args)));
    _CK(cudaMalloc((void **)&o->d_ls, sizeof(tcuda_ls_dev)));
    _CK(cudaMallocHost((void **)&o->h_ls, sizeof(teng_dstep_state)));
    _CK(cudaEventCreateWithFlags(&o->ev_ls, cudaEventDisableTiming));
    return TENG_OK;
}

extern "C" int tcuda_optim_device_open(tcuda_optim *o,
                                       const teng_tensor_hyper *h,
                                       const teng_dstep_config *c,
                                       const teng_dstep_state *s)
{
    int rc;
    if (!o->dev_open && (rc = _device_alloc(o)))
        return rc;
    o->dev_open = 1;
    o->any_lars = 0;
    for (int i = 0; i < o->np; i++)
        o->any_lars |= h[i].lars != 0;
    tcuda_ls_dev d = {};
    d.s = *s;
    d.c = *c;
    /* Blocking: at open or restore, never inside a step. */
    _CK(cudaStreamSynchronize(o->stream));
    _CK(cudaMemcpy(o->d_hyper, h, (size_t)o->np * sizeof *h,
                   cudaMemcpyHostToDevice));
    _CK(cudaMemcpy(o->d_ls, &d, sizeof d, cudaMemcpyHostToDevice));
    *o->h_ls = *s;
    o->ls_live = 0;
    o->q = s->decided;
    return TENG_OK;
}

extern "C" unsigned long long *tcuda_optim_bad(tcuda_optim *o)
{
    return o->dev_open ? &o->d_ls->bad : NULL;
}

extern "C" const double *tcuda_optim_scale(tcuda_optim *o)
{
    return o->dev_open ? &o->d_ls->s.scale : NULL;
}

extern "C" int tcuda_optim_count_nonfinite(tcuda_optim *o)
{
    if (!o->dev_open)
        return TORUS_FAIL(TENG_ESTATE, "cuda optimizer: device step not open");
    if (o->nchunks)
        _k_nonfinite<<<o->nchunks, THREADS, 0, o->stream>>>(
            o->d_chunks, o->d_params, o->d_ls, tcuda_k_vec());
    _CK(cudaGetLastError());
    return TENG_OK;
}

extern "C" int tcuda_optim_step_begin(tcuda_optim *o, double lr)
{
    if (!o->dev_open)
        return TORUS_FAIL(TENG_ESTATE, "cuda optimizer: device step not open");
    int s = (int)(o->q % SLOTS);
    if (o->sev_live[s]) /* only when SLOTS steps ahead of the GPU */
        _CK(cudaEventSynchronize(o->sev[s]));
    o->h_step[s] = (tcuda_step_args){lr};
    return TENG_OK;
}

/* Device work only, the same every step (a step graph may record it). */
extern "C" int tcuda_optim_step_queue(tcuda_optim *o, void *vel,
                                      const double *loss_rows, int nrows,
                                      int batch)
{
    if (!o->dev_open)
        return TORUS_FAIL(TENG_ESTATE, "cuda optimizer: device step not open");
    _CK(cudaMemcpyAsync(o->d_step, o->h_step, SLOTS * sizeof *o->h_step,
                        cudaMemcpyHostToDevice, o->stream));
    if (o->any_lars && o->nchunks) {
        _k_sumsq2<<<o->nchunks, THREADS, 0, o->stream>>>(
            o->d_chunks, o->d_params, o->d_part, o->d_gpart);
        _k_sumsq_param<<<o->np, 32, 0, o->stream>>>(o->d_first, o->d_part,
                                                    o->d_w2);
        _k_sumsq_param<<<o->np, 32, 0, o->stream>>>(o->d_first, o->d_gpart,
                                                    o->d_g2);
    }
    if (o->nchunks)
        _k_step<<<o->nchunks, THREADS, 0, o->stream>>>(
            o->d_chunks, o->d_params, (char *)vel, o->d_hyper, o->d_w2, o->d_g2,
            o->d_step, o->d_ls);
    _k_decide<<<1, 1, 0, o->stream>>>(o->d_ls, o->d_step, loss_rows, nrows,
                                      batch > 0 ? batch : 1);
    _CK(cudaGetLastError());
    _CK(cudaMemcpyAsync(o->h_ls, &o->d_ls->s, sizeof *o->h_ls,
                        cudaMemcpyDeviceToHost, o->stream));
    return TENG_OK;
}

extern "C" int tcuda_optim_step_end(tcuda_optim *o)
{
    if (!o->dev_open)
        return TORUS_FAIL(TENG_ESTATE, "cuda optimizer: device step not open");
    int s = (int)(o->q % SLOTS);
    _CK(cudaEventRecord(o->sev[s], o->stream));
    o->sev_live[s] = 1;
    _CK(cudaEventRecord(o->ev_ls, o->stream));
    o->ls_live = 1;
    o->q++;
    return TENG_OK;
}

extern "C" int tcuda_optim_step(tcuda_optim *o, void *vel, double lr,
                                const double *loss_rows, int nrows, int batch)
{
    int rc = tcuda_optim_step_begin(o, lr);
    if (!rc)
        rc = tcuda_optim_step_queue(o, vel, loss_rows, nrows, batch);
    return rc ? rc : tcuda_optim_step_end(o);
}

extern "C" int tcuda_optim_ls_read(tcuda_optim *o, teng_dstep_state *s,
                                   int reset_window)
{
    if (!o->dev_open)
        return TORUS_FAIL(TENG_ESTATE, "cuda optimizer: device step not open");
    if (o->ls_live)
        _CK(cudaEventSynchronize(o->ev_ls));
    *s = *o->h_ls;
    if (reset_window) { /* queued: the next decision starts a new window */
        _k_window_reset<<<1, 1, 0, o->stream>>>(o->d_ls);
        _CK(cudaGetLastError());
        o->h_ls->loss_sum = 0.0;
        o->h_ls->applied = 0;
    }
    return TENG_OK;
}
