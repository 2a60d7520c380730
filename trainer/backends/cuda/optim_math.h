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
 *   for a device that forms the trust ratios itself; tcuda_sgd_hyper is
 *   one tensor's update arguments from its norms, the LR, the momentum and
 *   the loss scale: sgd.c's host code calls it, and the device LARS kernel
 *   calls it, so both form the same arguments from the same sums.
 * - tcuda_ls_next is the dynamic loss-scale transition: topt_loss_scale_
 *   update (trainer/optim/loss_scale.c) calls it on the host and the
 *   one-thread decision kernel calls it on the device; tcuda_ls_decide
 *   adds the step's skip decision and torus-train's --max-nonfinite run.
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

#include "trainer/engine/teng.h"

/* Its own name, not cuda_math.h's (which carries "static inline"): the
 * two headers meet in one file. */
#ifdef __CUDACC__
#define TCUDA_OHD __host__ __device__
#else
#define TCUDA_OHD
#endif

/* Correctly rounded, never-fused fp32 operations (and the fp64 product
 * of the LR and the trust ratio, also never fused). */
#ifdef __CUDA_ARCH__
#define TCUDA_MUL(a, b)  __fmul_rn((a), (b))
#define TCUDA_ADD(a, b)  __fadd_rn((a), (b))
#define TCUDA_SUB(a, b)  __fsub_rn((a), (b))
#define TCUDA_DIV(a, b)  __fdiv_rn((a), (b))
#define TCUDA_SQRT(a)    __fsqrt_rn(a)
#define TCUDA_DMUL(a, b) __dmul_rn((a), (b))
#define TCUDA_DDIV(a, b) __ddiv_rn((a), (b))
#else
#define TCUDA_MUL(a, b)  ((a) * (b))
#define TCUDA_ADD(a, b)  ((a) + (b))
#define TCUDA_SUB(a, b)  ((a) - (b))
#define TCUDA_DIV(a, b)  ((a) / (b))
#define TCUDA_SQRT(a)    sqrtf(a)
#define TCUDA_DMUL(a, b) ((a) * (b))
#define TCUDA_DDIV(a, b) ((a) / (b))
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

