/* fusion/gpu_fusion.c: gradient exchange for device memory inside the
 * step (see tcomm_gpu.h for the contract). The bookkeeping (which
 * gradient goes in which bucket, ready counts, launch order) is the host
 * fusion's plan (plan.h); this file only adds what a launch is on each
 * path: an NCCL reduction of the bucket's span behind an event of the
 * compute stream, or a copy to pinned host memory that the host fusion
 * then reduces. One CUDA event per bucket (staged path), recorded once per
 * step (the plan launches each bucket once per step), so events are
 * created at seal and reused by every step. The NCCL path's buckets run
 * along the routes the plan resolved at seal (tc_plan_route over their
 * spans), so a launch asks the cost model nothing; the staged path's host
 * fusion resolves its own. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "trainer/comm/core/comm.h"
#include "trainer/comm/fusion/plan.h"
#include "trainer/comm/tcomm_gpu.h"
#ifdef TORUS_HAVE_NCCL
#include "trainer/comm/tcomm_nccl.h"
#endif

struct tcomm_gpu {
    tcomm_t *c;
    tcomm_gpu_options o;
    int path; /* TC_GPU_NCCL or TC_GPU_STAGED */
    int device;
    int gpu_id; /* the device's PCI bus id, hashed: the same GPU on a node
                 * whatever CUDA_VISIBLE_DEVICES numbers it */
    cudaStream_t compute, comm; /* comm: the staged path's own stream */
    tc_plan plan;
    int sealed;
#ifdef TORUS_HAVE_NCCL
    tcomm_nccl_t *nccl;
#endif
    /* staged */
    tcomm_fusion_t *host;       /* one tensor per bucket: its staged span */
    float *stage;               /* pinned: every bucket's span, bucket order */
    size_t *stage_off;          /* per bucket, floats into stage */
    cudaEvent_t *ready;         /* per bucket, on compute: its last layer */
    cudaEvent_t *staged;        /* per bucket, on comm: its copy to the host */
    cudaEvent_t done;           /* on comm: every copy back */
    int hnext;                  /* next bucket handed to the host fusion */
    tcomm_fusion_stats pending; /* finish_device's, for finish_host */
    /* nccl: per bucket, timing events around its reduction and whether
     * this step launched it (an empty bucket is skipped) */
    cudaEvent_t *tev;
    unsigned char *timed;
};

#define CUDA_TRY(call) TC_CUDA_TRY(g->c->info.rank, call)

#ifdef TORUS_HAVE_NCCL
enum { _HAVE_NCCL = 1 };
#else
enum { _HAVE_NCCL = 0 };
#endif

/* The path every rank takes, from every rank's node, GPU (hashed PCI bus
 * id), TCOMM_GPU preference and local status, by one sum over world
 * (exact: integers below 2^31 in doubles), then the same rule on all. A
 * rank whose own preparation failed (local, its message set) still takes
 * part, so that every rank fails with it instead of waiting for it. A
 * hash collision could only make two GPUs look alike, which picks the
 * staged path: slower, never wrong. */
enum { _K = 4 }; /* node, gpu, pref, failed */

static tcomm_rc _agree(tcomm_gpu_t *g, const int mine[_K], int *all)
{
    tcomm_t *c = g->c;
    int n = c->info.size;
    double *v = calloc(_K * (size_t)n, sizeof *v);
    if (!v)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %d ranks' devices",
                          n);
    for (int k = 0; k < _K; k++)
        v[k * n + c->info.rank] = mine[k];
    tcomm_rc rc = n > 1 ? tcomm_sum_double(c, v, _K * n) : TCOMM_OK;
    for (int i = 0; !rc && i < _K * n; i++)
        all[i] = (int)v[i];
    free(v);
    return rc;
}

static tcomm_rc _choose(tcomm_gpu_t *g, int pref, tcomm_rc local)
{
    int n = g->c->info.size;
    int mine[_K] = {g->c->info.node_id, g->gpu_id, pref < 0 ? 0 : pref,
                    local != TCOMM_OK};
    int *all = calloc(_K * (size_t)n, sizeof *all);
    tcomm_rc rc = TCOMM_OK;
    if (!all)
        rc = TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %d ranks", n);
    else
        rc = _agree(g, mine, all);
    for (int r = 0; !rc && r < n; r++) {
        if (!all[3 * n + r])
            continue;
        if (local) {
            rc = local; /* its own message: the reason */
            break;
        }
        rc = TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                        "rank %d could not set up its GPU gradient exchange, "
                        "so every rank gives up with it",
                        r);
    }
    int a = -1, b = -1;
    int path =
        rc ? 0
           : tc_gpu_choose(n, all, all + n, all + 2 * n, _HAVE_NCCL, &a, &b);
    if (!rc && path < 0 && a >= 0)
        rc = TORUS_FAIL(TCOMM_ERR_UNSUPPORTED,
                        "TCOMM_GPU=nccl, but ranks %d and %d run on the same "
                        "GPU of node %d, which NCCL refuses (use "
                        "TCOMM_GPU=staged or auto)",
                        a, b, all[a]);
    else if (!rc && path < 0)
        rc = TORUS_FAIL(TCOMM_ERR_UNSUPPORTED,
                        "TCOMM_GPU=nccl, but libtcomm was built without NCCL");
    g->path = path;
    free(all);
    return rc ? rc : local;
}

