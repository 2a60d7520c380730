/* train/exchange.c: the gradient exchange behind one interface (see
 * ttrain_exchange.h). Two implementations fill one table of operations,
 * as comm/fusion/plan.c serves both fusions: _host over tcomm_fusion (or
 * nothing, with one rank) and _device over tcomm_gpu, whose functions it
 * calls through the cuda module's table of them (ttrain_gpu_exchange.h).
 * The public calls only dispatch, so a gradient takes the same hops on
 * both down to the tcomm_* call that starts its bucket: the engine's hook
 * (_ready), the implementation's ready, then tcomm_fusion_ready or
 * tcomm_gpu_ready. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/backends/tbackends.h"
#include "trainer/comm/tcomm_fusion.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_exchange.h"
#include "trainer/train/ttrain_gpu_exchange.h"
#include "trainer/train/ttrain_state_hash.h"

typedef struct {
    int (*ready)(ttrain_exchange *ex, teng_net *net, int layer);
    int (*wait)(ttrain_exchange *ex, teng_net *net, int replayed, int dstep);
    int (*capturable)(const ttrain_exchange *ex);
    int (*finish_device)(ttrain_exchange *ex);
    void (*abandon)(ttrain_exchange *ex);
    int (*sync)(ttrain_exchange *ex);
    int (*stats_average)(ttrain_exchange *ex, void *stats, size_t n,
                         teng_net *net);
    void (*describe)(const ttrain_exchange *ex, FILE *f);
    void (*describe_more)(const ttrain_exchange *ex, int verbose, FILE *f);
    void (*summary)(const ttrain_exchange *ex, int dstep, FILE *f);
    void (*close)(ttrain_exchange *ex);
    int (*counted)(const ttrain_exchange *ex);
    int (*bucket_kb)(const ttrain_exchange *ex);
    size_t (*buckets)(const ttrain_exchange *ex);
    int (*set_bucket_kb)(ttrain_exchange *ex, int kb);
} _ops;

struct ttrain_exchange {
    const _ops *ops;
    ttrain_exchange_config c;
    tcomm_fusion_t *fusion;  /* host, several ranks */
    const ttrain_gx_ops *gx; /* device: tcomm_gpu, the cuda module's table */
    tcomm_gpu_t *g;          /* and its exchange */
    int np;                  /* params; param i is exchange index np - 1 - i */
    double wait_s;           /* host time blocked in wait */
    double comm_s;           /* device: the reductions' time so far */
    size_t nonfinite;        /* inf/nan in this step's summed gradients */
};

/* The exchange indices of layer's params, highest first: hi, then down to
 * lo (params lie in forward order, the exchange's in backward order). */
static int _indices(const ttrain_exchange *ex, teng_net *net, int layer,
                    int *hi, int *lo)
{
    teng_layer_info l;
    int rc = teng_net_layer_info(net, layer, &l);
    if (rc)
        return rc;
    *hi = ex->np - 1 - l.param0;
    *lo = ex->np - l.param0 - l.nparam;
    return 0;
}

/* ---- host: tcomm_fusion over the gradients in host memory ---- */

static int _host_ready(ttrain_exchange *ex, teng_net *net, int layer)
{
    int hi, lo, rc;
    if (!ex->fusion)
        return 0;
    if ((rc = _indices(ex, net, layer, &hi, &lo)))
        return rc;
    for (int i = hi; i >= lo; i--)
        if ((rc = tcomm_fusion_ready(ex->fusion, i)))
            return rc;
    return 0;
}

/* tcomm counts inf/nan in the reduced buckets (every rank sees the same
 * count); one rank checks its own gradients (finite or not: 0 or 1). */
static int _host_wait(ttrain_exchange *ex, teng_net *net, int replayed,
                      int dstep)
{
    (void)replayed;
    if (!ex->fusion) {
        int finite;
        if (dstep) /* the device step counts them: no host wait */
            return 0;
        int rc = teng_net_grads_finite(net, &finite);
        if (rc)
            return rc;
        ex->nonfinite = !finite;
        return 0;
    }
    tcomm_fusion_stats st;
    int rc = tcomm_fusion_finish(ex->fusion, &st);
    if (rc)
        return rc;
    ex->wait_s += st.wait_s;
    ex->nonfinite = st.nonfinite;
    return 0;
}

static int _host_capturable(const ttrain_exchange *ex)
{
    return !ex->fusion;
}

