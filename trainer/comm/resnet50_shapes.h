/* resnet50_shapes.h: the 161 parameter tensors of ResNet-50 v1.5
 * (torchvision layout: 53 convolutions, 53 batch norms with weight and
 * bias, and the fc layer), 25,557,032 parameters in all. torus-bench uses
 * them to measure gradient synchronisation on real tensor sizes. */
#ifndef TORUS_TCOMM_RESNET50_SHAPES_H
#define TORUS_TCOMM_RESNET50_SHAPES_H

#include <stddef.h>

#define TCOMM_RESNET50_TENSORS 161

typedef struct {
    char name[48];
    int dims[4], ndims;
    size_t count;
} tcomm_tensor_shape;

/* Fill out[161] in forward (registration) order; returns the total count. */
size_t tcomm_resnet50_shapes(tcomm_tensor_shape *out);

#endif
