/* trainer/backends/cuda/optim_math.h: the per-element maths of the cuda
 * backend's optimizer kernels (cuda_optim.cu), as static inline functions
 * that compile both as plain C (host, unit-tested on the CPU in
 * tests/unit/test_optim_math.c) and as CUDA device code, so the maths the
 * GPU runs is the maths the CPU tests check.
 *
 * Contract:
 * - tcuda_sgd_elem is teng_host_sgd (trainer/engine/host_kernels.c) for one
 *   element, bit for bit: every product and sum is rounded to fp32 on its
 *   own (on the device through __fmul_rn/__fadd_rn, which nvcc never fuses
 *   into an FMA; a fused multiply-add would round once and differ from the
 *   host in the last bit).
 * - tcuda_f16_rne / tcuda_bf16_rne: fp32 -> fp16 / bf16 bits with round to
 *   nearest, ties to even, as IEEE 754 conversion does: overflow gives inf
 *   of the same sign, fp16 subnormals are produced (not flushed), a NaN
 *   stays a quiet NaN of the same sign.
 * - tcuda_lars_trust is topt_lars_trust (trainer/optim/sgd.c), bit for bit,
 *   for a device that forms the trust ratios itself.
 * - tcuda_sgd_thread / tcuda_refresh_thread / tcuda_sumsq_thread are one
 *   GPU thread's share of one chunk (elements begin + t, begin + t + nt,
 *   ... below end) exactly as the kernels run it, so a CPU test that runs
 *   every (chunk, t) of a plan runs the kernels' indexing too.
 * Only integer and correctly rounded fp32 operations are used, so host and
 * device agree exactly. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_OPTIM_MATH_H
#define TORUS_TRAINER_BACKENDS_CUDA_OPTIM_MATH_H

#include <stddef.h>
#include <stdint.h>
#ifndef __CUDACC__
#include <string.h>
#endif

#include "trainer/engine/teng.h"

#ifdef __CUDACC__
#define TCUDA_HD __host__ __device__
#else
#define TCUDA_HD
#endif

/* Correctly rounded, never-fused fp32 operations. */
#ifdef __CUDA_ARCH__
#define TCUDA_MUL(a, b) __fmul_rn((a), (b))
#define TCUDA_ADD(a, b) __fadd_rn((a), (b))
#define TCUDA_SUB(a, b) __fsub_rn((a), (b))
#else
#define TCUDA_MUL(a, b) ((a) * (b))
#define TCUDA_ADD(a, b) ((a) + (b))
#define TCUDA_SUB(a, b) ((a) - (b))
#endif

static inline TCUDA_HD uint32_t tcuda_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

/* v = m * v + lr * (g + wd * w); w = w - v (teng_host_sgd's order). */
static inline TCUDA_HD void tcuda_sgd_elem(float *w, float *v, float g,
                                           float lr, float m, float wd)
{
    float vi = TCUDA_ADD(TCUDA_MUL(m, *v),
                         TCUDA_MUL(lr, TCUDA_ADD(g, TCUDA_MUL(wd, *w))));
    *v = vi;
    *w = TCUDA_SUB(*w, vi);
}

/* fp16 subnormal: |x| in [2^-25, 2^-14) as a multiple of 2^-24, rounded
 * to nearest even (a carry into 0x400 is the smallest normal, correctly). */
static inline TCUDA_HD uint16_t _tcuda_f16_sub(uint32_t a)
{
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - (a >> 23); /* 14 .. 24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)q;
}

static inline TCUDA_HD uint16_t tcuda_f16_rne(float f)
{
    uint32_t x = tcuda_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) /* >= 65520 rounds to inf; inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* >= 2^-14: normal; rebias 127 -> 15 */
        uint32_t r = a - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a <= 0x33000000u) /* <= 2^-25: the tie at 2^-25 goes to even 0 */
        return sign;
    return (uint16_t)(sign | _tcuda_f16_sub(a));
}

static inline TCUDA_HD uint16_t tcuda_bf16_rne(float f)
{
    uint32_t x = tcuda_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign, set quiet */
        return (uint16_t)((x >> 16) | 0x40u);
    /* A carry out of the mantissa bumps the exponent, up to inf. */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* eta * |w| / (|g| + wd * |w| + eps); 1 when a norm is 0 (or NaN). */
static inline TCUDA_HD float tcuda_lars_trust(float wnorm, float gnorm,
                                              float eta, float wd, float eps)
{
    if (!(wnorm > 0.f) || !(gnorm > 0.f))
        return 1.f;
    return TCUDA_MUL(eta, wnorm) /
           TCUDA_ADD(TCUDA_ADD(gnorm, TCUDA_MUL(wd, wnorm)), eps);
}

/* A param as the kernels read it (the device table holds one per param). */
typedef struct {
    float *master;
    void *work; /* == master for TENG_F32 */
    const float *grad;
    size_t offset; /* bytes into buffers laid out like the params arena */
    int dtype;     /* teng_dtype of the working copy */
} tcuda_dparam;

static inline TCUDA_HD void tcuda_store_work(const tcuda_dparam *p, uint64_t i,
                                             float w)
{
    if (p->dtype == TENG_F16)
        ((uint16_t *)p->work)[i] = tcuda_f16_rne(w);
    else if (p->dtype == TENG_BF16)
        ((uint16_t *)p->work)[i] = tcuda_bf16_rne(w);
}

/* The update of thread t (of nt) over [begin, end) of param p; vel is the
 * velocity buffer laid out like the params arena. */
static inline TCUDA_HD void tcuda_sgd_thread(const tcuda_dparam *p, char *vel,
                                             const teng_sgd_args *a,
                                             uint64_t begin, uint64_t end,
                                             unsigned t, unsigned nt)
{
    float *v = (float *)(vel + p->offset);
    for (uint64_t i = begin + t; i < end; i += nt) {
        float wi = p->master[i], vi = v[i];
        tcuda_sgd_elem(&wi, &vi, p->grad[i], a->lr, a->momentum, a->wd);
        p->master[i] = wi;
        v[i] = vi;
        tcuda_store_work(p, i, wi);
    }
}

static inline TCUDA_HD void tcuda_refresh_thread(const tcuda_dparam *p,
                                                 uint64_t begin, uint64_t end,
                                                 unsigned t, unsigned nt)
{
    for (uint64_t i = begin + t; i < end && p->dtype != TENG_F32; i += nt)
        tcuda_store_work(p, i, p->master[i]);
}

/* Thread t's fp32 partial sum of squares of param p's slice of buf. */
static inline TCUDA_HD float tcuda_sumsq_thread(const tcuda_dparam *p,
                                                const char *buf, uint64_t begin,
                                                uint64_t end, unsigned t,
                                                unsigned nt)
{
    const float *x = (const float *)(buf + p->offset);
    float s = 0.f;
    for (uint64_t i = begin + t; i < end; i += nt)
        s += x[i] * x[i];
    return s;
}

#endif
