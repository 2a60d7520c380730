/* trainer/backends/cuda/cuda_stem.cu: the padded stem's kernels (see
 * cuda_stem.h): grid-stride loops, each element one call into
 * cuda_stem.h's maths. Kept apart from cuda_kernels.cu: only the FP16
 * mode's stem uses them. */
#include "trainer/backends/cuda/cuda_stem.h"

#include "trainer/backends/cuda/cuda_grid.h"

#include <cuda_runtime.h>

/* Per-channel constants by value: a kernel argument, no device copy. */
typedef struct {
    float scale[3], bias[3];
} _norm3;

static __global__ void _input_u8(const uint8_t *px, const uint8_t *flips,
                                 uint16_t *y, size_t np, int c, int cp, int h,
                                 int w, _norm3 k)
{
    TCUDA_FOR(i, np)
    y[i] = tcuda_f16_from_f32(
        tcuda_stem_input_px(i, c, cp, h, w, px, flips, k.scale, k.bias));
}

extern "C" int tcuda_k_stem_input_u8(void *stream, const uint8_t *px,
                                     const uint8_t *flips, uint16_t *y,
                                     size_t np, const int chw[3], int cp,
                                     const float scale[3], const float bias[3])
{
    _norm3 k;
    for (int c = 0; c < 3; c++) {
        k.scale[c] = c < chw[0] ? scale[c] : 0.f;
        k.bias[c] = c < chw[0] ? bias[c] : 0.f;
    }
    _input_u8<<<tcuda_blocks(np), TCUDA_THREADS, 0, (cudaStream_t)stream>>>(
        px, flips, y, np, chw[0], cp, chw[1], chw[2], k);
    return (int)cudaGetLastError();
}

static __global__ void _pad(const uint16_t *src, uint16_t *dst, size_t np,
                            int c, int cp)
{
    TCUDA_FOR(i, np)
    {
        size_t j = tcuda_stem_unpad(i, c, cp);
        dst[i] = j == TCUDA_STEM_PAD ? (uint16_t)0 : src[j];
    }
}

extern "C" int tcuda_k_stem_pad(void *stream, const uint16_t *src,
                                uint16_t *dst, size_t np, int c, int cp)
{
    _pad<<<tcuda_blocks(np), TCUDA_THREADS, 0, (cudaStream_t)stream>>>(
        src, dst, np, c, cp);
    return (int)cudaGetLastError();
}

static __global__ void _unpad(const uint16_t *src, void *dst, size_t n, int c,
                              int cp, int f32)
{
    TCUDA_FOR(j, n)
    {
        uint16_t v = src[tcuda_stem_pad(j, c, cp)];
        if (f32)
            ((float *)dst)[j] = tcuda_f32_from_f16(v);
        else
            ((uint16_t *)dst)[j] = v;
    }
}

extern "C" int tcuda_k_stem_unpad(void *stream, const uint16_t *src, void *dst,
                                  size_t n, int c, int cp, int f32)
{
    _unpad<<<tcuda_blocks(n), TCUDA_THREADS, 0, (cudaStream_t)stream>>>(
        src, dst, n, c, cp, f32);
    return (int)cudaGetLastError();
}