/* This rank's own part: its preference and its GPU. */
static tcomm_rc _local(tcomm_gpu_t *g, int *pref)
{
    const char *env = getenv("TCOMM_GPU");
    *pref = tc_gpu_parse(env);
    if (*pref < 0)
        return TORUS_FAIL(TCOMM_ERR_ENV,
                          "TCOMM_GPU='%s': expected auto, nccl or staged", env);
    CUDA_TRY(cudaGetDevice(&g->device));
    char bus[64] = "";
    CUDA_TRY(cudaDeviceGetPCIBusId(bus, sizeof bus, g->device));
    uint32_t h = 2166136261u;
    for (const char *p = bus; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    g->gpu_id = (int)(h & 0x7fffffffu);
    return TCOMM_OK;
}

static tcomm_rc _open(tcomm_gpu_t *g)
{
    int pref = 0;
    tcomm_rc local = _local(g, &pref);
    tcomm_rc rc = _choose(g, pref, local);
    if (rc)
        return rc;
#ifdef TORUS_HAVE_NCCL
    if (g->path == TC_GPU_NCCL)
        return tcomm_nccl_init(g->c, g->device, &g->nccl);
#endif
    CUDA_TRY(cudaStreamCreateWithFlags(&g->comm, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming));
    return TCOMM_OK;
}

tcomm_rc tcomm_gpu_create(tcomm_t *c, const tcomm_gpu_options *o,
                          void *compute_stream, tcomm_gpu_t **out)
{
    if ((unsigned)o->algo >= TCOMM_ALGO_COUNT ||
        (unsigned)o->wire >= TCOMM_WIRE_COUNT)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "gpu fusion: bad algorithm %d or wire "
                          "%d",
                          (int)o->algo, (int)o->wire);
    tcomm_gpu_t *g = calloc(1, sizeof *g);
    if (!g)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for the gpu fusion");
    g->c = c;
    g->o = *o;
    if (!g->o.bucket_bytes)
        g->o.bucket_bytes = TCOMM_FUSION_DEFAULT_BYTES;
    g->compute = (cudaStream_t)compute_stream;
    tcomm_rc rc = _open(g);
    if (rc) {
        tcomm_gpu_destroy(g);
        return rc;
    }
    *out = g;
    return TCOMM_OK;
}

const char *tcomm_gpu_path(const tcomm_gpu_t *g)
{
    return tc_gpu_name(g->path);
}

tcomm_rc tcomm_gpu_add(tcomm_gpu_t *g, float *grad, size_t count, int *index)
{
    if (g->sealed)
        return TORUS_FAIL(TCOMM_ERR_ARG, "gpu fusion: gradient added after "
                                         "seal");
    if (index)
        *index = g->plan.nt;
    return tc_plan_add(&g->plan, grad, count);
}

/* Every rank must launch the same buckets in the same order, or NCCL
 * pairs different reductions and hangs (and the staged path's host fusion
 * would only see the spans, not the tensors in them). One sum over world
 * of a 48-bit hash per rank (exact in a double) names the first that
 * differs. */
static tcomm_rc _check_layout(tcomm_gpu_t *g)
{
    tcomm_t *c = g->c;
    uint64_t h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ull)
    MIX(g->plan.nt);
    MIX(g->plan.nb);
    MIX(g->o.algo);
    MIX(g->o.wire | g->o.flags << 8);
    for (int i = 0; i < g->plan.nt; i++)
        MIX(g->plan.count[i]);
    for (int i = 0; i < g->plan.nb; i++)
        MIX(g->plan.b[i].first);
