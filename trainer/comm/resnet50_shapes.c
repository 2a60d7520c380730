/* resnet50_shapes.c: generates the ResNet-50 v1.5 parameter list from the
 * architecture (stages of 3, 4, 6, 3 bottlenecks of width 64..512 and
 * expansion 4, a projection shortcut opening each stage) instead of a
 * table, so the shapes are checkable against the design. v1.5 moves the
 * stride to the 3x3 convolution, which changes no shape. Names follow
 * torchvision's state_dict. */
#include <stdio.h>
#include <string.h>

#include "trainer/comm/resnet50_shapes.h"

typedef struct {
    tcomm_tensor_shape *out;
    int n;
    size_t total;
} _list;

static void _add(_list *l, const char *name, int ndims, int d0, int d1, int d2,
                 int d3)
{
    tcomm_tensor_shape *s = &l->out[l->n++];
    int d[4] = {d0, d1, d2, d3};
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndims = ndims;
    s->count = 1;
    for (int i = 0; i < 4; i++) {
        s->dims[i] = i < ndims ? d[i] : 1;
        s->count *= (size_t)s->dims[i];
    }
    l->total += s->count;
}

static void _conv_bn(_list *l, const char *prefix, const char *conv,
                     const char *bn, int cout, int cin, int k)
{
    char n[48];
    snprintf(n, sizeof n, "%s%s.weight", prefix, conv);
    _add(l, n, 4, cout, cin, k, k);
    snprintf(n, sizeof n, "%s%s.weight", prefix, bn);
    _add(l, n, 1, cout, 0, 0, 0);
    snprintf(n, sizeof n, "%s%s.bias", prefix, bn);
    _add(l, n, 1, cout, 0, 0, 0);
}

size_t tcomm_resnet50_shapes(tcomm_tensor_shape *out)
{
    static const int blocks[4] = {3, 4, 6, 3};
    _list l = {out, 0, 0};
    _conv_bn(&l, "", "conv1", "bn1", 64, 3, 7);
    int in = 64;
    for (int s = 0; s < 4; s++) {
        int w = 64 << s;
        for (int b = 0; b < blocks[s]; b++) {
            char p[32];
            snprintf(p, sizeof p, "layer%d.%d.", s + 1, b);
            _conv_bn(&l, p, "conv1", "bn1", w, in, 1);
            _conv_bn(&l, p, "conv2", "bn2", w, w, 3);
            _conv_bn(&l, p, "conv3", "bn3", 4 * w, w, 1);
            if (b == 0)
                _conv_bn(&l, p, "downsample.0", "downsample.1", 4 * w, in, 1);
            in = 4 * w;
        }
    }
    _add(&l, "fc.weight", 2, 1000, 2048, 0, 0);
    _add(&l, "fc.bias", 1, 1000, 0, 0, 0);
    return l.total;
}
