/* trainer/backends/cuda/cuda_math.h: the per-element maths of the cuda
 * backend's own kernels, as static inline functions that compile for the
 * device under nvcc and as plain C everywhere else, so that
 * tests/unit/test_cuda_host.c checks them on the CPU against the engine's
 * host kernels (trainer/engine/host_kernels.c, what the oneDNN backend
 * runs). The kernels in cuda_kernels.cu only index and call these. The
 * maths the host kernels have as one element or row of their own (the
 * counter hash, dropout, the cross-entropy row) is not copied here: it is
 * the engine's trainer/engine/elem_math.h (teng_), included below.
 *
 * Contract: every tcuda_ function here gives, for the same inputs, the
 * result of the host kernel it names, bit for bit (ReLU, add, grad sums).
 * The fp16 conversions are IEEE round-to-nearest-even, bit for bit. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_MATH_H
#define TORUS_TRAINER_BACKENDS_CUDA_MATH_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/engine/elem_math.h"

/* Host and device under nvcc, plain C elsewhere. */
#define TCUDA_HD TENG_HD

/* IEEE binary16 from fp32, rounded to nearest even (overflow to inf, nan
 * stays a quiet nan), and back (exact): the FP16 mode's only roundings of
 * activations and working copies; tested against the compiler's _Float16. */
TCUDA_HD uint16_t tcuda_f16_from_f32(float f)
{
    union {
        float f;
        uint32_t u;
    } v;
    v.f = f;
    uint32_t sign = (v.u >> 16) & 0x8000u, ax = v.u & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf, nan */
        return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) /* rounds to 65536 and beyond */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: a subnormal half, or zero */
        if (ax < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e, q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        q += rem > half || (rem == half && (q & 1u));
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax - 0x38000000u; /* exponent rebiased by 127 - 15 */
    uint32_t q = r >> 13, rem = r & 0x1fffu;
    q += rem > 0x1000u || (rem == 0x1000u && (q & 1u));
    return (uint16_t)(sign | q);
}

TCUDA_HD float tcuda_f32_from_f16(uint16_t h)
{
    union {
        float f;
        uint32_t u;
    } v;
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu)
        v.u = sign | 0x7f800000u | (m << 13);
    else if (e)
        v.u = sign | ((e + 112u) << 23) | (m << 13);
    else { /* zero or subnormal: m * 2^-24, exact in fp32 */
        v.f = (float)m * 5.9604644775390625e-8f;
        v.u |= sign;
    }
    return v.f;
}

/* ReLU backward from the output: y > 0 passes the gradient. */
TCUDA_HD float tcuda_relu_bwd(float y, float dy)
{
    return y > 0.0f ? dy : 0.0f;
}

/* Residual add with the optional fused ReLU. */
TCUDA_HD float tcuda_add(float a, float b, int relu)
{
    float s = a + b;
    return relu && !(s > 0.0f) ? 0.0f : s;
}

/* Gradient fan-in: the contributions summed in order. */
TCUDA_HD float tcuda_sum4(const float *const *c, int n, size_t i)
{
    float s = c[0][i];
    for (int k = 1; k < n; k++)
        s += c[k][i];
    return s;
}

/* Whether every one of the np pointers is 16-byte aligned: the vector
 * kernels load and store 16 bytes at a time (cuda_kernels.cu), and run
 * only when this holds; the scalar kernels run otherwise. */
TCUDA_HD int tcuda_vec_aligned(const void *const *p, int np)
{
    for (int i = 0; i < np; i++)
        if ((uintptr_t)p[i] & 15u)
            return 0;
    return 1;
}

#endif