static int _none(ttrain_exchange *ex)
{
    (void)ex;
    return 0;
}

static void _nothing(ttrain_exchange *ex)
{
    (void)ex;
}

static int _host_stats_average(ttrain_exchange *ex, void *stats, size_t n,
                               teng_net *net)
{
    (void)net;
    tcomm_result r;
    int rc = tcomm_allreduce(ex->c.comm, stats, n, ex->c.algo, TCOMM_WIRE_FP32,
                             TCOMM_AVERAGE, &r);
    return rc ? torus_error_prefix(rc, "rank %d", ex->c.rank) : 0;
}

static void _host_describe(const ttrain_exchange *ex, FILE *f)
{
    fprintf(f, "gradients in %zu buckets%s",
            tcomm_fusion_bucket_count(ex->fusion),
            tcomm_fusion_shared(ex->fusion) ? " of node-shared memory" : "");
}

/* The choice of --bucket-kb auto in one short line; the trial's times and
 * the cost model's numbers (some 900 characters) only with --verbose.
 * Then --wire's reason and the bucket plan, resolved at seal: what every
 * step runs. */
static void _host_describe_more(const ttrain_exchange *ex, int verbose,
                                FILE *f)
{
    const char *why = tcomm_fusion_theta_why(ex->fusion);
    if (*why && verbose)
        fprintf(f, "torus-train: --bucket-kb auto: %s\n", why);
    else if (*why)
        fprintf(f,
                "torus-train: --bucket-kb auto: %zu KiB, %zu buckets "
                "(--verbose: why)\n",
                tcomm_fusion_theta(ex->fusion) >> 10,
                tcomm_fusion_bucket_count(ex->fusion));
    if (*tcomm_fusion_wire_why(ex->fusion))
        fprintf(f, "torus-train: --wire %s: %s\n", tcomm_wire_name(ex->c.wire),
                tcomm_fusion_wire_why(ex->fusion));
    char plan[512];
    if (tcomm_fusion_plan_text(ex->fusion, plan, sizeof plan))
        fprintf(f, "torus-train: bucket plan: %s\n", plan);
}

static void _host_summary(const ttrain_exchange *ex, int dstep, FILE *f)
{
    (void)ex, (void)dstep, (void)f;
}

/* The sums' inf/nan are counted; one rank only checks its own. */
static int _host_counted(const ttrain_exchange *ex)
{
    return ex->fusion != NULL;
}

static int _host_bucket_kb(const ttrain_exchange *ex)
{
    return ex->fusion ? (int)(tcomm_fusion_theta(ex->fusion) >> 10) : 0;
}

static size_t _host_buckets(const ttrain_exchange *ex)
{
    return ex->fusion ? tcomm_fusion_bucket_count(ex->fusion) : 0;
}

static int _host_set_bucket_kb(ttrain_exchange *ex, int kb)
{
    if (!ex->fusion || kb < 1)
        return 0;
    return tcomm_fusion_set_theta(ex->fusion, (size_t)kb << 10);
}

static void _host_close(ttrain_exchange *ex)
{
    if (ex->fusion)
        tcomm_fusion_destroy(ex->fusion);
}

static const _ops _host = {
    .ready = _host_ready,
    .wait = _host_wait,
    .capturable = _host_capturable,
    .finish_device = _none,
    .abandon = _nothing,
    .sync = _none,
    .stats_average = _host_stats_average,
    .describe = _host_describe,
    .describe_more = _host_describe_more,
    .summary = _host_summary,
    .close = _host_close,
    .counted = _host_counted,
    .bucket_kb = _host_bucket_kb,
    .buckets = _host_buckets,
    .set_bucket_kb = _host_set_bucket_kb};

/* Every param's gradient goes to the fusion in backward order (params lie
 * in forward order, so that is the reverse). */
static int _host_open(ttrain_exchange *ex, teng_net *net)
{
    const ttrain_exchange_config *c = &ex->c;
    tcomm_fusion_options fo = {
        .bucket_bytes =
            c->bucket_kb < 0 ? TCOMM_FUSION_AUTO : (size_t)c->bucket_kb << 10,
        .algo = c->algo,
        .wire = c->wire,
        .on_bucket = c->trace ? ttrain_trace_bucket : NULL,
        .on_bucket_ctx = c->trace};
    int rc = tcomm_fusion_create(c->comm, &fo, &ex->fusion);
    if (rc)
        return rc;
    ex->np = teng_net_nparams(net);
    for (int i = ex->np - 1; i >= 0; i--) {
        const teng_param *p = teng_net_param(net, i);
        int idx;
        /* The backend's layout may pad a param: padding gradients are
         * zero, and summing zeros keeps them zero. */
        if ((rc = tcomm_fusion_add(ex->fusion, p->grad,
                                   p->bytes / sizeof(float), p->name, &idx)))
            return rc;
    }
    return tcomm_fusion_seal(ex->fusion);
}