/* v = m * v + lr * (g + wd * w); w = w - v (teng_host_sgd's order). */
static inline TCUDA_OHD void tcuda_sgd_elem(float *w, float *v, float g,
                                            float lr, float m, float wd)
{
    float vi = TCUDA_ADD(TCUDA_MUL(m, *v),
                         TCUDA_MUL(lr, TCUDA_ADD(g, TCUDA_MUL(wd, *w))));
    *v = vi;
    *w = TCUDA_SUB(*w, vi);
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

/* eta * |w| / (|g| + wd * |w| + eps); 1 when a norm is 0 (or NaN). */
static inline TCUDA_OHD float tcuda_lars_trust(float wnorm, float gnorm,
                                               float eta, float wd, float eps)
{
    if (!(wnorm > 0.f) || !(gnorm > 0.f))
        return 1.f;
    return TCUDA_DIV(TCUDA_MUL(eta, wnorm),
                     TCUDA_ADD(TCUDA_ADD(gnorm, TCUDA_MUL(wd, wnorm)), eps));
}

/* One tensor's constant hyper-parameters, fixed for the run: its weight
 * decay (0 for an excluded BN/bias tensor) and whether LARS scales it
 * (the engine's type: the backend op receives it). */
typedef teng_tensor_hyper tcuda_hyper;

/* The update arguments of one tensor (sgd.c's rule): w2, g2 are the sums
 * of squares of its weights and of its gradients, which are `scale` times
 * the true ones (loss scaling); the 1/scale is folded into the arguments:
 * v = m v + (lr/S) (S g + (wd S) w) is m v + lr (g + wd w), exact for a
 * power-of-two S. LARS sees |g| = sqrt(|S g|^2) / S. *trust: the ratio. */
static inline TCUDA_OHD teng_sgd_args tcuda_sgd_hyper(const tcuda_hyper *h,
                                                      float w2, float g2,
                                                      double lr, float mom,
                                                      double scale,
                                                      float *trust)
{
    float inv = (float)TCUDA_DDIV(1.0, scale), s = (float)scale, t = 1.f;
    if (h->lars)
        t = tcuda_lars_trust(TCUDA_SQRT(w2), TCUDA_MUL(TCUDA_SQRT(g2), inv),
                             h->eta, h->wd, h->eps);
    *trust = t;
    teng_sgd_args a = {TCUDA_MUL((float)TCUDA_DMUL(lr, (double)t), inv), mom,
                       TCUDA_MUL(h->wd, s)};
    return a;
}

/* The dynamic loss-scale transition (topt_loss_scale.h): an overflow
 * (finite 0) backs the scale off to no less than min_scale, restarts the
 * clean count and counts the overflow; returns 0 (skip the step). A clean
 * step counts; the interval-th in a row grows the scale to no more than
 * max_scale and restarts the count; returns 1 (apply). Static and off are
 * the same machine with min_scale == max_scale. */
static inline TCUDA_OHD int tcuda_ls_next(double *scale, long *clean,
                                          long *overflows, double min_scale,
                                          double max_scale, double growth,
                                          double backoff, long interval,
                                          int finite)
{
    if (!finite) {
        double b = TCUDA_DMUL(*scale, backoff);
        *scale = b < min_scale ? min_scale : b;
        *clean = 0;
        ++*overflows;
        return 0;
    }
    if (++*clean >= interval) {
        double g = TCUDA_DMUL(*scale, growth);
        *scale = g > max_scale ? max_scale : g;
        *clean = 0;
    }
    return 1;
}

/* The loss-scale machine's config and the step decisions' state, as the
 * device keeps them (one struct in device memory, mirrored to pinned host
 * memory for the host to read when it wants a host value): the engine's
 * teng_dstep_config and teng_dstep_state. */
typedef teng_dstep_config tcuda_ls_config;
typedef teng_dstep_state tcuda_ls_state;

/* The momentum of a step at lr (topt_sgd_momentum): with the correction,
 * scaled by lr / the last applied step's lr (remark 2). */
static inline TCUDA_OHD double tcuda_momentum(double base, int correction,
                                              double lr, double prev_lr)
{
    if (correction && prev_lr > 0)
        return TCUDA_DMUL(base, TCUDA_DDIV(lr, prev_lr));
    return base;
}

/* One step's decision from its inf/nan count: the transition above, plus
 * the skip run as torus-train's eager _step_update keeps it (a clean step
 * ends it; a skip that backs a dynamic scale off above its minimum leaves
 * it; any other skip lengthens it), and, for an applied step, its lr (for
 * the next momentum correction) and its loss (loss, added to the window,
 * as the host adds teng_net_loss of applied steps). Returns 1 when the
 * update applies. */
static inline TCUDA_OHD int tcuda_ls_decide(tcuda_ls_state *s,
                                            const tcuda_ls_config *c,
                                            unsigned long long bad, double lr,
                                            double loss)
{
    int finite = bad == 0;
    int backs_off = c->dynamic && s->scale > c->min_scale;
    s->used = s->scale;
    s->bad = bad;
    s->decided++;
    int apply =
        tcuda_ls_next(&s->scale, &s->clean, &s->overflows, c->min_scale,
                      c->max_scale, c->growth, c->backoff, c->interval, finite);
    if (apply) {
        s->skipped = 0;
        s->prev_lr = lr;
        s->loss_sum += loss;
        s->applied++;
    } else if (!backs_off && ++s->skipped > s->worst) {
        s->worst = s->skipped;
    }
    return apply;
}

/* A step's loss from its per-row losses, as teng_net_loss forms it: the
 * sum in row order, over the batch. */
static inline TCUDA_OHD double tcuda_step_loss(const double *rows, int n,
                                               int batch)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum = sum + rows[i];
    return TCUDA_DDIV(sum, (double)batch);
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
        tcuda_sgd_elem(&wi, &vi, p->grad[i], a->lr, a->momentum, a->wd);
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
tcuda_step_thread(const tcuda_dparam *p, char *vel, const tcuda_hyper *h,
                  float w2, float g2, double lr, float mom, double scale,
                  unsigned long long bad, uint64_t begin, uint64_t end,
                  unsigned t, unsigned nt)
{
    if (bad)
        return;
    float trust;
    teng_sgd_args a = tcuda_sgd_hyper(h, h->lars ? w2 : 0.f, h->lars ? g2 : 0.f,
                                      lr, mom, scale, &trust);
    tcuda_sgd_thread(p, vel, &a, begin, end, t, nt);
}

/* Thread t's count of inf/nan in param p's gradient slice (an exponent of
 * all ones is inf or NaN, whatever the mantissa). */
static inline TCUDA_OHD unsigned tcuda_nonfinite_thread(const tcuda_dparam *p,
                                                        uint64_t begin,
                                                        uint64_t end,
                                                        unsigned t, unsigned nt)
{
    unsigned n = 0;
    for (uint64_t i = begin + t; i < end; i += nt)
        n += (tcuda_f32_bits(p->grad[i]) & 0x7f800000u) == 0x7f800000u;
    return n;
}

#endif
