/* sgd.c: momentum SGD with weight decay, LARS and momentum correction
 * (see topt.h for the maths). This file works out the hyper-parameters
 * of every tensor; the norms and the fused update are engine calls over
 * all params at once, run by the backend, so the same code drives a GPU
 * without a host round trip per tensor. */
#include <math.h>
#include <stdlib.h>

#include "common/torus_error.h"
#include "trainer/engine/step_math.h"
#include "trainer/optim/topt.h"

void topt_config_defaults(topt_config *c)
{
    c->momentum = 0.9;
    c->weight_decay = 1e-4;
    c->lars = 0;
    c->lars_eta = 0.001;
    c->lars_eps = 1e-9;
    c->exclude_bn_bias = 1;
    c->momentum_correction = 1;
}

int topt_config_validate(const topt_config *c)
{
    if (!(c->momentum >= 0 && c->momentum < 1))
        return TORUS_FAIL(TENG_EINVAL, "momentum %g is not in [0, 1)",
                          c->momentum);
    if (!(c->weight_decay >= 0 && c->weight_decay < 1))
        return TORUS_FAIL(TENG_EINVAL, "weight decay %g is not in [0, 1)",
                          c->weight_decay);
    if (c->lars && !(c->lars_eta > 0))
        return TORUS_FAIL(TENG_EINVAL, "LARS eta %g must be > 0", c->lars_eta);
    if (c->lars && !(c->lars_eps >= 0))
        return TORUS_FAIL(TENG_EINVAL, "LARS epsilon %g must be >= 0",
                          c->lars_eps);
    return TENG_OK;
}

float topt_lars_trust(float wnorm, float gnorm, float eta, float wd, float eps)
{
    /* A fresh zero-initialised tensor (|w| = 0) or a dead one (|g| = 0)
     * keeps the plain learning rate instead of freezing. */
    return teng_lars_trust(wnorm, gnorm, eta, wd, eps);
}

int topt_sgd_init(topt_sgd *o, teng_net *net, const topt_config *cfg)
{
    *o = (topt_sgd){.cfg = *cfg, .net = net};
    int rc = topt_config_validate(cfg);
    if (rc)
        return torus_error_prefix(rc, "optimizer");
    rc = teng_optstate_alloc(net, &o->velocity);
    if (rc)
        return torus_error_prefix(rc, "optimizer");
    size_t np = (size_t)teng_net_nparams(net) + 1;
    o->trust = calloc(np, sizeof(float));
    o->w2 = calloc(np, sizeof(float));
    o->g2 = calloc(np, sizeof(float));
    o->args = calloc(np, sizeof(teng_sgd_args));
    if (!o->trust || !o->w2 || !o->g2 || !o->args) {
        topt_sgd_free(o);
        return TORUS_FAIL(TENG_ENOMEM, "optimizer: out of memory");
    }
    return TENG_OK;
}

/* Fills o->trust and o->args for this step from the norms in o->w2/g2,
 * whose gradients are `scale` times the true ones (loss scaling):
 * teng_sgd_hyper's rule (engine/step_math.h), the one the cuda backend's LARS
 * kernel runs on the device too. */
static void _hyper(topt_sgd *o, double lr, double mom, double scale)
{
    for (int i = 0; i < teng_net_nparams(o->net); i++) {
        teng_tensor_hyper h = topt_sgd_tensor_hyper(o, i);
        o->args[i] = teng_sgd_hyper(&h, o->w2[i], o->g2[i], lr, (float)mom,
                                    scale, &o->trust[i]);
    }
}

teng_tensor_hyper topt_sgd_tensor_hyper(const topt_sgd *o, int i)
{
    const topt_config *c = &o->cfg;
    int plain = c->exclude_bn_bias && teng_net_param(o->net, i)->is_bn_or_bias;
    return (teng_tensor_hyper){plain ? 0.f : (float)c->weight_decay,
                               c->lars && !plain, (float)c->lars_eta,
                               (float)c->lars_eps};
}

int topt_sgd_step(topt_sgd *o, double lr)
{
    return topt_sgd_step_scaled(o, lr, 1.0);
}

double topt_sgd_momentum(const topt_sgd *o, double lr)
{
    /* Remark 2: with the LR inside v, a change of LR must rescale the
     * history, or the first steps after it use the old rate. */
    return teng_momentum(o->cfg.momentum, o->cfg.momentum_correction, lr,
                         o->prev_lr);
}

int topt_sgd_step_scaled(topt_sgd *o, double lr, double grad_scale)
{
    const topt_config *c = &o->cfg;
    if (!(grad_scale > 0) || !isfinite(grad_scale))
        return TORUS_FAIL(TENG_EINVAL, "optimizer: gradient scale %g",
                          grad_scale);
    double mom = topt_sgd_momentum(o, lr);
    int rc = 0;
    if (c->lars && ((rc = teng_param_sumsq(o->net, 0, o->w2)) ||
                    (rc = teng_param_sumsq(o->net, 1, o->g2))))
        return torus_error_prefix(rc, "optimizer");
    _hyper(o, lr, mom, grad_scale);
    if ((rc = teng_net_sgd_update(o->net, o->velocity, o->args)))
        return torus_error_prefix(rc, "optimizer");
    o->prev_lr = lr;
    o->steps++;
    return TENG_OK;
}

int topt_sgd_dstep_open(topt_sgd *o, const teng_dstep_config *ls,
                        const teng_dstep_state *s)
{
    int np = teng_net_nparams(o->net);
    teng_tensor_hyper *h = calloc((size_t)np + 1, sizeof *h);
    if (!h)
        return TORUS_FAIL(TENG_ENOMEM, "optimizer: out of memory");
    for (int i = 0; i < np; i++)
        h[i] = topt_sgd_tensor_hyper(o, i);
    teng_dstep_config c = *ls;
    c.momentum = o->cfg.momentum;
    c.correction = o->cfg.momentum_correction;
    teng_dstep_state st = *s;
    st.prev_lr = o->prev_lr;
    int rc = teng_net_dstep_open(o->net, h, &c, &st);
    free(h);
    return rc ? torus_error_prefix(rc, "optimizer") : TENG_OK;
}

void topt_sgd_dstep_seen(topt_sgd *o, topt_loss_scale_state *ls,
                         const teng_dstep_state *was,
                         const teng_dstep_state *now)
{
    *ls = (topt_loss_scale_state){now->scale, now->clean, now->overflows};
    /* A decided step either applied the update or was skipped for an
     * overflow. */
    o->steps +=
        (now->decided - was->decided) - (now->overflows - was->overflows);
    o->prev_lr = now->prev_lr;
}

int topt_sgd_dstep(topt_sgd *o, double lr, unsigned parts)
{
    int rc = teng_net_dstep(o->net, o->velocity, lr, parts);
    if (rc)
        return torus_error_prefix(rc, "optimizer");
    /* o->steps and o->prev_lr: the device's, until the caller reads them
     * back (topt_sgd_dstep_seen) */
    return TENG_OK;
}

int topt_sgd_state_read(topt_sgd *o, int id, float *dst)
{
    return teng_optstate_read(o->net, o->velocity, id, dst);
}

int topt_sgd_state_write(topt_sgd *o, int id, const float *src)
{
    return teng_optstate_write(o->net, o->velocity, id, src);
}

void topt_sgd_free(topt_sgd *o)
{
    teng_optstate_free(o->net, o->velocity);
    free(o->trust);
    free(o->w2);
    free(o->g2);
    free(o->args);
    o->velocity = NULL;
    o->trust = o->w2 = o->g2 = NULL;
    o->args = NULL;
}
