/* core/wire_math.h: the per-element maths of libtcomm's wire, as static
 * inline functions that compile both as plain C (the host wire code,
 * core/wire.c, whose scalar path is these functions) and as CUDA device
 * code (the NCCL transport's pack/unpack kernels,
 * transport/nccl_kernels.cu), so the device casts gradients to the wire
 * exactly as the host does, and the CPU tests (tests/unit/test_comm_wire.c)
 * check the device's maths against the host's F16C/AVX-512 kernels.
 *
 * Contract:
 * - tc_wm_half: fp32 -> IEEE binary16 bits, round to nearest even,
 *   subnormals produced, overflow to inf of the same sign, a NaN stays a
 *   quiet NaN with the top bits of its payload (what F16C's VCVTPS2PH does);
 * - tc_wm_bf16: fp32 -> bfloat16 bits, round to nearest even, NaN quieted;
 * - tc_wm_from_half / tc_wm_from_bf16: exact widening to fp32;
 * - tc_wm_scaled: x * s rounded once to fp32 (the 1/world pre-division;
 *   __fmul_rn on the device, which nvcc never fuses with anything);
 * - tc_wm_pack16 / tc_wm_unpack16: one element to and from a 16-bit wire
 *   (bf16 selects bfloat16), the pre-scale applied before the cast so that
 *   fp16 cannot overflow where the mean would not;
 * - tc_wm_nonfinite: 1 for inf or NaN (the loss-scale skip counts these).
 * Only integer operations and one correctly rounded fp32 product, so host
 * and device agree bit for bit. */
#ifndef TORUS_TCOMM_CORE_WIRE_MATH_H
#define TORUS_TCOMM_CORE_WIRE_MATH_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TC_WM_HD __host__ __device__
#else
#define TC_WM_HD
#endif

static inline TC_WM_HD uint32_t tc_wm_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline TC_WM_HD float tc_wm_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline TC_WM_HD uint16_t tc_wm_half(float f)
{
    uint32_t u = tc_wm_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* inf or nan */
        return (
            uint16_t)(sign | 0x7c00u |
                      (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0));
    if (a >= 0x477ff000u) /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {   /* below the smallest normal: subnormal or zero */
        if (a < 0x33000000u) /* below half the smallest subnormal */
            return sign;
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1),
                 half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((a - 0x38000000u) >> 13);
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

static inline TC_WM_HD float tc_wm_from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return tc_wm_float(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0)
            return tc_wm_float(sign);
        /* subnormal: m * 2^-24 is exact in fp32 (2^-24 = 0x33800000) */
        float v = (float)m * tc_wm_float(0x33800000u);
        return sign ? -v : v;
    }
    return tc_wm_float(sign | ((e + 112) << 23) | (m << 13));
}

static inline TC_WM_HD uint16_t tc_wm_bf16(float f)
{
    uint32_t u = tc_wm_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* quiet the nan */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline TC_WM_HD float tc_wm_from_bf16(uint16_t b)
{
    return tc_wm_float((uint32_t)b << 16);
}

static inline TC_WM_HD float tc_wm_scaled(float x, float s)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(x, s);
#else
    return x * s;
#endif
}

static inline TC_WM_HD uint16_t tc_wm_pack16(float x, float s, int bf16)
{
    float v = tc_wm_scaled(x, s);
    return bf16 ? tc_wm_bf16(v) : tc_wm_half(v);
}

static inline TC_WM_HD float tc_wm_unpack16(uint16_t w, int bf16)
{
    return bf16 ? tc_wm_from_bf16(w) : tc_wm_from_half(w);
}

static inline TC_WM_HD int tc_wm_nonfinite(float v)
{
    return (tc_wm_bits(v) & 0x7f800000u) == 0x7f800000u;
}

#endif
