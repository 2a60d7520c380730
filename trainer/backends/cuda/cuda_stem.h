/* trainer/backends/cuda/cuda_stem.h: the padded stem of the FP16 mode
 * (prefix tcuda_stem_ / tcuda_k_stem_): the data input, 3 channels in
 * the net, is laid out on the device as fp16 NHWC with cp >= c channels,
 * the extra ones zero, and the one convolution that reads it (the stem)
 * runs on cp input channels with its filter padded likewise (OHWI, zero
 * weights on the padding channels), so that cuDNN can pick tensor-core
 * kernels for it; the maths is unchanged (a zero channel adds zero
 * products, and its weights' gradients are dropped). Which convolution
 * and how many channels: tcuda_stem_plan (cuda_fuse.h). The master
 * weights, gradients and optimizer state stay unpadded: the padded filter
 * is built in the scratch arena's temporary region before each forward,
 * and the padded weight gradient is cut back when converted to fp32.
 *
 * Per-element maths as host + device inline functions (tested on the CPU,
 * tests/unit/test_cuda_host.c); the launchers (cuda_stem.cu) queue one
 * kernel each on stream and return the launch's cudaError_t (0: queued).
 * The 8-bit input path writes the padded layout directly, in the one
 * kernel that normalises and mirrors (no extra pass). */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_STEM_H
#define TORUS_TRAINER_BACKENDS_CUDA_STEM_H

#include <stddef.h>
#include <stdint.h>

#include "data/read/tdata_norm.h"
#include "trainer/backends/cuda/cuda_math.h"

/* Not an element of the unpadded layout: a padding channel. */
#define TCUDA_STEM_PAD ((size_t)-1)

/* Rows of cp channels (NHWC pixels, OHWI filter taps) against rows of c:
 * the unpadded offset of padded offset i, or TCUDA_STEM_PAD; and the
 * padded offset of unpadded offset j. */
TCUDA_HD size_t tcuda_stem_unpad(size_t i, int c, int cp)
{
    size_t ch = i % (size_t)cp;
    return ch < (size_t)c ? i / (size_t)cp * (size_t)c + ch : TCUDA_STEM_PAD;
}

TCUDA_HD size_t tcuda_stem_pad(size_t j, int c, int cp)
{
    return j / (size_t)c * (size_t)cp + j % (size_t)c;
}

/* Element i of the padded fp16 NHWC input batch (images c x h x w of the
 * u8 NHWC source px, cp channels): the normalised, mirrored value of
 * tdata_norm.h, or 0 on a padding channel. scale, bias: per channel. */
TCUDA_HD float tcuda_stem_input_px(size_t i, int c, int cp, int h, int w,
                                   const uint8_t *px, const uint8_t *flips,
                                   const float *scale, const float *bias)
{
    int ch;
    size_t j = tcuda_stem_unpad(i, c, cp);
    if (j == TCUDA_STEM_PAD)
        return 0.f;
    size_t at = tdata_norm_src(j, c, h, w, 1, flips, &ch);
    return tdata_norm_px(px[at], scale[ch], bias[ch]);
}

#ifdef __cplusplus
extern "C" {
#endif

/* The padded input from u8 NHWC images (np: elements of the padded
 * output y, fp16; chw: the unpadded image {C, H, W}, C <= 3). */
int tcuda_k_stem_input_u8(void *stream, const uint8_t *px,
                          const uint8_t *flips, uint16_t *y, size_t np,
                          const int chw[3], int cp, const float scale[3],
                          const float bias[3]);
/* fp16 rows of c to rows of cp, zeros in the padding (np: elements of
 * dst). */
int tcuda_k_stem_pad(void *stream, const uint16_t *src, uint16_t *dst,
                     size_t np, int c, int cp);
/* fp16 rows of cp back to rows of c (n: elements of dst), dst fp32 (f32)
 * or fp16. */
int tcuda_k_stem_unpad(void *stream, const uint16_t *src, void *dst, size_t n,
                       int c, int cp, int f32);

#ifdef __cplusplus
}
#endif

#endif
