/* trainer/engine/step_math.h: the optimizer's per-step rules as static
 * inline functions that compile as plain C and as CUDA device code: the
 * LARS trust ratio, one tensor's update arguments from its norms (with
 * the loss scale folded in), momentum correction, the dynamic loss-scale
 * transition and a step's skip decision, and the update itself (one
 * element, a span, the sum of squares). The optimizer (trainer/optim)
 * calls them on the host, the CPU backend in its update, and the cuda
 * backend's kernels on the device, so there is one copy of each rule;
 * they live in the engine, the layer all include, because the optimizer
 * must not include a backend, and inline, so a backend's update calls
 * nothing back in the engine.
 *
 * Contract: only integer and correctly rounded fp32/fp64 operations
 * (TENG_RN_*: __fmul_rn and friends on the device, which nvcc never fuses
 * into an FMA), so host and device agree bit for bit; each function's
 * comment names the host code it equals (tests/unit/test_loss_scale.c,
 * test_cuda_optim.c check them). Includes only the engine's headers. */
#ifndef TORUS_TRAINER_ENGINE_STEP_MATH_H
#define TORUS_TRAINER_ENGINE_STEP_MATH_H

#include "trainer/engine/elem_math.h"
#include "trainer/engine/teng.h"

/* Correctly rounded, never-fused fp32 operations (and the fp64 product
 * of the LR and the trust ratio, also never fused). */
#ifdef __CUDA_ARCH__
#define TENG_RN_MUL(a, b)  __fmul_rn((a), (b))
#define TENG_RN_ADD(a, b)  __fadd_rn((a), (b))
#define TENG_RN_SUB(a, b)  __fsub_rn((a), (b))
#define TENG_RN_DIV(a, b)  __fdiv_rn((a), (b))
#define TENG_RN_SQRT(a)    __fsqrt_rn(a)
#define TENG_RN_DMUL(a, b) __dmul_rn((a), (b))
#define TENG_RN_DDIV(a, b) __ddiv_rn((a), (b))
#else
#define TENG_RN_MUL(a, b)  ((a) * (b))
#define TENG_RN_ADD(a, b)  ((a) + (b))
#define TENG_RN_SUB(a, b)  ((a) - (b))
#define TENG_RN_DIV(a, b)  ((a) / (b))
#define TENG_RN_SQRT(a)    sqrtf(a)
#define TENG_RN_DMUL(a, b) ((a) * (b))
#define TENG_RN_DDIV(a, b) ((a) / (b))
#endif

/* eta * |w| / (|g| + wd * |w| + eps); 1 when a norm is 0 (or NaN). */
TENG_HD float teng_lars_trust(float wnorm, float gnorm, float eta, float wd,
                              float eps)
{
    if (!(wnorm > 0.f) || !(gnorm > 0.f))
        return 1.f;
    return TENG_RN_DIV(
        TENG_RN_MUL(eta, wnorm),
        TENG_RN_ADD(TENG_RN_ADD(gnorm, TENG_RN_MUL(wd, wnorm)), eps));
}

/* The update arguments of one tensor (sgd.c's rule): w2, g2 are the sums
 * of squares of its weights and of its gradients, which are `scale` times
 * the true ones (loss scaling); the 1/scale is folded into the arguments:
 * v = m v + (lr/S) (S g + (wd S) w) is m v + lr (g + wd w), exact for a
 * power-of-two S. LARS sees |g| = sqrt(|S g|^2) / S. *trust: the ratio. */
TENG_HD teng_sgd_args teng_sgd_hyper(const teng_tensor_hyper *h, float w2,
                                     float g2, double lr, float mom,
                                     double scale, float *trust)
{
    float inv = (float)TENG_RN_DDIV(1.0, scale), s = (float)scale, t = 1.f;
    if (h->lars)
        t = teng_lars_trust(TENG_RN_SQRT(w2),
                            TENG_RN_MUL(TENG_RN_SQRT(g2), inv), h->eta, h->wd,
                            h->eps);
    *trust = t;
    teng_sgd_args a = {TENG_RN_MUL((float)TENG_RN_DMUL(lr, (double)t), inv),
                       mom, TENG_RN_MUL(h->wd, s)};
    return a;
}

