/* train/gpu_exchange.c: torus-train's device-memory gradient exchange (see
 * ttrain_gpu_exchange.h). torus-train links no CUDA library, so every call
 * forwards to the implementation the cuda backend's module exports
 * (gpu_exchange_cuda.c); a device-memory backend is only ever open when
 * that module is loaded. */
#include <stdlib.h>

#include "common/torus_error.h"
#include "trainer/backends/tbackends.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_gpu_exchange.h"

struct ttrain_gx {
    const ttrain_gx_ops *ops;
    void *impl;
};

int ttrain_gx_wanted(const teng_backend *bk)
{
    return !teng_backend_host_memory(bk);
}

int ttrain_gx_open(tcomm_t *c, teng_net *net, teng_backend *bk, tcomm_algo algo,
                   tcomm_wire wire, int bucket_kb, ttrain_gx **out)
{
    const ttrain_gx_ops *ops = tbackends_module_symbol(TTRAIN_GX_OPS_SYMBOL);
    if (!ops)
        return TORUS_FAIL(TTRAIN_EDEVICE,
                          "backend %s keeps gradients in device memory, but "
                          "no cuda module with a GPU gradient exchange is "
                          "loaded",
                          teng_backend_name(bk));
    ttrain_gx *x = calloc(1, sizeof *x);
    if (!x)
        return TORUS_FAIL(TTRAIN_ENOMEM, "no memory for the GPU exchange");
    x->ops = ops;
    int rc = ops->open(c, net, bk, algo, wire, bucket_kb, &x->impl);
    if (rc) {
        free(x);
        return rc;
    }
    *out = x;
    return 0;
}

int ttrain_gx_ready(void *ctx, teng_net *net, int layer)
{
    ttrain_gx *x = ctx;
    return x->ops->ready(x->impl, net, layer);
}

int ttrain_gx_wait(ttrain_gx *x, size_t *nonfinite, double *wait_s)
{
    return ttrain_gx_finish_device(x)
               ? -1
               : ttrain_gx_finish_host(x, nonfinite, wait_s);
}

int ttrain_gx_capturable(const ttrain_gx *x)
{
    return x->ops->capturable(x->impl);
}

int ttrain_gx_finish_device(ttrain_gx *x)
{
    return x->ops->finish_device(x->impl);
}

int ttrain_gx_finish_host(ttrain_gx *x, size_t *nonfinite, double *wait_s)
{
    return x->ops->finish_host(x->impl, nonfinite, wait_s);
}

void ttrain_gx_abandon(ttrain_gx *x)
{
    x->ops->abandon(x->impl);
}

int ttrain_gx_stats_average(ttrain_gx *x, teng_net *net, tcomm_algo algo)
{
    (void)algo; /* the path's own algorithm: a few KB once per evaluation */
    return x->ops->stats_average(x->impl, net);
}

size_t ttrain_gx_buckets(const ttrain_gx *x)
{
    return x->ops->buckets(x->impl);
}

double ttrain_gx_comm_s(const ttrain_gx *x)
{
    return x->ops->comm_s(x->impl);
}

const char *ttrain_gx_path(const ttrain_gx *x)
{
    return x->ops->path(x->impl);
}

void ttrain_gx_close(ttrain_gx *x)
{
    if (!x)
        return;
    x->ops->close(x->impl);
    free(x);
}
