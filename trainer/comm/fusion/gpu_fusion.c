/* fusion/gpu_fusion.c: gradient exchange for device memory inside the
 * step (see tcomm_gpu.h for the contract). The bookkeeping (which
 * gradient goes in which bucket, ready counts, launch order) is the host
 * fusion's plan (plan.h); what a launch is, and what finishing a step
 * waits for, is the path's (gpu_path.h): an NCCL reduction of the
 * bucket's span behind an event of the compute stream (gpu_nccl.c), or a
 * copy to pinned host memory that the host fusion then reduces
 * (gpu_staged.c). Every rank agrees on the path at create; from then on
 * this file only calls through its table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm/fusion/gpu_path.h"

#define CUDA_TRY(call) TC_GPU_CUDA_TRY(call)

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
           : tc_gpu_choose(n, all, all + n, all + 2 * n,
                           TC_GPU_HAVE_NCCL, &a, &b);
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
    g->ops = g->path == TC_GPU_NCCL ? TC_GPU_NCCL_OPS : &tc_gpu_staged_ops;
    return g->ops->open(g);
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
    if (!rc)
        rc = g->ops->seal(g, maxf);
    g->sealed = !rc;
    return rc;
}

size_t tcomm_gpu_bucket_count(const tcomm_gpu_t *g)
{
    return (size_t)g->plan.nb;
}

int tcomm_gpu_plan_text(const tcomm_gpu_t *g, char *buf, size_t n)
{
    if (g->sealed)
        return g->ops->plan_text(g, buf, n);
    if (n)
        buf[0] = 0;
    return 0;
}

static tcomm_rc _launch_ready(tcomm_gpu_t *g)
{
    for (int b; (b = tc_plan_next(&g->plan)) >= 0;) {
        tcomm_rc rc = g->ops->launch(g, b);
        if (rc)
            return rc;
    }
    return g->ops->progress ? g->ops->progress(g) : TCOMM_OK;
}

tcomm_rc tcomm_gpu_ready(tcomm_gpu_t *g, int index)
{
    if (!g->sealed)
        return TORUS_FAIL(TCOMM_ERR_ARG, "gpu fusion: ready before seal");
    tcomm_rc rc = tc_plan_ready(&g->plan, index);
    return rc ? rc : _launch_ready(g);
}

int tcomm_gpu_capturable(const tcomm_gpu_t *g)
{
    return g->ops && g->ops->capturable;
}

void tcomm_gpu_abandon(tcomm_gpu_t *g)
{
    tc_plan_reset(&g->plan);
    if (g->ops && g->ops->reset)
        g->ops->reset(g);
}

tcomm_rc tcomm_gpu_finish_device(tcomm_gpu_t *g)
{
    if (!g->sealed)
        return TORUS_FAIL(TCOMM_ERR_ARG, "gpu fusion: finish before seal");
    double t0 = tcomm_wtime();
    tcomm_fusion_stats s = {0};
    tc_plan_flush(&g->plan); /* unused gradients count as ready */
    tcomm_rc rc = _launch_ready(g);
    if (!rc)
        rc = g->ops->finish_device(g, &s);
    tcomm_gpu_abandon(g); /* the plan is ready for the next step */
    s.wait_s = tcomm_wtime() - t0;
    g->pending = s;
    return rc;
}

tcomm_rc tcomm_gpu_finish_host(tcomm_gpu_t *g, tcomm_fusion_stats *st)
{
    double t0 = tcomm_wtime();
    tcomm_fusion_stats s = g->pending;
    tcomm_rc rc = g->ops->finish_host ? g->ops->finish_host(g, &s) : TCOMM_OK;
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
    if (g->ops)
        g->ops->close(g);
    tc_plan_free(&g->plan);
    free(g);
}