#undef MIX
    int n = c->info.size;
    if (n < 2)
        return TCOMM_OK;
    double *v = calloc((size_t)n, sizeof *v);
    if (!v)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for the layout check");
    v[c->info.rank] = (double)(h >> 16);
    tcomm_rc rc = tcomm_sum_double(c, v, n);
    for (int r = 1; !rc && r < n; r++)
        if (v[r] != v[0])
            rc = TORUS_FAIL(TCOMM_ERR_LAYOUT,
                            "gpu fusion: rank %d's bucket layout differs from "
                            "rank 0's: every rank must register the same "
                            "gradients, in the same order, with the same "
                            "bucket size, algorithm and wire",
                            r);
    free(v);
    return rc;
}

/* Staged path: pinned memory for every bucket's span, one event pair per
 * bucket, and the host fusion over the staged spans (theta of one byte:
 * exactly one host bucket per device bucket, same order). */
static tcomm_rc _seal_staged(tcomm_gpu_t *g)
{
    int nb = g->plan.nb;
    g->stage_off = calloc((size_t)nb + 1, sizeof *g->stage_off);
    g->ready = calloc((size_t)nb + 1, sizeof *g->ready);
    g->staged = calloc((size_t)nb + 1, sizeof *g->staged);
    if (!g->stage_off || !g->ready || !g->staged)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %d buckets", nb);
    for (int b = 0; b < nb; b++)
        g->stage_off[b + 1] =
            g->stage_off[b] + (g->plan.b[b].hi - g->plan.b[b].lo) / 4;
    CUDA_TRY(cudaMallocHost((void **)&g->stage,
                            (g->stage_off[nb] ? g->stage_off[nb] : 1) * 4));
    for (int b = 0; b < nb; b++) {
        CUDA_TRY(
            cudaEventCreateWithFlags(&g->ready[b], cudaEventDisableTiming));
        CUDA_TRY(
            cudaEventCreateWithFlags(&g->staged[b], cudaEventDisableTiming));
    }
    tcomm_fusion_options fo = {.bucket_bytes = 1,
                               .algo = g->o.algo,
                               .wire = g->o.wire,
                               .flags = g->o.flags};
    tcomm_rc rc = tcomm_fusion_create(g->c, &fo, &g->host);
    for (int b = 0; !rc && b < nb; b++)
        rc = tcomm_fusion_add(g->host, g->stage + g->stage_off[b],
                              g->stage_off[b + 1] - g->stage_off[b], "bucket",
                              NULL);
    return rc ? rc : tcomm_fusion_seal(g->host);
}

#ifdef TORUS_HAVE_NCCL
/* nccl: a pair of timing events per bucket (comm_s in the stats). */
static tcomm_rc _seal_timing(tcomm_gpu_t *g)
{
    int nb = g->plan.nb;
    g->tev = calloc(2 * (size_t)nb + 1, sizeof *g->tev);
    g->timed = calloc((size_t)nb + 1, 1);
    if (!g->tev || !g->timed)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %d buckets", nb);
    for (int i = 0; i < 2 * nb; i++)
        CUDA_TRY(cudaEventCreate(&g->tev[i]));
    return TCOMM_OK;
}

/* nccl: the device time of the buckets the last step launched, all done
 * (after the count's wait), so reading it waits for nothing. A pair that
 * cannot be read counts 0. */
static double _comm_time(tcomm_gpu_t *g)
{
    double s = 0;
    for (int b = 0; g->timed && b < g->plan.nb; b++) {
        float ms = 0;
        if (!g->timed[b])
            continue;
        if (cudaEventElapsedTime(&ms, g->tev[2 * b], g->tev[2 * b + 1]) ==
            cudaSuccess)
            s += ms / 1e3;
        else
            (void)cudaGetLastError();
    }
    return s;
}
#endif

tcomm_rc tcomm_gpu_seal(tcomm_gpu_t *g)
{
    if (g->sealed)
        return TCOMM_OK;
    size_t maxf = 0;
    tcomm_rc rc = tc_plan_cut(&g->plan, g->o.bucket_bytes);
    if (!rc)
        rc = tc_plan_spans(&g->plan, &maxf);
    if (!rc)
        rc = _check_layout(g);
    if (rc)
        return rc;
#ifdef TORUS_HAVE_NCCL
    if (g->path == TC_GPU_NCCL)
        tc_plan_route(&g->plan, g->c, g->o.algo, g->o.wire, 0, TC_ROUTE_NCCL);
    if (g->path == TC_GPU_NCCL)
        rc = tcomm_nccl_reserve(g->nccl, maxf, g->o.wire);
    if (!rc && g->path == TC_GPU_NCCL)
        rc = _seal_timing(g);
#endif
    if (!rc && g->path == TC_GPU_STAGED)
        rc = _seal_staged(g);
    g->sealed = !rc;
    return rc;
}