/* ---- device: tcomm_gpu, through the cuda module's table ---- */

static int _dev_ready(ttrain_exchange *ex, teng_net *net, int layer)
{
    int hi, lo, rc;
    if ((rc = _indices(ex, net, layer, &hi, &lo)))
        return rc;
    for (int i = hi; i >= lo; i--)
        if ((rc = ex->gx->ready(ex->g, i)))
            return rc;
    return 0;
}

/* Under the device step the device counts inf/nan: the host only queues
 * the exchange's end (a replayed step graph ended it already), and sync
 * waits when the host reads. */
static int _dev_wait(ttrain_exchange *ex, teng_net *net, int replayed,
                     int dstep)
{
    tcomm_fusion_stats st;
    int rc = replayed ? 0 : ex->gx->finish_device(ex->g);
    (void)net;
    if (rc || dstep)
        return rc;
    if ((rc = ex->gx->finish_host(ex->g, &st)))
        return rc;
    ex->comm_s += st.comm_s;
    ex->wait_s += st.wait_s;
    ex->nonfinite = st.nonfinite;
    return 0;
}

static int _dev_capturable(const ttrain_exchange *ex)
{
    return ex->gx->capturable(ex->g);
}

static int _dev_finish_device(ttrain_exchange *ex)
{
    return ex->gx->finish_device(ex->g);
}

static void _dev_abandon(ttrain_exchange *ex)
{
    ex->gx->abandon(ex->g);
}

static int _dev_sync(ttrain_exchange *ex)
{
    tcomm_fusion_stats st;
    int rc = ex->gx->finish_host(ex->g, &st);
    if (!rc)
        ex->comm_s += st.comm_s;
    return rc;
}

/* The path's own algorithm: a few KB once per evaluation. */
static int _dev_stats_average(ttrain_exchange *ex, void *stats, size_t n,
                              teng_net *net)
{
    (void)net;
    return ex->gx->allreduce(ex->g, stats, n, TCOMM_WIRE_FP32, TCOMM_AVERAGE);
}

static void _dev_describe(const ttrain_exchange *ex, FILE *f)
{
    fprintf(f, "gradients in %zu buckets of device memory, %s",
            ex->gx->bucket_count(ex->g),
            strcmp(ex->gx->path(ex->g), "nccl") ? "staged through the host"
                                                : "NCCL");
}

static void _dev_summary(const ttrain_exchange *ex, int dstep, FILE *f)
{
    if (dstep)
        fprintf(f,
                "gradient exchange (%s): reductions not timed (the device "
                "step needs no host wait for them)\n",
                ex->gx->path(ex->g));
    else
        fprintf(f, "gradient exchange (%s): %.2f s in its reductions\n",
                ex->gx->path(ex->g), ex->comm_s);
}

static void _dev_close(ttrain_exchange *ex)
{
    if (ex->g)
        ex->gx->destroy(ex->g);
}

/* The bucket plan tcomm_gpu resolved at seal, as the host's: the NCCL
 * path's routes over the device spans, or the staged path's host fusion's. */
static void _dev_describe_more(const ttrain_exchange *ex, int verbose, FILE *f)
{
    char plan[512];
    (void)verbose;
    if (ex->gx->plan_text(ex->g, plan, sizeof plan))
        fprintf(f, "torus-train: bucket plan: %s\n", plan);
}

static int _dev_counted(const ttrain_exchange *ex)
{
    (void)ex;
    return 1;
}

/* Auto (< 0) or 0: tcomm_gpu's default. */
static int _dev_bucket_kb(const ttrain_exchange *ex)
{
    return ex->c.bucket_kb > 0 ? ex->c.bucket_kb
                               : (int)(TCOMM_FUSION_DEFAULT_BYTES >> 10);
}

static size_t _dev_buckets(const ttrain_exchange *ex)
{
    return ex->gx->bucket_count(ex->g);
}

/* Its buckets are cut once. */
static int _dev_set_bucket_kb(ttrain_exchange *ex, int kb)
{
    (void)ex, (void)kb;
    return 0;
}

