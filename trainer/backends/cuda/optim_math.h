/* trainer/backends/cuda/optim_math.h: the per-element maths of the cuda
 * backend's optimizer kernels (cuda_optim.cu), as static inline functions
 * that compile both as plain C (host, unit-tested on the CPU in
 * tests/unit/test_cuda_optim.c) and as CUDA device code, so the maths the
 * GPU runs is the maths the CPU tests check.
 *
 * Contract:
 * - The update of one element is the engine's teng_sgd_elem
 *   (trainer/engine/step_math.h), the CPU backend's too: every product and
 *   sum is rounded to fp32 on its own (on the device through
 *   __fmul_rn/__fadd_rn, which nvcc never fuses into an FMA; a fused
 *   multiply-add would round once and differ from the host in the last
 *   bit).
 * - tcuda_f16_rne / tcuda_bf16_rne: fp32 -> fp16 / bf16 bits with round to
 *   nearest, ties to even, as IEEE 754 conversion does: overflow gives inf
 *   of the same sign, fp16 subnormals are produced (not flushed), a NaN
 *   stays a quiet NaN of the same sign.
 * - The optimizer's per-step rules (LARS trust, update arguments, loss
 *   scale, skip decision) are the engine's (trainer/engine/step_math.h),
 *   shared with trainer/optim; the kernels call them from there.
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
#include <math.h>
#include <string.h>
#endif

#include "trainer/engine/step_math.h"
#include "trainer/engine/teng.h"

/* Its own name, not cuda_math.h's (which carries "static inline"): the
 * two headers meet in one file. */
#ifdef __CUDACC__
#define TCUDA_OHD __host__ __device__
#else
#define TCUDA_OHD
#endif


static inline TCUDA_OHD uint32_t tcuda_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

/* fp16 subnormal: |x| in [2^-25, 2^-14) as a multiple of 2^-24, rounded
 * to nearest even (a carry into 0x400 is the smallest normal, correctly). */