size_t tcomm_gpu_bucket_count(const tcomm_gpu_t *g)
{
    return (size_t)g->plan.nb;
}

int tcomm_gpu_plan_text(const tcomm_gpu_t *g, char *buf, size_t n)
{
    if (g->sealed && g->path == TC_GPU_STAGED)
        return tcomm_fusion_plan_text(g->host, buf, n);
    if (g->sealed)
        return tc_plan_text(&g->plan, buf, n);
    if (n)
        buf[0] = 0;
    return 0;
}

/* Staged buckets whose copy to the host is done go to the host fusion,
 * in order; block: wait for each (a local copy: no peer can hold it). */
static tcomm_rc _hand_over(tcomm_gpu_t *g, int block)
{
    while (g->hnext < tc_plan_launched(&g->plan)) {
        cudaEvent_t ev = g->staged[g->hnext];
        cudaError_t e = block ? cudaEventSynchronize(ev) : cudaEventQuery(ev);
        if (e == cudaErrorNotReady)
            return TCOMM_OK;
        CUDA_TRY(e);
        tcomm_rc rc = tcomm_fusion_ready(g->host, g->hnext);
        if (rc)
            return rc;
        g->hnext++;
    }
    return TCOMM_OK;
}

/* Bucket b is complete on the compute stream: start its reduction. */
static tcomm_rc _launch(tcomm_gpu_t *g, int b)
{
    const tc_pbucket *k = &g->plan.b[b];
    size_t span = (k->hi - k->lo) / 4;
#ifdef TORUS_HAVE_NCCL
    if (g->path == TC_GPU_NCCL) { /* every rank skips an empty one alike */
        g->timed[b] = span > 0;
        return span ? tcomm_nccl_allreduce_timed(
                          g->nccl, (float *)k->lo, span, k->route.algo,
                          k->route.wire, g->o.flags, g->compute, g->tev + 2 * b)
                    : TCOMM_OK;
    }
#endif
    CUDA_TRY(cudaEventRecord(g->ready[b], g->compute));
    CUDA_TRY(cudaStreamWaitEvent(g->comm, g->ready[b], 0));
    if (span)
        CUDA_TRY(cudaMemcpyAsync(g->stage + g->stage_off[b], (void *)k->lo,
                                 span * 4, cudaMemcpyDeviceToHost, g->comm));
    CUDA_TRY(cudaEventRecord(g->staged[b], g->comm));
    return TCOMM_OK;
}

static tcomm_rc _launch_ready(tcomm_gpu_t *g)
{
    for (int b; (b = tc_plan_next(&g->plan)) >= 0;) {
        tcomm_rc rc = _launch(g, b);
        if (rc)
            return rc;
    }
    return g->path == TC_GPU_STAGED ? _hand_over(g, 0) : TCOMM_OK;
}

tcomm_rc tcomm_gpu_ready(tcomm_gpu_t *g, int index)
{
    if (!g->sealed)
        return TORUS_FAIL(TCOMM_ERR_ARG, "gpu fusion: ready before seal");
    tcomm_rc rc = tc_plan_ready(&g->plan, index);
    return rc ? rc : _launch_ready(g);
}

/* Staged: bucket b's sum back to the device, on the comm stream. */
static tcomm_rc _copy_back(tcomm_gpu_t *g, int b)
{
    const tc_pbucket *k = &g->plan.b[b];
    if (k->hi > k->lo)
        CUDA_TRY(cudaMemcpyAsync((void *)k->lo, g->stage + g->stage_off[b],
                                 k->hi - k->lo, cudaMemcpyHostToDevice,
                                 g->comm));
    return TCOMM_OK;
}

/* Staged: the host sums; each bucket is copied back as soon as the host
 * fusion has reduced it (they are reduced in order), while it reduces the
 * next; then the compute stream waits for the last copy. */
static tcomm_rc _finish_staged(tcomm_gpu_t *g, tcomm_fusion_stats *st)
{
    int nb = g->plan.nb, b = 0;
    tcomm_rc rc = _hand_over(g, 1); /* every bucket ready on the host */
    for (; !rc && b < nb && tcomm_fusion_wait(g->host, b + 1) > b; b++)
        rc = _copy_back(g, b);
    if (!rc)
        rc = tcomm_fusion_finish(g->host, st);
    for (; !rc && b < nb; b++) /* without a communication thread */
        rc = _copy_back(g, b);
    if (rc)
        return rc;
    CUDA_TRY(cudaEventRecord(g->done, g->comm));
    CUDA_TRY(cudaStreamWaitEvent(g->compute, g->done, 0));
    return TCOMM_OK;
}

