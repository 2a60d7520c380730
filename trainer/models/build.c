/* build.c: dispatch from a spec to its builder, and initialisation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/torus_error.h"
#include "trainer/engine/rng.h"
#include "trainer/models/tmodel.h"

int _tmodel_resnet50(teng_net *net, const tmodel_spec *spec);
int _tmodel_resnet18(teng_net *net, const tmodel_spec *spec);
int _tmodel_cifar_resnet(teng_net *net, const tmodel_spec *spec);
int _tmodel_alexnet_bn(teng_net *net, const tmodel_spec *spec);
int _tmodel_tiny_cnn(teng_net *net, const tmodel_spec *spec);

int tmodel_build(teng_net *net, const tmodel_spec *spec)
{
    int rc = tmodel_validate(spec);
    if (rc)
        return rc;
    switch (spec->kind) {
    case TMODEL_RESNET50:
        return _tmodel_resnet50(net, spec);
    case TMODEL_RESNET18:
        return _tmodel_resnet18(net, spec);
    case TMODEL_CIFAR_RESNET:
        return _tmodel_cifar_resnet(net, spec);
    case TMODEL_ALEXNET_BN:
        return _tmodel_alexnet_bn(net, spec);
    case TMODEL_TINY_CNN:
        return _tmodel_tiny_cnn(net, spec);
    default:
        return TORUS_FAIL(TENG_EINVAL, "model kind %d has no builder",
                          (int)spec->kind);
    }
}

/* Fills v (canonical layout) for param p. */
static void _init_param(const teng_net *net, const teng_param *p, float *v,
                        teng_rng *r)
{
    teng_layer_info l;
    float fill = 0.f, stdev = 0.f;
    teng_net_layer_info(net, p->layer, &l);
    switch (p->kind) {
    case TENG_P_WEIGHT:
        if (l.kind == TENG_L_CONV) {
            /* He et al. for ReLU nets: std = sqrt(2 / fan), with the
             * fan-out convention of Caffe2's MSRAFill (used by Goyal et
             * al.) and torchvision: K * kh * kw. */
            stdev = sqrtf(2.f / (float)(p->dims[0] * p->dims[2] * p->dims[3]));
        } else {
            stdev = 0.01f; /* fc: N(0, 0.01), Goyal et al. */
        }
        break;
    case TENG_P_GAMMA:
        fill = l.zero_gamma ? 0.f : 1.f;
        break;
    case TENG_P_BIAS:
    case TENG_P_BETA:
        fill = 0.f;
        break;
    }
    for (size_t i = 0; i < p->count; i++)
        v[i] = stdev > 0.f ? stdev * teng_rng_normal(r) : fill;
}

int tmodel_init(teng_net *net, uint64_t seed)
{
    teng_rng r;
    size_t most = 0;
    teng_rng_seed(&r, seed);
    int np = teng_net_nparams(net);
    for (int i = 0; i < np; i++)
        most = teng_net_param(net, i)->count > most
                   ? teng_net_param(net, i)->count
                   : most;
    float *v = malloc(most * sizeof(float));
    if (!v)
        return TORUS_FAIL(TENG_ENOMEM, "init: out of memory");
    int rc = TENG_OK;
    for (int i = 0; i < np && !rc; i++) {
        _init_param(net, teng_net_param(net, i), v, &r);
        rc = teng_param_write(net, i, 0, v);
    }
    free(v);
    return rc;
}