/* One element of momentum SGD with weight decay added to the gradient
 * (remark 1): v = m v + lr (g + wd w); w = w - v, every product and sum
 * rounded to fp32 on its own. The cuda backend's kernels run it per
 * element, the CPU backends through teng_sgd_span. */
TENG_HD void teng_sgd_elem(float *w, float *v, float g, float lr, float m,
                           float wd)
{
    float vi = TENG_RN_ADD(TENG_RN_MUL(m, *v),
                           TENG_RN_MUL(lr, TENG_RN_ADD(g, TENG_RN_MUL(wd, *w))));
    *v = vi;
    *w = TENG_RN_SUB(*w, vi);
}

/* teng_sgd_elem over n elements of host memory (w, v updated in place).
 * Host only (not TENG_HD): the device runs teng_sgd_elem per thread. */
static inline void teng_sgd_span(float *w, const float *g, float *v, size_t n,
                           float lr, float m, float wd)
{
    for (size_t i = 0; i < n; i++)
        teng_sgd_elem(&w[i], &v[i], g[i], lr, m, wd);
}

/* The sum of squares of n elements of host memory, accumulated in fp32
 * over 16 interleaved partial sums (vectorisable; bounds the rounding
 * error's growth on long vectors), folded pairwise: the LARS norms of the
 * CPU backend. Host only (not TENG_HD), and outside the TENG_RN_* rule:
 * its plain * and + may be contracted or vectorised, and no device code
 * has to match it bit for bit. */
static inline float teng_sumsq(const float *x, size_t n)
{
    float part[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++)
            part[j] += x[i + j] * x[i + j];
    for (; i < n; i++)
        part[i % 16] += x[i] * x[i];
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++)
            part[j] += part[j + w];
    return part[0];
}

/* The dynamic loss-scale transition (topt_loss_scale.h): an overflow
 * (finite 0) backs the scale off to no less than min_scale, restarts the
 * clean count and counts the overflow; returns 0 (skip the step). A clean
 * step counts; the interval-th in a row grows the scale to no more than
 * max_scale and restarts the count; returns 1 (apply). Static and off are
 * the same machine with min_scale == max_scale. */
TENG_HD int teng_ls_next(double *scale, long *clean, long *overflows,
                         double min_scale, double max_scale, double growth,
                         double backoff, long interval, int finite)
{
    if (!finite) {
        double b = TENG_RN_DMUL(*scale, backoff);
        *scale = b < min_scale ? min_scale : b;
        *clean = 0;
        ++*overflows;
        return 0;
    }
    if (++*clean >= interval) {
        double g = TENG_RN_DMUL(*scale, growth);
        *scale = g > max_scale ? max_scale : g;
        *clean = 0;
    }
    return 1;
}

/* The momentum of a step at lr (topt_sgd_momentum): with the correction,
 * scaled by lr / the last applied step's lr (remark 2). */
TENG_HD double teng_momentum(double base, int correction, double lr,
                             double prev_lr)
{
    if (correction && prev_lr > 0)
        return TENG_RN_DMUL(base, TENG_RN_DDIV(lr, prev_lr));
    return base;
}

/* One step's decision from its inf/nan count: the transition above, plus
 * the skip run as torus-train's eager _step_update keeps it (a clean step
 * ends it; a skip that backs a dynamic scale off above its minimum leaves
 * it; any other skip lengthens it), and, for an applied step, its lr (for
 * the next momentum correction) and its loss (loss, added to the window,
 * as the host adds teng_net_loss of applied steps). Returns 1 when the
 * update applies. */
TENG_HD int teng_ls_decide(teng_dstep_state *s, const teng_dstep_config *c,
                           unsigned long long bad, double lr, double loss)
{
    int finite = bad == 0;
    int backs_off = c->dynamic && s->scale > c->min_scale;
    s->used = s->scale;
    s->bad = bad;
    s->decided++;
    int apply =
        teng_ls_next(&s->scale, &s->clean, &s->overflows, c->min_scale,
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
TENG_HD double teng_step_loss(const double *rows, int n, int batch)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum = sum + rows[i];
    return TENG_RN_DDIV(sum, (double)batch);
}

#endif
