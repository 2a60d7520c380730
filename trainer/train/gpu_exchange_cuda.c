/* train/gpu_exchange_cuda.c: the device-memory gradient exchange over
 * libtcomm's tcomm_gpu, as the table ttrain_gx_ops (ttrain_gpu_exchange.h)
 * that the cuda backend's module exports and torus-train's
 * exchange.c calls (its device implementation). Built into the module only: it
 * links CUDA and NCCL through tcomm_gpu. */
#include <stdlib.h>

#include "common/torus_error.h"
#include "trainer/comm/tcomm_gpu.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_gpu_exchange.h"

typedef struct {
    tcomm_gpu_t *g;
    int np;        /* params; param i is exchange index np - 1 - i */
    double comm_s; /* the reductions' time so far (tcomm_fusion_stats) */
} _gx;

static void _close(void *impl)
{
    _gx *x = impl;
    if (!x)
        return;
    tcomm_gpu_destroy(x->g);
    free(x);
}

static int _open(tcomm_t *c, teng_net *net, teng_backend *bk, tcomm_algo algo,
                 tcomm_wire wire, int bucket_kb, void **out)
{
    _gx *x = calloc(1, sizeof *x);
    if (!x)
        return TORUS_FAIL(TTRAIN_ENOMEM, "no memory for the GPU exchange");
    tcomm_gpu_options o = {
        .bucket_bytes = (size_t)bucket_kb << 10, .algo = algo, .wire = wire};
    /* The loss is divided by the global batch: each rank's gradient is
     * already its 1/world share, so the exchange sums (no TCOMM_AVERAGE). */
    int rc = tcomm_gpu_create(c, &o, teng_backend_stream(bk), &x->g) ? -1 : 0;
    x->np = teng_net_nparams(net);
    for (int i = x->np - 1; !rc && i >= 0; i--) {
        const teng_param *p = teng_net_param(net, i);
        /* A padded param's padding gradient is zero and stays zero. */
        rc = tcomm_gpu_add(x->g, p->grad, p->bytes / sizeof(float), NULL) ? -1
                                                                          : 0;
    }
    if (!rc)
        rc = tcomm_gpu_seal(x->g) ? -1 : 0;
    if (rc) {
        _close(x);
        return rc;
    }
    *out = x;
    return 0;
}

static int _ready(void *impl, teng_net *net, int layer)
{
    _gx *x = impl;
    teng_layer_info l;
    if (teng_net_layer_info(net, layer, &l))
        return -1;
    for (int i = l.param0; i < l.param0 + l.nparam; i++)
        if (tcomm_gpu_ready(x->g, x->np - 1 - i))
            return -1;
    return 0;
}

static int _capturable(const void *impl)
{
    return tcomm_gpu_capturable(((const _gx *)impl)->g);
}

static int _finish_device(void *impl)
{
    return tcomm_gpu_finish_device(((_gx *)impl)->g) ? -1 : 0;
}

static int _finish_host(void *impl, size_t *nonfinite, double *wait_s)
{
    _gx *x = impl;
    tcomm_fusion_stats st;
    if (tcomm_gpu_finish_host(x->g, &st))
        return -1;
    x->comm_s += st.comm_s;
    *nonfinite = st.nonfinite;
    *wait_s += st.wait_s;
    return 0;
}

static void _abandon(void *impl)
{
    tcomm_gpu_abandon(((_gx *)impl)->g);
}

static int _stats_average(void *impl, teng_net *net)
{
    size_t n;
    float *stats = teng_net_stats_buffer(net, &n);
    return n && tcomm_gpu_allreduce(((_gx *)impl)->g, stats, n, TCOMM_WIRE_FP32,
                                    TCOMM_AVERAGE)
               ? -1
               : 0;
}

static size_t _buckets(const void *impl)
{
    return tcomm_gpu_bucket_count(((const _gx *)impl)->g);
}

static double _comm_s(const void *impl)
{
    return ((const _gx *)impl)->comm_s;
}

static const char *_path(const void *impl)
{
    return tcomm_gpu_path(((const _gx *)impl)->g);
}

const ttrain_gx_ops ttrain_gx_cuda_ops = {
    .open = _open,
    .ready = _ready,
    .capturable = _capturable,
    .finish_device = _finish_device,
    .finish_host = _finish_host,
    .abandon = _abandon,
    .stats_average = _stats_average,
    .buckets = _buckets,
    .comm_s = _comm_s,
    .path = _path,
    .close = _close,
};