/* tcomm_gpu is the cuda module's (gpu_exchange_cuda.c), found by its
 * table's name: torus-train links no CUDA library, and a backend with
 * gradients in device memory is only ever open with that module loaded.
 * Every param's gradient goes to it in backward order. */
static int _dev_open(ttrain_exchange *ex, teng_net *net, teng_backend *bk)
{
    const ttrain_exchange_config *c = &ex->c;
    const ttrain_gx_ops *gx = tbackends_module_symbol(TTRAIN_GX_OPS_SYMBOL);
    if (!gx)
        return TORUS_FAIL(TTRAIN_EDEVICE,
                          "backend %s keeps gradients in device memory, but "
                          "no cuda module with a GPU gradient exchange is "
                          "loaded",
                          teng_backend_name(bk));
    ex->gx = gx;
    /* The loss is divided by the global batch: each rank's gradient is
     * already its 1/world share, so the exchange sums (no TCOMM_AVERAGE). */
    tcomm_gpu_options o = {
        .bucket_bytes = c->bucket_kb < 0 ? 0 : (size_t)c->bucket_kb << 10,
        .algo = c->algo,
        .wire = c->wire};
    int rc = gx->create(c->comm, &o, teng_backend_stream(bk), &ex->g);
    ex->np = teng_net_nparams(net);
    for (int i = ex->np - 1; !rc && i >= 0; i--) {
        const teng_param *p = teng_net_param(net, i);
        /* A padded param's padding gradient is zero and stays zero. */
        rc = gx->add(ex->g, p->grad, p->bytes / sizeof(float), NULL);
    }
    if (!rc)
        rc = gx->seal(ex->g);
    return rc;
}

static const _ops _device = {
    .ready = _dev_ready,
    .wait = _dev_wait,
    .capturable = _dev_capturable,
    .finish_device = _dev_finish_device,
    .abandon = _dev_abandon,
    .sync = _dev_sync,
    .stats_average = _dev_stats_average,
    .describe = _dev_describe,
    .describe_more = _dev_describe_more,
    .summary = _dev_summary,
    .close = _dev_close,
    .counted = _dev_counted,
    .bucket_kb = _dev_bucket_kb,
    .buckets = _dev_buckets,
    .set_bucket_kb = _dev_set_bucket_kb};

/* ---- the interface ---- */

/* The engine's gradient hook (teng_grad_hook). */
static int _ready(void *ctx, teng_net *net, int layer)
{
    ttrain_exchange *ex = ctx;
    ttrain_trace_layer(ex->c.trace, net, layer);
    return ex->ops->ready(ex, net, layer);
}

int ttrain_exchange_open(const ttrain_exchange_config *c, teng_net *net,
                         teng_backend *bk, ttrain_exchange **out)
{
    ttrain_exchange *ex = calloc(1, sizeof *ex);
    if (!ex)
        return TORUS_FAIL(TTRAIN_ENOMEM, "rank %d: no memory for the exchange",
                          c->rank);
    ex->c = *c;
    /* Host code must not touch gradients in device memory. */
    ex->ops = c->world > 1 && !teng_backend_host_memory(bk) ? &_device : &_host;
    int rc = 0;
    if (ex->ops == &_device)
        rc = _dev_open(ex, net, bk);
    else if (c->world > 1)
        rc = _host_open(ex, net);
    if (rc) {
        ex->ops->close(ex);
        free(ex);
        return torus_error_prefix(rc, "rank %d", c->rank);
    }
    teng_net_set_grad_hook(net, _ready, ex);
    *out = ex;
    return 0;
}

int ttrain_exchange_wait(ttrain_exchange *ex, teng_net *net, int replayed,
                         int dstep)
{
    ex->nonfinite = 0;
    return ex->ops->wait(ex, net, replayed, dstep);
}

size_t ttrain_exchange_nonfinite(const ttrain_exchange *ex, int *counted)
{
    *counted = ex->ops->counted(ex);
    return ex->nonfinite;
}

double ttrain_exchange_wait_s(ttrain_exchange *ex, int restart)
{
    double s = ex->wait_s;
    if (restart)
        ex->wait_s = 0;
    return s;
}

int ttrain_exchange_capturable(const ttrain_exchange *ex)
{
    return ex->ops->capturable(ex);
}

int ttrain_exchange_finish_device(ttrain_exchange *ex)
{
    return ex->ops->finish_device(ex);
}

