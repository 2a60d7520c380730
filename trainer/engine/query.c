/* query.c: what a net holds, for the modules above the engine (models,
 * the optimizer, torus-train, checkpoints), to which teng_net is opaque.
 * Read-only views and the few settings they need; no backend calls. */
#include "trainer/engine/internal.h"

int teng_net_nparams(const teng_net *net)
{
    return net->np;
}

const teng_param *teng_net_param(const teng_net *net, int id)
{
    return id >= 0 && id < net->np ? &net->p[id] : NULL;
}

int teng_net_layer_info(const teng_net *net, int layer, teng_layer_info *out)
{
    if (layer < 0 || layer >= net->nl)
        return TORUS_FAIL(TENG_EINVAL, "no layer %d", layer);
    const teng_layer *l = &net->l[layer];
    *out = (teng_layer_info){.kind = l->kind,
                             .name = l->name,
                             .param0 = l->param0,
                             .nparam = l->nparam,
                             .zero_gamma = l->zero_gamma};
    return TENG_OK;
}

teng_shape teng_tensor_shape(const teng_net *net, int id)
{
    teng_shape none = {0, 0, 0, 0};
    return id >= 0 && id < net->nt ? net->t[id].shape : none;
}

int teng_net_batch(const teng_net *net)
{
    return net->batch;
}

int teng_net_nstats(const teng_net *net)
{
    return net->nstats;
}

size_t teng_stats_count(const teng_net *net, int id)
{
    return id >= 0 && id < net->nstats ? (size_t)net->stat_len[id] : 0;
}

void *teng_net_stats_buffer(teng_net *net, size_t *nfloats)
{
    *nfloats = net->stats_bytes / sizeof(float);
    return net->stats;
}

size_t teng_net_alloc_bytes(const teng_net *net)
{
    return net->alloc_bytes;
}

size_t teng_net_acts_bytes(const teng_net *net)
{
    return net->acts_bytes;
}

void teng_net_set_dropout_seed(teng_net *net, uint64_t seed)
{
    net->dropout_seed = seed;
}

uint64_t teng_net_dropout_step(const teng_net *net)
{
    return net->step;
}

void teng_net_set_dropout_step(teng_net *net, uint64_t step)
{
    net->step = step;
}
