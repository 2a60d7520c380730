/* registry.c: model names, default specs and spec validation. */
#include <string.h>

#include "common/torus_error.h"
#include "trainer/models/tmodel.h"

static const char *_names[TMODEL_NKINDS] = {
    "resnet50", "resnet18", "cifar-resnet", "alexnet-bn", "tiny-cnn"};

int tmodel_parse(const char *name, tmodel_kind *out)
{
    for (int k = 0; k < TMODEL_NKINDS; k++)
        if (!strcmp(name, _names[k])) {
            *out = (tmodel_kind)k;
            return TENG_OK;
        }
    return TENG_EINVAL;
}

const char *tmodel_name(tmodel_kind kind)
{
    return kind >= 0 && kind < TMODEL_NKINDS ? _names[kind] : "?";
}

tmodel_spec tmodel_defaults(tmodel_kind kind)
{
    tmodel_spec s = {kind, 3, 224, 1000, 0, 0.f, 0.f};
    if (kind == TMODEL_CIFAR_RESNET || kind == TMODEL_TINY_CNN) {
        s.in_channels = 1;
        s.image_size = 28;
        s.classes = 10;
        s.depth = 20;
    }
    if (kind == TMODEL_ALEXNET_BN)
        s.dropout = 0.5f;
    return s;
}

int tmodel_validate(const tmodel_spec *s)
{
    /* Smallest input for which every pooling window still fits. */
    static const int min_px[TMODEL_NKINDS] = {32, 32, 8, 63, 2};
    if (s->kind < 0 || s->kind >= TMODEL_NKINDS)
        return TORUS_FAIL(TENG_EINVAL, "unknown model kind %d", (int)s->kind);
    if (s->in_channels < 1 || s->in_channels > 64)
        return TORUS_FAIL(TENG_EINVAL, "%s: %d input channels (1..64 allowed)",
                          _names[s->kind], s->in_channels);
    if (s->image_size < min_px[s->kind] || s->image_size > 4096)
        return TORUS_FAIL(TENG_EINVAL,
                          "%s: image size %d px (%d..4096 allowed)",
                          _names[s->kind], s->image_size, min_px[s->kind]);
    if (s->classes < 2)
        return TORUS_FAIL(TENG_EINVAL, "%s: %d classes (at least 2)",
                          _names[s->kind], s->classes);
    if (s->kind == TMODEL_CIFAR_RESNET && (s->depth < 8 || (s->depth - 2) % 6))
        return TORUS_FAIL(
            TENG_EINVAL,
            "cifar-resnet: depth %d is not 6n+2 with n >= 1 (20, 32, "
            "44, 56, 110)",
            s->depth);
    if (!(s->label_smoothing >= 0.f && s->label_smoothing < 1.f))
        return TORUS_FAIL(TENG_EINVAL, "label smoothing %g is not in [0, 1)",
                          s->label_smoothing);
    if (!(s->dropout >= 0.f && s->dropout < 1.f))
        return TORUS_FAIL(TENG_EINVAL, "dropout %g is not in [0, 1)",
                          s->dropout);
    return TENG_OK;
}
