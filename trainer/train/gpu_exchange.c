/* train/gpu_exchange.c: torus-train's device-memory gradient exchange over
 * libtcomm's tcomm_gpu (see ttrain_gpu_exchange.h). */
#include <stdlib.h>

#include "common/torus_error.h"
#include "config.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_gpu_exchange.h"
#ifdef TORUS_HAVE_CUDA
#include "trainer/comm/tcomm_gpu.h"
#endif

int ttrain_gx_wanted(const teng_backend *bk)
{
    return !teng_backend_host_memory(bk);
}

#ifdef TORUS_HAVE_CUDA
struct ttrain_gx {
    tcomm_gpu_t *g;
    int np;        /* params; param i is exchange index np - 1 - i */
    double comm_s; /* the reductions' time so far (tcomm_fusion_stats) */
};

int ttrain_gx_open(tcomm_t *c, teng_net *net, teng_backend *bk, tcomm_algo algo,
                   tcomm_wire wire, int bucket_kb, ttrain_gx **out)
{
    ttrain_gx *x = calloc(1, sizeof *x);
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
        ttrain_gx_close(x);
        return rc;
    }
    *out = x;
    return 0;
}

int ttrain_gx_ready(void *ctx, teng_net *net, int layer)
{
    ttrain_gx *x = ctx;
    teng_layer_info l;
    if (teng_net_layer_info(net, layer, &l))
        return -1;
    for (int i = l.param0; i < l.param0 + l.nparam; i++)
        if (tcomm_gpu_ready(x->g, x->np - 1 - i))
            return -1;
    return 0;
}

int ttrain_gx_wait(ttrain_gx *x, size_t *nonfinite, double *wait_s)
{
    return ttrain_gx_finish_device(x)
               ? -1
               : ttrain_gx_finish_host(x, nonfinite, wait_s);
}

int ttrain_gx_capturable(const ttrain_gx *x)
{
    return tcomm_gpu_capturable(x->g);
}

int ttrain_gx_finish_device(ttrain_gx *x)
{
    return tcomm_gpu_finish_device(x->g) ? -1 : 0;
}

int ttrain_gx_finish_host(ttrain_gx *x, size_t *nonfinite, double *wait_s)
{
    tcomm_fusion_stats st;
    if (tcomm_gpu_finish_host(x->g, &st))
        return -1;
    x->comm_s += st.comm_s;
    *nonfinite = st.nonfinite;
    *wait_s += st.wait_s;
    return 0;
}

void ttrain_gx_abandon(ttrain_gx *x)
{
    tcomm_gpu_abandon(x->g);
}

int ttrain_gx_stats_average(ttrain_gx *x, teng_net *net, tcomm_algo algo)
{
    (void)algo; /* the path's own algorithm: a few KB once per evaluation */
    size_t n;
    float *stats = teng_net_stats_buffer(net, &n);
    return n && tcomm_gpu_allreduce(x->g, stats, n, TCOMM_WIRE_FP32,
                                    TCOMM_AVERAGE)
               ? -1
               : 0;
}

size_t ttrain_gx_buckets(const ttrain_gx *x)
{
    return tcomm_gpu_bucket_count(x->g);
}

double ttrain_gx_comm_s(const ttrain_gx *x)
{
    return x->comm_s;
}

const char *ttrain_gx_path(const ttrain_gx *x)
{
    return tcomm_gpu_path(x->g);
}

void ttrain_gx_close(ttrain_gx *x)
{
    if (!x)
        return;
    tcomm_gpu_destroy(x->g);
    free(x);
}
#else
struct ttrain_gx {
    int unused;
};

int ttrain_gx_open(tcomm_t *c, teng_net *net, teng_backend *bk, tcomm_algo algo,
                   tcomm_wire wire, int bucket_kb, ttrain_gx **out)
{
    (void)c, (void)net, (void)algo, (void)wire, (void)bucket_kb, (void)out;
    return TORUS_FAIL(TTRAIN_EDEVICE,
                      "backend %s keeps gradients in device memory, but "
                      "torus was built without CUDA: no GPU gradient exchange",
                      teng_backend_name(bk));
}

int ttrain_gx_ready(void *x, teng_net *net, int layer)
{
    (void)x, (void)net, (void)layer;
    return 0;
}

int ttrain_gx_wait(ttrain_gx *x, size_t *nonfinite, double *wait_s)
{
    (void)x, (void)wait_s;
    *nonfinite = 0;
    return 0;
}

int ttrain_gx_capturable(const ttrain_gx *x)
{
    (void)x;
    return 0;
}

int ttrain_gx_finish_device(ttrain_gx *x)
{
    (void)x;
    return 0;
}

int ttrain_gx_finish_host(ttrain_gx *x, size_t *nonfinite, double *wait_s)
{
    (void)x, (void)wait_s;
    *nonfinite = 0;
    return 0;
}

void ttrain_gx_abandon(ttrain_gx *x)
{
    (void)x;
}

int ttrain_gx_stats_average(ttrain_gx *x, teng_net *net, tcomm_algo algo)
{
    (void)x, (void)net, (void)algo;
    return 0;
}

size_t ttrain_gx_buckets(const ttrain_gx *x)
{
    (void)x;
    return 0;
}

double ttrain_gx_comm_s(const ttrain_gx *x)
{
    (void)x;
    return 0;
}

const char *ttrain_gx_path(const ttrain_gx *x)
{
    (void)x;
    return "none";
}

void ttrain_gx_close(ttrain_gx *x)
{
    (void)x;
}
#endif
