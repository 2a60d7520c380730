/* sgd.c: momentum SGD with weight decay, LARS and momentum correction on
 * the engine's param/grad arenas (see optim.h for the maths). The norms
 * and the update run on the backend, so the same code drives a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "trainer/engine/backend.h"
#include "trainer/optim/optim.h"

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

int topt_config_validate(const topt_config *c, char *err, size_t errlen)
{
    if (!(c->momentum >= 0 && c->momentum < 1)) {
        snprintf(err, errlen, "momentum %g is not in [0, 1)", c->momentum);
        return TENG_EINVAL;
    }
    if (!(c->weight_decay >= 0 && c->weight_decay < 1)) {
        snprintf(err, errlen, "weight decay %g is not in [0, 1)",
                 c->weight_decay);
        return TENG_EINVAL;
    }
    if (c->lars && !(c->lars_eta > 0)) {
        snprintf(err, errlen, "LARS eta %g must be > 0", c->lars_eta);
        return TENG_EINVAL;
    }
    if (c->lars && !(c->lars_eps >= 0)) {
        snprintf(err, errlen, "LARS epsilon %g must be >= 0", c->lars_eps);
        return TENG_EINVAL;
    }
    return TENG_OK;
}

float topt_lars_trust(float wnorm, float gnorm, float eta, float wd, float eps)
{
    /* A fresh zero-initialised tensor (|w| = 0) or a dead one (|g| = 0)
     * keeps the plain learning rate instead of freezing. */
    if (!(wnorm > 0.f) || !(gnorm > 0.f))
        return 1.f;
    return eta * wnorm / (gnorm + wd * wnorm + eps);
}

int topt_sgd_init(topt_sgd *o, teng_net *net, const topt_config *cfg)
{
    char err[200];
    o->net = net;
    o->cfg = *cfg;
    o->prev_lr = 0;
    o->steps = 0;
    o->velocity = NULL;
    o->trust = NULL;
    if (topt_config_validate(cfg, err, sizeof(err))) {
        snprintf(net->err, sizeof(net->err), "optimizer: %s", err);
        return TENG_EINVAL;
    }
    if (!net->compiled) {
        snprintf(net->err, sizeof(net->err),
                 "optimizer: the net must be compiled first");
        return TENG_ESTATE;
    }
    o->velocity = net->bk->ops->alloc(net->bk, net->params_bytes);
    o->trust = calloc((size_t)net->np + 1, sizeof(float));
    if (!o->velocity || !o->trust) {
        snprintf(net->err, sizeof(net->err), "optimizer: out of memory");
        topt_sgd_free(o);
        return TENG_ENOMEM;
    }
    return TENG_OK;
}

int topt_sgd_step(topt_sgd *o, double lr)
{
    teng_net *net = o->net;
    teng_backend *bk = net->bk;
    const topt_config *c = &o->cfg;
    /* Remark 2: with the LR inside v, a change of LR must rescale the
     * history, or the first steps after it use the old rate. */
    double mom = c->momentum;
    if (c->momentum_correction && o->prev_lr > 0)
        mom *= lr / o->prev_lr;
    for (int i = 0; i < net->np; i++) {
        teng_param *p = &net->p[i];
        size_t n = p->bytes / sizeof(float);
        int plain = c->exclude_bn_bias && p->is_bn_or_bias;
        float wd = plain ? 0.f : (float)c->weight_decay, trust = 1.f;
        if (c->lars && !plain) {
            float w2, g2;
            if (bk->ops->sumsq(bk, p->data, n, &w2) ||
                bk->ops->sumsq(bk, p->grad, n, &g2)) {
                snprintf(net->err, sizeof(net->err), "optimizer: %.200s",
                         bk->err);
                return TENG_EBACKEND;
            }
            trust = topt_lars_trust(sqrtf(w2), sqrtf(g2), (float)c->lars_eta,
                                    wd, (float)c->lars_eps);
        }
        o->trust[i] = trust;
        teng_sgd_args a = {(float)(lr * trust), (float)mom, wd};
        if (bk->ops->sgd_update(bk, p->data, p->grad,
                                (float *)((char *)o->velocity + p->offset), n,
                                &a)) {
            snprintf(net->err, sizeof(net->err), "optimizer: %.200s", bk->err);
            return TENG_EBACKEND;
        }
    }
    o->prev_lr = lr;
    o->steps++;
    return TENG_OK;
}

int topt_sgd_state_read(topt_sgd *o, int id, float *dst)
{
    if (id < 0 || id >= o->net->np)
        return teng_buffer_read(o->net, id, NULL, dst);
    return teng_buffer_read(o->net, id,
                            (char *)o->velocity + o->net->p[id].offset, dst);
}

int topt_sgd_state_write(topt_sgd *o, int id, const float *src)
{
    if (id < 0 || id >= o->net->np)
        return teng_buffer_write(o->net, id, NULL, src);
    return teng_buffer_write(o->net, id,
                             (char *)o->velocity + o->net->p[id].offset, src);
}

void topt_sgd_free(topt_sgd *o)
{
    if (o->velocity && o->net && o->net->bk)
        o->net->bk->ops->free(o->net->bk, o->velocity);
    free(o->trust);
    o->velocity = NULL;
    o->trust = NULL;
}
