/* resnet.c: ResNet-50 v1.5, ResNet-18 and the CIFAR-style ResNet.
 *
 * Read top to bottom like the papers' tables: a stem, stages of residual
 * blocks, global average pooling and a classifier. Residual branches end
 * in a BN marked zero_gamma; the add carries the block's final ReLU. */
#include <stdio.h>

#include "trainer/models/tmodel.h"

#define _TRY(x)         \
    do {                \
        if ((x) < 0)    \
            return (x); \
    } while (0)

/* conv -> BN (-> ReLU): the unit everything here is made of. */
static int _conv_bn(teng_net *net, const char *pre, const char *conv,
                    const char *bn, int x, int k, int ks, int stride, int relu,
                    int zero_gamma)
{
    char n1[40], n2[40];
    snprintf(n1, sizeof(n1), "%s%s", pre, conv);
    snprintf(n2, sizeof(n2), "%s%s", pre, bn);
    int y = teng_add_conv(net, n1, x, k, ks, stride, ks / 2, 0);
    _TRY(y);
    return teng_add_bn(net, n2, y, relu, zero_gamma);
}

/* The projection shortcut (1x1 conv + BN) when shape changes, else x. */
static int _shortcut(teng_net *net, const char *pre, int x, int k, int stride)
{
    const teng_shape s = teng_tensor_shape(net, x);
    if (stride == 1 && s.c == k)
        return x;
    return _conv_bn(net, pre, "downsample.0", "downsample.1", x, k, 1, stride,
                    0, 0);
}

/* v1.5: the stride sits on the 3x3 conv, not the first 1x1. */
static int _bottleneck(teng_net *net, const char *pre, int x, int width,
                       int stride)
{
    int a = _conv_bn(net, pre, "conv1", "bn1", x, width, 1, 1, 1, 0);
    _TRY(a);
    int b = _conv_bn(net, pre, "conv2", "bn2", a, width, 3, stride, 1, 0);
    _TRY(b);
    int c = _conv_bn(net, pre, "conv3", "bn3", b, 4 * width, 1, 1, 0, 1);
    _TRY(c);
    int sc = _shortcut(net, pre, x, 4 * width, stride);
    _TRY(sc);
    char name[40];
    snprintf(name, sizeof(name), "%sadd", pre);
    return teng_add_residual(net, name, c, sc, 1);
}

static int _basic(teng_net *net, const char *pre, int x, int width, int stride)
{
    int a = _conv_bn(net, pre, "conv1", "bn1", x, width, 3, stride, 1, 0);
    _TRY(a);
    int b = _conv_bn(net, pre, "conv2", "bn2", a, width, 3, 1, 0, 1);
    _TRY(b);
    int sc = _shortcut(net, pre, x, width, stride);
    _TRY(sc);
    char name[40];
    snprintf(name, sizeof(name), "%sadd", pre);
    return teng_add_residual(net, name, b, sc, 1);
}

/* Stages of blocks; stage 0 keeps the resolution, the others halve it. */
static int _stages(teng_net *net, int x, int nstages, const int *blocks,
                   int width0, int bottleneck)
{
    for (int s = 0; s < nstages; s++)
        for (int b = 0; b < blocks[s]; b++) {
            char pre[24];
            int stride = (s > 0 && b == 0) ? 2 : 1;
            snprintf(pre, sizeof(pre), "layer%d.%d.", s + 1, b);
            x = bottleneck ? _bottleneck(net, pre, x, width0 << s, stride)
                           : _basic(net, pre, x, width0 << s, stride);
            _TRY(x);
        }
    return x;
}

static int _head(teng_net *net, int x, const tmodel_spec *spec)
{
    int g = teng_add_gap(net, "avgpool", x);
    _TRY(g);
    int f = teng_add_fc(net, "fc", g, spec->classes, 1);
    _TRY(f);
    return teng_add_xent(net, "loss", f, spec->label_smoothing);
}

/* ImageNet stem: 7x7/2 conv, BN, ReLU, 3x3/2 max pool. */
static int _imagenet_stem(teng_net *net, int x)
{
    int c = _conv_bn(net, "", "conv1", "bn1", x, 64, 7, 2, 1, 0);
    _TRY(c);
    return teng_add_maxpool(net, "maxpool", c, 3, 2, 1);
}

/* ImageNet ResNets: stem, four stages at 64..512 filters, head. */
static int _imagenet_resnet(teng_net *net, const tmodel_spec *spec,
                            const int *blocks, int bottleneck)
{
    int x = teng_add_input(net, spec->in_channels, spec->image_size,
                           spec->image_size);
    _TRY(x);
    x = _imagenet_stem(net, x);
    _TRY(x);
    x = _stages(net, x, 4, blocks, 64, bottleneck);
    _TRY(x);
    return _head(net, x, spec);
}

int _tmodel_resnet50(teng_net *net, const tmodel_spec *spec)
{
    static const int blocks[4] = {3, 4, 6, 3};
    return _imagenet_resnet(net, spec, blocks, 1);
}

int _tmodel_resnet18(teng_net *net, const tmodel_spec *spec)
{
    static const int blocks[4] = {2, 2, 2, 2};
    return _imagenet_resnet(net, spec, blocks, 0);
}

/* 3x3 conv stem with 16 filters, three stages of n basic blocks at 16,
 * 32 and 64 filters (projection shortcuts where the shape changes). */
int _tmodel_cifar_resnet(teng_net *net, const tmodel_spec *spec)
{
    int n = (spec->depth - 2) / 6, blocks[3] = {n, n, n};
    int x = teng_add_input(net, spec->in_channels, spec->image_size,
                           spec->image_size);
    _TRY(x);
    x = _conv_bn(net, "", "conv1", "bn1", x, 16, 3, 1, 1, 0);
    _TRY(x);
    x = _stages(net, x, 3, blocks, 16, 0);
    _TRY(x);
    return _head(net, x, spec);
}
