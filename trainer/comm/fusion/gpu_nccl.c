/* fusion/gpu_nccl.c: the device fusion's NCCL path (gpu_path.h), built
 * only where configure finds NCCL. A bucket is an NCCL reduction of its
 * span in place, queued behind the compute stream's work so far
 * (tcomm_nccl.h), along the route the plan resolved at seal (tc_plan_route
 * over the spans), so a launch asks the cost model nothing. A pair of
 * timing events per bucket gives the step's device time of communication
 * (comm_s); nothing here waits on the host until finish_host. */
#include <stdlib.h>

#include "trainer/comm/fusion/gpu_path.h"
#include "trainer/comm/tcomm_nccl.h"

typedef struct {
    tcomm_nccl_t *nccl;
    cudaEvent_t *tev;     /* per bucket, around its reduction */
    unsigned char *timed; /* per bucket: this step launched it */
} _nccl;

#define CUDA_TRY(call) TC_GPU_CUDA_TRY(call)

static tcomm_rc _open(tcomm_gpu_t *g)
{
    _nccl *s = calloc(1, sizeof *s);
    if (!s)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for the NCCL path");
    g->impl = s;
    return tcomm_nccl_init(g->c, g->device, &s->nccl);
}

/* The routes, the device wire buffer for the largest span, and a pair of
 * timing events per bucket. */
static tcomm_rc _seal(tcomm_gpu_t *g, size_t max_floats)
{
    _nccl *s = g->impl;
    int nb = g->plan.nb;
    tc_plan_route(&g->plan, g->c, g->o.algo, g->o.wire, 0, TC_ROUTE_NCCL);
    tcomm_rc rc = tcomm_nccl_reserve(s->nccl, max_floats, g->o.wire);
    if (rc)
        return rc;
    s->tev = calloc(2 * (size_t)nb + 1, sizeof *s->tev);
    s->timed = calloc((size_t)nb + 1, 1);
    if (!s->tev || !s->timed)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %d buckets", nb);
    for (int i = 0; i < 2 * nb; i++)
        CUDA_TRY(cudaEventCreate(&s->tev[i]));
    return TCOMM_OK;
}

static int _plan_text(const tcomm_gpu_t *g, char *buf, size_t n)
{
    return tc_plan_text(&g->plan, buf, n);
}

/* Every rank skips an empty bucket alike. */
static tcomm_rc _launch(tcomm_gpu_t *g, int b)
{
    _nccl *s = g->impl;
    const tc_pbucket *k = &g->plan.b[b];
    size_t span = (k->hi - k->lo) / 4;
    s->timed[b] = span > 0;
    if (!span)
        return TCOMM_OK;
    return tcomm_nccl_allreduce_timed(s->nccl, (float *)k->lo, span,
                                      k->route.algo, k->route.wire, g->o.flags,
                                      g->compute, s->tev + 2 * b);
}

static tcomm_rc _finish_device(tcomm_gpu_t *g, tcomm_fusion_stats *st)
{
    _nccl *s = g->impl;
    st->buckets = (size_t)g->plan.nb;
    return tcomm_nccl_join(s->nccl, g->compute);
}

/* The device time of the buckets the last step launched, all done (after
 * the count's wait), so reading it waits for nothing. A pair that cannot
 * be read counts 0. */
static double _comm_time(const tcomm_gpu_t *g)
{
    const _nccl *s = g->impl;
    double t = 0;
    for (int b = 0; s->timed && b < g->plan.nb; b++) {
        float ms = 0;
        if (!s->timed[b])
            continue;
        if (cudaEventElapsedTime(&ms, s->tev[2 * b], s->tev[2 * b + 1]) ==
            cudaSuccess)
            t += ms / 1e3;
        else
            (void)cudaGetLastError();
    }
    return t;
}

static tcomm_rc _finish_host(tcomm_gpu_t *g, tcomm_fusion_stats *st)
{
    _nccl *s = g->impl;
    st->buckets = (size_t)g->plan.nb;
    tcomm_rc rc = tcomm_nccl_count(s->nccl, g->compute, &st->nonfinite);
    if (!rc)
        st->comm_s = _comm_time(g);
    return rc;
}

static void _close(tcomm_gpu_t *g)
{
    _nccl *s = g->impl;
    if (!s)
        return;
    tcomm_nccl_finalize(s->nccl);
    for (int i = 0; s->tev && i < 2 * g->plan.nb; i++)
        if (s->tev[i])
            cudaEventDestroy(s->tev[i]);
    free(s->tev);
    free(s->timed);
    free(s);
    g->impl = NULL;
}

const tc_gpu_ops tc_gpu_nccl_ops = {
    .open = _open,
    .seal = _seal,
    .plan_text = _plan_text,
    .launch = _launch,
    .progress = NULL,
    .finish_device = _finish_device,
    .finish_host = _finish_host,
    .reset = NULL,
    .close = _close,
    .capturable = 1,
};