void ttrain_exchange_abandon(ttrain_exchange *ex)
{
    ex->ops->abandon(ex);
}

int ttrain_exchange_sync(ttrain_exchange *ex)
{
    return ex->ops->sync(ex);
}

/* BN running statistics are per worker while training (Goyal); the
 * average over ranks is what evaluation and checkpoints see. They stay
 * fp32 on the wire whatever --wire says: a few KB once per evaluation,
 * and a variance rounded to fp16 would change the evaluation. */
int ttrain_exchange_stats_average(ttrain_exchange *ex, teng_net *net)
{
    size_t n;
    void *stats = teng_net_stats_buffer(net, &n);
    if (ex->c.world == 1 || !n)
        return 0;
    return ex->ops->stats_average(ex, stats, n, net);
}

/* The gradient sums are identical on all ranks, bit for bit: ranks that
 * differ after the average mean a bug or a broken node, not noise. */
int ttrain_exchange_check_agreement(ttrain_exchange *ex, teng_net *net)
{
    int world = ex->c.world, rank = ex->c.rank;
    uint64_t h;
    if (world == 1)
        return 0;
    int rc = ttrain_state_hash(net, &h);
    if (rc)
        return torus_error_prefix(rc, "rank %d", rank);
    /* Every rank's hash, as two exact 32-bit halves, by one sum. */
    double *v = calloc(2 * (size_t)world, sizeof(double));
    if (!v)
        return TORUS_FAIL(TTRAIN_ENOMEM, "rank %d: out of memory", rank);
    v[2 * rank] = (double)(h >> 32);
    v[2 * rank + 1] = (double)(h & 0xffffffffu);
    rc = ttrain_exchange_sum(ex, v, 2 * world);
    for (int r = 1; r < world && !rc; r++)
        if (v[2 * r] != v[0] || v[2 * r + 1] != v[1])
            rc = TORUS_FAIL(TTRAIN_ERANKS,
                            "rank %d's weights or BN statistics differ from "
                            "rank 0's (state hash %08" PRIx32 "%08" PRIx32
                            " vs %08" PRIx32 "%08" PRIx32
                            "): the ranks have diverged",
                            r, (uint32_t)v[2 * r], (uint32_t)v[2 * r + 1],
                            (uint32_t)v[0], (uint32_t)v[1]);
    free(v);
    return rc;
}

int ttrain_exchange_sum(ttrain_exchange *ex, double *v, int n)
{
    int rc = ex->c.world == 1 ? 0 : tcomm_sum_double(ex->c.comm, v, n);
    return rc ? torus_error_prefix(rc, "rank %d", ex->c.rank) : 0;
}

int ttrain_exchange_max(ttrain_exchange *ex, double *v)
{
    int rc = ex->c.world == 1 ? 0 : tcomm_max_double(ex->c.comm, v);
    return rc ? torus_error_prefix(rc, "rank %d", ex->c.rank) : 0;
}

int ttrain_exchange_bucket_kb(const ttrain_exchange *ex)
{
    return ex->ops->bucket_kb(ex);
}

size_t ttrain_exchange_buckets(const ttrain_exchange *ex)
{
    return ex->ops->buckets(ex);
}

int ttrain_exchange_set_bucket_kb(ttrain_exchange *ex, int kb)
{
    int rc = ex->ops->set_bucket_kb(ex, kb);
    return rc ? torus_error_prefix(rc, "rank %d", ex->c.rank) : 0;
}

void ttrain_exchange_describe(const ttrain_exchange *ex, const tcomm_info *info,
                              int verbose, FILE *f)
{
    if (ex->c.world == 1)
        return;
    fprintf(f, "torus-train: %d ranks on %d nodes, grid %dx%d (%s), ",
            info->size, info->nnodes, info->rows, info->cols,
            info->source ? info->source : "?");
    ex->ops->describe(ex, f);
    fprintf(f, ", all-reduce %s, %s wire\n", tcomm_algo_name(ex->c.algo),
            tcomm_wire_name(ex->c.wire));
    ex->ops->describe_more(ex, verbose, f);
}

void ttrain_exchange_summary(const ttrain_exchange *ex, int dstep, FILE *f)
{
    ex->ops->summary(ex, dstep, f);
}

void ttrain_exchange_close(ttrain_exchange *ex)
{
    if (!ex)
        return;
    ex->ops->close(ex);
    free(ex);
}
