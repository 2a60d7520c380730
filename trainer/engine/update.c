/* update.c: the operations an optimizer runs through the engine (see
 * teng.h, "what an optimizer needs"): its state buffer, every param's
 * sum of squares, and the fused update. Each is one backend call over all
 * params, so the optimizer above never touches the backend and a device
 * backend needs no host round trip per tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/engine/internal.h"

#define _NEED_COMPILED(net, what)                                         \
    do {                                                                  \
        if (!(net)->compiled)                                             \
            return TORUS_FAIL(TENG_ESTATE, "%s: the net is not compiled", \
                              (what));                                    \
    } while (0)

int teng_optstate_alloc(teng_net *net, void **state)
{
    *state = NULL;
    _NEED_COMPILED(net, "optimizer state");
    /* Laid out like the master params, so a param's state lies at its
     * offset and teng_optstate_read/write convert it like the param. */
    *state = net->bk->ops->alloc(net->bk, net->params_bytes);
    if (!*state)
        return TORUS_FAIL(TENG_ENOMEM,
                          "cannot allocate %zu bytes of optimizer state",
                          net->params_bytes);
    net->alloc_bytes += net->params_bytes;
    return TENG_OK;
}

void teng_optstate_free(teng_net *net, void *state)
{
    if (state && net && net->bk) {
        net->bk->ops->free(net->bk, state);
        net->alloc_bytes -= net->params_bytes;
    }
}

int teng_param_sumsq(teng_net *net, int grad, float *out)
{
    _NEED_COMPILED(net, "param sums of squares");
    teng_backend *bk = net->bk;
    int rc =
        bk->ops->param_sumsq(bk, net, grad ? net->grads : net->params, out);
    return rc ? torus_error_prefix(rc, "%s sums of squares on %s",
                                   grad ? "gradient" : "weight", bk->ops->name)
              : TENG_OK;
}

int teng_net_grads_finite(teng_net *net, int *finite)
{
    int rc = teng_param_sumsq(net, 1, net->host_sumsq);
    if (rc)
        return rc;
    /* One inf or nan anywhere makes its tensor's sum, and this one, so. */
    float s = 0.f;
    for (int i = 0; i < net->np; i++)
        s += net->host_sumsq[i];
    *finite = isfinite(s);
    return TENG_OK;
}

int teng_net_sgd_update(teng_net *net, void *state, const teng_sgd_args *args)
{
    _NEED_COMPILED(net, "SGD update");
    teng_backend *bk = net->bk;
    int rc = bk->ops->sgd_update(bk, net, state, args);
    return rc ? torus_error_prefix(rc, "SGD update on %s", bk->ops->name)
              : TENG_OK;
}

/* ---- the device step (teng.h) ---- */

int teng_net_dstep_supported(const teng_net *net)
{
    return net->bk && net->bk->ops->dstep_open && net->bk->ops->dstep &&
           net->bk->ops->dstep_read;
}

int teng_net_dstep_open(teng_net *net, const teng_tensor_hyper *h,
                        const teng_dstep_config *c, const teng_dstep_state *s)
{
    _NEED_COMPILED(net, "device step");
    if (!teng_net_dstep_supported(net))
        return TORUS_FAIL(TENG_ESTATE, "backend %s has no device step",
                          net->bk->ops->name);
    size_t n = (size_t)net->np + 1;
    if (h != net->dstep_h) { /* a rebind passes the kept copy back */
        teng_tensor_hyper *k = malloc(n * sizeof *k);
        if (!k)
            return TORUS_FAIL(TENG_ENOMEM, "device step: out of memory");
        memcpy(k, h, (size_t)net->np * sizeof *k);
        free(net->dstep_h);
        net->dstep_h = k;
    }
    net->dstep_c = *c;
    const double *scale = NULL;
    int rc = net->bk->ops->dstep_open(net->bk, net, net->dstep_h, c, s, &scale);
    if (rc)
        return torus_error_prefix(rc, "device step on %s", net->bk->ops->name);
    net->dstep_on = 1;
    net->loss_scale_dev = scale;
    return TENG_OK;
}

int teng_net_dstep(teng_net *net, void *vel, double lr, unsigned parts)
{
    if (!net->dstep_on)
        return TORUS_FAIL(TENG_ESTATE, "device step: not open");
    int rc = net->bk->ops->dstep(net->bk, net, vel, lr, parts);
    return rc ? torus_error_prefix(rc, "device step on %s", net->bk->ops->name)
              : TENG_OK;
}

int teng_net_dstep_read(teng_net *net, teng_dstep_state *s, int reset_window)
{
    if (!net->dstep_on)
        return TORUS_FAIL(TENG_ESTATE, "device step: not open");
    int rc = net->bk->ops->dstep_read(net->bk, net, s, reset_window);
    return rc ? torus_error_prefix(rc, "device step on %s", net->bk->ops->name)
              : TENG_OK;
}
