/* tmodel.h: the networks torus-train can build (prefix tmodel_).
 *
 * Builders describe a network with the engine's teng_add_* calls, layer
 * names following torchvision ("layer2.0.conv1") so weights can be
 * compared across frameworks. tmodel_init() then gives the compiled net
 * its initial weights: He init for convolutions, N(0, 0.01) for fully
 * connected layers (Goyal et al.), BN gamma 1 and beta 0, except gamma 0
 * on the last BN of every residual branch (zero-gamma, Goyal et al.), so
 * each residual block starts as the identity.
 */
#ifndef TORUS_TRAINER_MODELS_H
#define TORUS_TRAINER_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/engine/teng.h"

typedef enum {
    TMODEL_RESNET50, /* ResNet-50 v1.5: stride 2 in the 3x3 conv */
    TMODEL_RESNET18,
    TMODEL_CIFAR_RESNET, /* He et al. 2016 sec. 4.2, depth 6n+2, 28-32 px */
    TMODEL_ALEXNET_BN,   /* Tencent's AlexNet with BN, incl. after pool5 */
    TMODEL_TINY_CNN,     /* BN-free two-conv net for distributed checks */
    TMODEL_NKINDS
} tmodel_kind;

typedef struct {
    tmodel_kind kind;
    int in_channels; /* 3 for ImageNet, 1 for Fashion-MNIST */
    int image_size;  /* square input */
    int classes;
    int depth;             /* CIFAR ResNet only: 6n+2 (20, 32, 44, 56, 110) */
    float label_smoothing; /* 0: plain cross-entropy */
    float dropout;         /* AlexNet-BN fc6/fc7 dropout */
} tmodel_spec;

/* Name <-> kind: "resnet50", "resnet18", "cifar-resnet", "alexnet-bn",
 * "tiny-cnn". */
int tmodel_parse(const char *name, tmodel_kind *out);
const char *tmodel_name(tmodel_kind kind);
/* A spec with the model's usual defaults (ImageNet sizes; 28 px, 1
 * channel and 10 classes for the CIFAR-style ResNet). */
tmodel_spec tmodel_defaults(tmodel_kind kind);
/* Checks a spec; on error returns TENG_EINVAL after TORUS_FAIL naming the
 * value. */
int tmodel_validate(const tmodel_spec *spec);

/* Builds the model into an empty net; returns the loss layer index or a
 * negative teng_status (message in torus_error_msg()). */
int tmodel_build(teng_net *net, const tmodel_spec *spec);

/* Initial weights for a compiled net, drawn in param order from a
 * stream seeded with seed, in canonical layout: every rank and every
 * backend gets the same weights. */
int tmodel_init(teng_net *net, uint64_t seed);

#endif
