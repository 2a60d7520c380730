/* alexnet.c: AlexNet-BN as Tencent trained it at scale (Jia et al. 2018):
 * the original five convolutions without LRN, BN + ReLU after each, and a
 * BN after the last pooling layer too, which is what lets it train with
 * very large batches; then fc6/fc7 with ReLU and dropout, and fc8. */
#include "trainer/models/tmodel.h"

#define _TRY(x)         \
    do {                \
        if ((x) < 0)    \
            return (x); \
    } while (0)

static int _conv_bn_relu(teng_net *net, const char *conv, const char *bn, int x,
                         int k, int ks, int stride, int pad)
{
    int y = teng_add_conv(net, conv, x, k, ks, stride, pad, 0);
    _TRY(y);
    return teng_add_bn(net, bn, y, 1, 0);
}

static int _fc_relu_drop(teng_net *net, const char *fc, const char *relu,
                         const char *drop, int x, int k, float p)
{
    int y = teng_add_fc(net, fc, x, k, 1);
    _TRY(y);
    y = teng_add_relu(net, relu, y);
    _TRY(y);
    return p > 0.f ? teng_add_dropout(net, drop, y, p) : y;
}

int _tmodel_alexnet_bn(teng_net *net, const tmodel_spec *spec)
{
    int x = teng_add_input(net, spec->in_channels, spec->image_size,
                           spec->image_size);
    _TRY(x);
    x = _conv_bn_relu(net, "conv1", "bn1", x, 96, 11, 4, 2);
    _TRY(x);
    x = teng_add_maxpool(net, "pool1", x, 3, 2, 0);
    _TRY(x);
    x = _conv_bn_relu(net, "conv2", "bn2", x, 256, 5, 1, 2);
    _TRY(x);
    x = teng_add_maxpool(net, "pool2", x, 3, 2, 0);
    _TRY(x);
    x = _conv_bn_relu(net, "conv3", "bn3", x, 384, 3, 1, 1);
    _TRY(x);
    x = _conv_bn_relu(net, "conv4", "bn4", x, 384, 3, 1, 1);
    _TRY(x);
    x = _conv_bn_relu(net, "conv5", "bn5", x, 256, 3, 1, 1);
    _TRY(x);
    x = teng_add_maxpool(net, "pool5", x, 3, 2, 0);
    _TRY(x);
    x = teng_add_bn(net, "bn_pool5", x, 0, 0); /* the Tencent addition */
    _TRY(x);
    x = _fc_relu_drop(net, "fc6", "relu6", "drop6", x, 4096, spec->dropout);
    _TRY(x);
    x = _fc_relu_drop(net, "fc7", "relu7", "drop7", x, 4096, spec->dropout);
    _TRY(x);
    x = teng_add_fc(net, "fc8", x, spec->classes, 1);
    _TRY(x);
    return teng_add_xent(net, "loss", x, spec->label_smoothing);
}