int tcomm_gpu_capturable(const tcomm_gpu_t *g)
{
    return g->path == TC_GPU_NCCL;
}

void tcomm_gpu_abandon(tcomm_gpu_t *g)
{
    tc_plan_reset(&g->plan);
    g->hnext = 0;
}

tcomm_rc tcomm_gpu_finish_device(tcomm_gpu_t *g)
{
    if (!g->sealed)
        return TORUS_FAIL(TCOMM_ERR_ARG, "gpu fusion: finish before seal");
    double t0 = tcomm_wtime();
    tcomm_fusion_stats s = {0};
    tc_plan_flush(&g->plan); /* unused gradients count as ready */
    tcomm_rc rc = _launch_ready(g);
    /* Staged: the host's part is the whole of it (never recorded). */
    if (!rc && g->path == TC_GPU_STAGED)
        rc = _finish_staged(g, &s);
#ifdef TORUS_HAVE_NCCL
    if (!rc && g->path == TC_GPU_NCCL) {
        rc = tcomm_nccl_join(g->nccl, g->compute);
        s.buckets = (size_t)g->plan.nb;
    }
#endif
    tcomm_gpu_abandon(g); /* the plan is ready for the next step */
    s.wait_s = tcomm_wtime() - t0;
    g->pending = s;
    return rc;
}

tcomm_rc tcomm_gpu_finish_host(tcomm_gpu_t *g, tcomm_fusion_stats *st)
{
    double t0 = tcomm_wtime();
    tcomm_fusion_stats s = g->pending;
    tcomm_rc rc = TCOMM_OK;
#ifdef TORUS_HAVE_NCCL
    if (g->path == TC_GPU_NCCL) {
        s.buckets = (size_t)g->plan.nb;
        rc = tcomm_nccl_count(g->nccl, g->compute, &s.nonfinite);
        if (!rc)
            s.comm_s = _comm_time(g);
    }
#endif
    s.wait_s += tcomm_wtime() - t0;
    g->pending = (tcomm_fusion_stats){0};
    if (st)
        *st = s;
    return rc;
}

tcomm_rc tcomm_gpu_finish(tcomm_gpu_t *g, tcomm_fusion_stats *st)
{
    tcomm_rc rc = tcomm_gpu_finish_device(g);
    if (rc) {
        g->pending = (tcomm_fusion_stats){0};
        return rc;
    }
    return tcomm_gpu_finish_host(g, st);
}

tcomm_rc tcomm_gpu_allreduce(tcomm_gpu_t *g, float *dev, size_t count,
                             tcomm_wire wire, unsigned flags)
{
    if (!count)
        return TCOMM_OK;
    float *h = malloc(count * sizeof *h);
    if (!h)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %zu floats", count);
    tcomm_result r;
    cudaError_t e =
        cudaMemcpyAsync(h, dev, count * 4, cudaMemcpyDeviceToHost, g->compute);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g->compute);
    tcomm_rc rc = TCOMM_OK;
    if (e)
        rc = TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                        "rank %d: copying %zu floats to the host: %s",
                        g->c->info.rank, count, cudaGetErrorString(e));
    else
        rc = tcomm_allreduce(g->c, h, count, g->o.algo, wire, flags, &r);
    if (!rc) {
        e = cudaMemcpyAsync(dev, h, count * 4, cudaMemcpyHostToDevice,
                            g->compute);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(g->compute);
        if (e)
            rc = TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                            "rank %d: copying %zu floats "
                            "to the device: %s",
                            g->c->info.rank, count, cudaGetErrorString(e));
    }
    free(h);
    return rc;
}

void tcomm_gpu_destroy(tcomm_gpu_t *g)
{
    if (!g)
        return;
#ifdef TORUS_HAVE_NCCL
    tcomm_nccl_finalize(g->nccl);
#endif
    if (g->comm)
        cudaStreamSynchronize(g->comm);
    tcomm_fusion_destroy(g->host);
    for (int b = 0; g->ready && b < g->plan.nb; b++) {
        if (g->ready[b])
            cudaEventDestroy(g->ready[b]);
        if (g->staged && g->staged[b])
            cudaEventDestroy(g->staged[b]);
    }
    if (g->done)
        cudaEventDestroy(g->done);
    for (int i = 0; g->tev && i < 2 * g->plan.nb; i++)
        if (g->tev[i])
            cudaEventDestroy(g->tev[i]);
    free(g->tev);
    free(g->timed);
    if (g->comm)
        cudaStreamDestroy(g->comm);
    cudaFreeHost(g->stage);
    free(g->stage_off);
    free(g->ready);
    free(g->staged);
    tc_plan_free(&g->plan);
    free(g);
}