static inline TCUDA_OHD uint16_t _tcuda_f16_sub(uint32_t a)
{
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - (a >> 23); /* 14 .. 24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)q;
}

static inline TCUDA_OHD uint16_t tcuda_f16_rne(float f)
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

static inline TCUDA_OHD uint16_t tcuda_bf16_rne(float f)
{
    uint32_t x = tcuda_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign, set quiet */
        return (uint16_t)((x >> 16) | 0x40u);
    /* A carry out of the mantissa bumps the exponent, up to inf. */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* A param as the kernels read it (the device table holds one per param). */
typedef struct {
    float *master;
    void *work; /* == master for TENG_F32 */
    const float *grad;
    size_t offset; /* bytes into buffers laid out like the params arena */
    int dtype;     /* teng_dtype of the working copy */
} tcuda_dparam;

static inline TCUDA_OHD void tcuda_store_work(const tcuda_dparam *p, uint64_t i,
                                              float w)
{
    if (p->dtype == TENG_F16)
        ((uint16_t *)p->work)[i] = tcuda_f16_rne(w);
    else if (p->dtype == TENG_BF16)
        ((uint16_t *)p->work)[i] = tcuda_bf16_rne(w);
}

/* The update of thread t (of nt) over [begin, end) of param p; vel is the
 * velocity buffer laid out like the params arena. */
static inline TCUDA_OHD void tcuda_sgd_thread(const tcuda_dparam *p, char *vel,
                                              const teng_sgd_args *a,
                                              uint64_t begin, uint64_t end,
                                              unsigned t, unsigned nt)
{
    float *v = (float *)(vel + p->offset);
    for (uint64_t i = begin + t; i < end; i += nt) {
        float wi = p->master[i], vi = v[i];
        teng_sgd_elem(&wi, &vi, p->grad[i], a->lr, a->momentum, a->wd);
        p->master[i] = wi;
        v[i] = vi;
        tcuda_store_work(p, i, wi);
    }
}

static inline TCUDA_OHD void tcuda_refresh_thread(const tcuda_dparam *p,
                                                  uint64_t begin, uint64_t end,
                                                  unsigned t, unsigned nt)
{
    for (uint64_t i = begin + t; i < end && p->dtype != TENG_F32; i += nt)
        tcuda_store_work(p, i, p->master[i]);
}

/* Thread t's fp32 partial sum of squares of param p's slice of buf. */
static inline TCUDA_OHD float tcuda_sumsq_thread(const tcuda_dparam *p,
                                                 const char *buf,
                                                 uint64_t begin, uint64_t end,
                                                 unsigned t, unsigned nt)
{
    const float *x = (const float *)(buf + p->offset);
    float s = 0.f;
    for (uint64_t i = begin + t; i < end; i += nt)
        s += x[i] * x[i];
    return s;
}

/* Both of thread t's partial sums at once, of param p's master weights
 * (*w2) and gradient (*g2), in tcuda_sumsq_thread's order. */
static inline TCUDA_OHD void tcuda_sumsq2_thread(const tcuda_dparam *p,
                                                 uint64_t begin, uint64_t end,
                                                 unsigned t, unsigned nt,
                                                 float *w2, float *g2)
{
    float sw = 0.f, sg = 0.f;
    for (uint64_t i = begin + t; i < end; i += nt) {
        float w = p->master[i], g = p->grad[i];
        sw += w * w;
        sg += g * g;
    }
    *w2 = sw;
    *g2 = sg;
}

/* Thread t's share of the device step's update of param p: nothing when
 * the step's inf/nan count bad is not 0, else the arguments formed from
 * the param's sums of squares (w2, g2; read only when h->lars) at the
 * scale the step ran at, then tcuda_sgd_thread. */
static inline TCUDA_OHD void
tcuda_step_thread(const tcuda_dparam *p, char *vel, const teng_tensor_hyper *h,
                  float w2, float g2, double lr, float mom, double scale,
                  unsigned long long bad, uint64_t begin, uint64_t end,
                  unsigned t, unsigned nt)
{
    if (bad)
        return;
    float trust;
    teng_sgd_args a = teng_sgd_hyper(h, h->lars ? w2 : 0.f, h->lars ? g2 : 0.f,
                                      lr, mom, scale, &trust);
    tcuda_sgd_thread(p, vel, &a, begin, end, t, nt);
}

/* Thread t's count of inf/nan in param p's gradient slice (an exponent of
 * all ones is inf or NaN, whatever the mantissa). */
/* 1 for an inf or nan (its exponent all ones). */
static inline TCUDA_OHD unsigned tcuda_nonfinite_elem(float g)
{
    return (tcuda_f32_bits(g) & 0x7f800000u) == 0x7f800000u;
}

static inline TCUDA_OHD unsigned tcuda_nonfinite_thread(const tcuda_dparam *p,
                                                        uint64_t begin,
                                                        uint64_t end,
                                                        unsigned t, unsigned nt)
{
    unsigned n = 0;
    for (uint64_t i = begin + t; i < end; i += nt)
        n += tcuda_nonfinite_elem(p->grad[i]);
    return n;
}

/* The same count with 16-byte loads (the vector kernels, TCUDA_VEC):
 * thread t of nt takes every nt-th 4-element pack of the 16-byte aligned
 * middle [a, z) of [begin, end), and the few elements before a and from
 * z one by one; summed over t in [0, nt), tcuda_nonfinite_thread's. */
static inline TCUDA_OHD unsigned tcuda_nonfinite_thread_v(
    const tcuda_dparam *p, uint64_t begin, uint64_t end, unsigned t,
    unsigned nt)
{
    const float *g = p->grad;
    uint64_t a = begin;
    unsigned n = 0;
    while (a < end && ((uintptr_t)(g + a) & 15u))
        a++;
    uint64_t z = a + (end - a) / 4 * 4;
    for (uint64_t j = a + 4 * (uint64_t)t; j < z; j += 4 * (uint64_t)nt) {
        float v[4];
#ifdef __CUDA_ARCH__
        float4 q = *(const float4 *)(g + j);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
#else
        memcpy(v, g + j, sizeof v);
#endif
        for (int k = 0; k < 4; k++)
            n += tcuda_nonfinite_elem(v[k]);
    }
    for (uint64_t i = begin + t; i < a; i += nt)
        n += tcuda_nonfinite_elem(g[i]);
    for (uint64_t i = z + t; i < end; i += nt)
        n += tcuda_nonfinite_elem(g[i]);
    return n;
}

#endif
