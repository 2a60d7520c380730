/* tiny.c: tiny-cnn, a small BN-free network (conv-relu-maxpool,
 * conv-relu, global average pool, fc). It exists for checks that batch
 * norm would blur: with no per-batch statistics, k ranks at local batch n
 * compute exactly the gradient of one rank at batch kn (up to fp32
 * summation order), which the 2-rank vs 1-rank test relies on. */
#include "trainer/models/tmodel.h"

int _tmodel_tiny_cnn(teng_net *net, const tmodel_spec *spec)
{
    int x = teng_add_input(net, spec->in_channels, spec->image_size,
                           spec->image_size);
    if (x >= 0)
        x = teng_add_conv(net, "conv1", x, 8, 3, 1, 1, 1);
    if (x >= 0)
        x = teng_add_relu(net, "relu1", x);
    if (x >= 0)
        x = teng_add_maxpool(net, "pool1", x, 2, 2, 0);
    if (x >= 0)
        x = teng_add_conv(net, "conv2", x, 16, 3, 1, 1, 1);
    if (x >= 0)
        x = teng_add_relu(net, "relu2", x);
    if (x >= 0)
        x = teng_add_gap(net, "gap", x);
    if (x >= 0)
        x = teng_add_fc(net, "fc", x, spec->classes, 1);
    if (x < 0)
        return x;
    return teng_add_xent(net, "loss", x, spec->label_smoothing);
}
