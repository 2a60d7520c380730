/* data/read/tdata_norm.h: the per-element maths of the input transform's
 * last step, normalise and mirror (prefix tdata_norm_), as static inline
 * functions that are plain C here and host + device code under nvcc, so
 * that the loader's CPU path (transform.c's table) and a GPU input kernel
 * (trainer/backends/cuda) compute every value with the same two roundings.
 *
 * Normalise: byte v of channel ch becomes v * scale[ch] + bias[ch], a
 * float multiply then a float add, never fused into an FMA (the device
 * uses __fmul_rn/__fadd_rn, which nvcc does not contract), so the device
 * gives the host's bits. The loader's constants are scale = 1 / (255 std)
 * and bias = -mean / std (tdata_loader_norm).
 *
 * Mirror: with the loader's defer_flip option a batch holds unmirrored
 * u8 images in NHWC order and flips[i] says which to mirror;
 * tdata_norm_src maps an element of the output batch (NCHW or NHWC) to
 * the byte it reads. Tested against the loader's own mirrored float
 * output (tests/unit/test_data_loader.c). Includes nothing of torus. */
#ifndef TORUS_DATA_READ_NORM_H
#define TORUS_DATA_READ_NORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TDATA_HD static inline __host__ __device__
#else
#define TDATA_HD static inline
#endif

/* Byte v of a channel with that channel's scale and bias. */
TDATA_HD float tdata_norm_px(unsigned v, float scale, float bias)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(__fmul_rn((float)v, scale), bias);
#else
    /* volatile: the product is rounded to float on its own even where
     * the compiler could contract a*b+c into one FMA. */
    volatile float p = (float)v * scale;
    return p + bias;
#endif
}

/* Element i of an output batch of images c x h x w (nhwc: 0 NCHW, 1
 * NHWC): the index of the byte it comes from in the u8 NHWC source batch,
 * mirrored horizontally where flips[image] != 0; *ch receives its channel. */
TDATA_HD size_t tdata_norm_src(size_t i, int c, int h, int w, int nhwc,
                               const uint8_t *flips, int *ch)
{
    size_t img = (size_t)c * h * w, n = i / img, r = i % img;
    int x, y;
    if (nhwc) {
        *ch = (int)(r % (size_t)c);
        x = (int)(r / (size_t)c % (size_t)w);
        y = (int)(r / ((size_t)c * w));
    } else {
        *ch = (int)(r / ((size_t)h * w));
        y = (int)(r / (size_t)w % (size_t)h);
        x = (int)(r % (size_t)w);
    }
    if (flips[n])
        x = w - 1 - x;
    return n * img + ((size_t)y * w + x) * c + *ch;
}

#endif
