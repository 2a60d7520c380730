/* trainer/backends/cuda/cuda_layout.h: the index maths between the
 * canonical NCHW layout (OIHW for weights: the same with N = O) and NHWC
 * (OHWI), the FP16 mode's layout, where cuDNN's tensor-core kernels work
 * without transposing. Static inline, for the device kernels (cuda_math.h's
 * TCUDA_HD) and the host (param I/O), so tests/unit/test_cuda_host.c checks
 * them against plain nested loops. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_LAYOUT_H
#define TORUS_TRAINER_BACKENDS_CUDA_LAYOUT_H

#include <stddef.h>

#include "trainer/backends/cuda/cuda_math.h"

/* Offsets of element (n, c, h, w) of a C x H x W tensor. */
TCUDA_HD size_t tcuda_nchw(size_t n, size_t c, size_t h, size_t w, int C, int H,
                           int W)
{
    return ((n * (size_t)C + c) * (size_t)H + h) * (size_t)W + w;
}

TCUDA_HD size_t tcuda_nhwc(size_t n, size_t c, size_t h, size_t w, int C, int H,
                           int W)
{
    return ((n * (size_t)H + h) * (size_t)W + w) * (size_t)C + c;
}

/* The NCHW offset of the element at NHWC offset i. */
TCUDA_HD size_t tcuda_nchw_of_nhwc(size_t i, int C, int H, int W)
{
    size_t c = i % (size_t)C, r = i / (size_t)C;
    size_t w = r % (size_t)W;
    r /= (size_t)W;
    return tcuda_nchw(r / (size_t)H, c, r % (size_t)H, w, C, H, W);
}

/* Whole tensors of n images on the host: NCHW -> NHWC (to_nhwc) or back;
 * src and dst do not overlap. */
static inline void tcuda_relayout(const float *src, float *dst, size_t n, int C,
                                  int H, int W, int to_nhwc)
{
    size_t total = n * (size_t)C * (size_t)H * (size_t)W;
    for (size_t i = 0; i < total; i++) {
        size_t j = tcuda_nchw_of_nhwc(i, C, H, W);
        if (to_nhwc)
            dst[i] = src[j];
        else
            dst[j] = src[i];
    }
}

#endif
