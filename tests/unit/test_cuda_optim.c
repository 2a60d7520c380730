/* test_cuda_optim.c: the host-testable parts of the cuda optimizer
 * kernels, on the CPU:
 * - the multi-tensor chunk plan (trainer/backends/cuda/chunk_plan.c):
 *   every element of every param in exactly one chunk, chunk bounds, the
 *   per-param chunk ranges, and refused plans;
 * - the kernels' per-thread loops (optim_math.h) run for every (chunk,
 *   thread) of a plan over an arena with padding, as the GPU grid runs
 *   them: the update equals teng_sgd_span per param bit for bit, working
 *   copies are the rounded masters, nothing outside the params changes,
 *   and the sums of squares (per-thread, block tree, per-param fold) are
 *   within their rounding bound of a double sum;
 * - the device step's loops over a plan: the sums of squares
 *   of masters and gradients in one pass equal the two passes'; the
 *   arguments each tensor forms itself (teng_sgd_hyper: LARS trust,
 *   1/scale folded in) and the update equal the eager host step bit for
 *   bit; a step with a non-zero inf/nan count changes nothing; the
 *   inf/nan count counts every inf and NaN of the params, not padding;
 * - the per-element maths the kernels run (optim_math.h), bit for bit:
 *   teng_sgd_elem (trainer/engine/step_math.h, the dnnl backend's too,
 *   through teng_sgd_span) against each operation rounded to fp32 on its
 *   own in the documented order,
 *   teng_lars_trust against topt_lars_trust (trainer/optim/sgd.c), and
 *   the fp16/bf16 rounding against a reference built another way (round
 *   the value in double with nearbyint at the format's quantum), over
 *   every sign and exponent with the mantissas around each rounding tie,
 *   the fp16 subnormals in full, and millions of random patterns. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/backends/cuda/chunk_plan.h"
#include "trainer/backends/cuda/optim_math.h"
#include "trainer/engine/teng.h"
#include "trainer/optim/topt.h"

static float _f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t _xs(uint64_t *s) /* xorshift64*, upper half */
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (uint32_t)((*s * 0x2545F4914F6CDD1DULL) >> 32);
}

/* ------------------------------------------------------------ the plan */

START_TEST(plan_covers_every_element_once)
{
    /* Empty, tiny, exact multiples, one past, and a ResNet-50 fc. */
    const size_t counts[] = {64, 0, 1, 16384, 16385, 32768, 2048000, 0, 3};
    int np = sizeof counts / sizeof counts[0];
    tcuda_plan p;
    ck_assert_int_eq(tcuda_plan_build(counts, np, TCUDA_PLAN_CHUNK, &p), 0);
    ck_assert_int_eq(p.np, np);
    ck_assert_uint_eq(p.nchunks, 1 + 0 + 1 + 1 + 2 + 2 + 125 + 0 + 1);
    ck_assert_uint_eq(p.first[np], p.nchunks);
    for (int i = 0; i < np; i++) {
        size_t next = 0; /* chunks of a param tile it in order */
        ck_assert_uint_le(p.first[i], p.first[i + 1]);
        for (uint32_t c = p.first[i]; c < p.first[i + 1]; c++) {
            const tcuda_chunk *k = &p.chunks[c];
            ck_assert_uint_eq(k->param, (uint32_t)i);
            ck_assert_uint_eq(k->begin, next);
            ck_assert_uint_gt(k->end, k->begin);
            ck_assert_uint_le(k->end - k->begin, TCUDA_PLAN_CHUNK);
            next = k->end;
        }
        ck_assert_uint_eq(next, counts[i]);
    }
    tcuda_plan_free(&p);
    ck_assert_ptr_null(p.chunks);
}
END_TEST

START_TEST(plan_refuses)
{
    tcuda_plan p;
    const size_t counts[] = {10, SIZE_MAX};
    ck_assert_int_eq(tcuda_plan_build(counts, -1, 16, &p), TENG_EINVAL);
    ck_assert_int_eq(tcuda_plan_build(counts, 1, 0, &p), TENG_EINVAL);
    ck_assert_int_eq(tcuda_plan_build(NULL, 1, 16, &p), TENG_EINVAL);
    /* SIZE_MAX elements in 1-element chunks overflow the grid. */
    ck_assert_int_eq(tcuda_plan_build(counts, 2, 1, &p), TENG_EINVAL);
    ck_assert_msg(strstr(torus_error_msg(), "param 1"), "%s",
                  torus_error_msg());
    /* A chunk as big as the address space: one chunk, no wrap. */
    ck_assert_int_eq(tcuda_plan_build(counts, 2, SIZE_MAX, &p), 0);
    ck_assert_uint_eq(p.nchunks, 2);
    ck_assert_uint_eq(p.chunks[1].end, SIZE_MAX);
    tcuda_plan_free(&p);
    ck_assert_int_eq(tcuda_plan_build(NULL, 0, 16, &p), 0);
    ck_assert_uint_eq(p.nchunks, 0);
    tcuda_plan_free(&p);
}
END_TEST

/* ------------------------------------- the kernels' loops on the CPU */

enum { NT = 256 }; /* threads per block, as cuda_optim.cu launches */
static const size_t _counts[] = {5000, 0, 16384, 40000, 3, 70001, 16385};
#define NP ((int)(sizeof _counts / sizeof _counts[0]))

typedef struct {
    size_t off[NP], total; /* float offsets, 64-float aligned, padded */
    tcuda_dparam p[NP];
    float *w, *g, *v;
    uint16_t *h; /* working copies: the same offsets in halves */
} _arena;

static void _arena_make(_arena *a, uint64_t seed)
{
    a->total = 0;
    for (int i = 0; i < NP; i++) {
        a->off[i] = a->total;
        a->total += (_counts[i] + 63) / 64 * 64 + 64; /* padding after */
    }
    a->w = malloc(a->total * 4), a->g = malloc(a->total * 4);
    a->v = malloc(a->total * 4), a->h = malloc(a->total * 2);
    ck_assert(a->w && a->g && a->v && a->h);
    for (size_t k = 0; k < a->total; k++) {
        a->w[k] = (float)(_xs(&seed) >> 8) / 8388608.f - 1.f;
        a->g[k] = ((float)(_xs(&seed) >> 8) / 8388608.f - 1.f) * 1e-3f;
        a->v[k] = ((float)(_xs(&seed) >> 8) / 8388608.f - 1.f) * 1e-2f;
        a->h[k] = 0xabcd;
    }
    for (int i = 0; i < NP; i++) {
        int dt = i % 3 == 0 ? TENG_F16 : i % 3 == 1 ? TENG_BF16 : TENG_F32;
        float *m = a->w + a->off[i];
        a->p[i] = (tcuda_dparam){
            m, dt == TENG_F32 ? (void *)m : (void *)(a->h + a->off[i]),
            a->g + a->off[i], a->off[i] * sizeof(float), dt};
    }
}

static void _arena_free(_arena *a)
{
    free(a->w), free(a->g), free(a->v), free(a->h);
}

/* Working copies are the rounded masters; the rest keeps 0xabcd. */
static void _check_work(const _arena *a)
{
    for (int i = 0; i < NP; i++)
        for (size_t k = 0; k < _counts[i] && a->p[i].dtype != TENG_F32; k++) {
            float w = a->w[a->off[i] + k];
            uint16_t want = a->p[i].dtype == TENG_F16 ? tcuda_f16_rne(w)
                                                      : tcuda_bf16_rne(w);
            ck_assert_uint_eq(a->h[a->off[i] + k], want);
        }
    size_t untouched = 0;
    for (size_t k = 0; k < a->total; k++)
        untouched += a->h[k] == 0xabcd;
    size_t written = 0;
    for (int i = 0; i < NP; i++)
        written += a->p[i].dtype == TENG_F32 ? 0 : _counts[i];
    ck_assert_uint_eq(untouched, a->total - written);
}

/* An arena and the plan over it; with host, an equal second one (the
 * kernels' and the host's). */
static void _pair_make(_arena *gpu, _arena *host, uint64_t seed,
                       tcuda_plan *plan)
{
    _arena_make(gpu, seed);
    if (host)
        _arena_make(host, seed);
    ck_assert_int_eq(tcuda_plan_build(_counts, NP, TCUDA_PLAN_CHUNK, plan), 0);
}

START_TEST(kernel_loops_over_a_plan_are_host_sgd)
{
    _arena gpu, host;
    tcuda_plan plan;
    _pair_make(&gpu, &host, 11, &plan);
    teng_sgd_args args[NP];
    for (int i = 0; i < NP; i++)
        args[i] =
            (teng_sgd_args){0.1f * (float)(i + 1), 0.9f, i % 2 ? 0.f : 5e-5f};
    for (int step = 0; step < 2; step++) {
        /* Blocks in reverse, threads in order: no chunk relies on another. */
        for (uint32_t c = plan.nchunks; c-- > 0;) {
            const tcuda_chunk *k = &plan.chunks[c];
            for (unsigned t = 0; t < NT; t++)
                tcuda_sgd_thread(&gpu.p[k->param], (char *)gpu.v,
                                 &args[k->param], k->begin, k->end, t, NT);
        }
        for (int i = 0; i < NP; i++)
            teng_sgd_span(host.w + host.off[i], host.g + host.off[i],
                          host.v + host.off[i], _counts[i], args[i].lr,
                          args[i].momentum, args[i].wd);
    }
    ck_assert(!memcmp(gpu.w, host.w, host.total * 4));
    ck_assert(!memcmp(gpu.v, host.v, host.total * 4));
    _check_work(&gpu);
    /* Refresh after the masters change behind the kernels' back. */
    for (size_t k = 0; k < gpu.total; k++)
        gpu.w[k] *= -3.f;
    for (uint32_t c = 0; c < plan.nchunks; c++)
        for (unsigned t = 0; t < NT; t++)
            tcuda_refresh_thread(&gpu.p[plan.chunks[c].param],
                                 plan.chunks[c].begin, plan.chunks[c].end, t,
                                 NT);
    _check_work(&gpu);
    tcuda_plan_free(&plan);
    _arena_free(&gpu);
    _arena_free(&host);
}
END_TEST

START_TEST(kernel_sumsq_over_a_plan_within_rounding)
{
    _arena a;
    tcuda_plan plan;
    _pair_make(&a, NULL, 5, &plan);
    float *part = malloc((plan.nchunks + 1) * sizeof *part), red[NT];
    for (uint32_t c = 0; c < plan.nchunks; c++) { /* _k_sumsq */
        const tcuda_chunk *k = &plan.chunks[c];
        for (unsigned t = 0; t < NT; t++)
            red[t] = tcuda_sumsq_thread(&a.p[k->param], (const char *)a.g,
                                        k->begin, k->end, t, NT);
        for (int w = NT / 2; w > 0; w /= 2)
            for (int t = 0; t < w; t++)
                red[t] += red[t + w];
        part[c] = red[0];
    }
    for (int i = 0; i < NP; i++) { /* _k_sumsq_param, lanes in turn */
        float lane[32] = {0};
        for (uint32_t c = plan.first[i]; c < plan.first[i + 1]; c++)
            lane[(c - plan.first[i]) % 32] += part[c];
        for (int off = 16; off > 0; off /= 2)
            for (int l = 0; l < off; l++)
                lane[l] += lane[l + off];
        double exact = 0;
        for (size_t k = 0; k < _counts[i]; k++)
            exact += (double)a.g[a.off[i] + k] * a.g[a.off[i] + k];
        double depth = 2 * (TCUDA_PLAN_CHUNK / NT) + 8 + 1 + 5;
        ck_assert_msg(fabs(lane[0] - exact) <= depth * 0x1p-24 * exact,
                      "param %d: %a vs %a", i, lane[0], exact);
        ck_assert_msg(
            fabs(lane[0] - teng_sumsq(a.g + a.off[i], _counts[i])) <=
                (depth + _counts[i] / 16 + 6) * 0x1p-24 * exact,
            "param %d vs teng_sumsq", i);
    }
    free(part);
    tcuda_plan_free(&plan);
    _arena_free(&a);
}
END_TEST

/* ------------------------------------------------------- the update */

/* ------------------------------------------------- the device step */

/* sgd.c's host rule before it called teng_sgd_hyper, written out again:
 * the device's arguments must be these, bit for bit. */
static teng_sgd_args _hyper_ref(const teng_tensor_hyper *h, float w2, float g2,
                                double lr, double mom, double scale,
                                float *trust)
{
    float inv = (float)(1.0 / scale), s = (float)scale, t = 1.f;
    if (h->lars)
        t = topt_lars_trust(sqrtf(w2), sqrtf(g2) * inv, h->eta, h->wd, h->eps);
    *trust = t;
    return (teng_sgd_args){(float)(lr * t) * inv, (float)mom, h->wd * s};
}

START_TEST(sgd_hyper_is_the_host_rule_bit_for_bit)
{
    uint64_t seed = 99;
    for (int k = 0; k < 200000; k++) {
        teng_tensor_hyper h = {(k & 1) ? 5e-5f : 0.f, (k >> 1) & 1, 0.001f,
                               1e-9f};
        /* norms over many decades, zeros and a NaN now and then */
        float w2 = _f((_xs(&seed) % 0x7f800000u)) * (k % 97 == 0 ? 0.f : 1.f);
        float g2 = _f((_xs(&seed) % 0x7f800000u));
        if (k % 101 == 0)
            g2 = NAN;
        double lr = (double)(_xs(&seed) % 100000) / 9973.0;
        double mom = 0.9 * (1.0 + (double)(_xs(&seed) % 100) / 1000.0);
        double scale = k % 3 ? ldexp(1.0, (int)(_xs(&seed) % 25))
                             : 1.0 + (double)(_xs(&seed) % 1000);
        float t1, t2;
        teng_sgd_args a =
            teng_sgd_hyper(&h, w2, g2, lr, (float)mom, scale, &t1);
        teng_sgd_args b = _hyper_ref(&h, w2, g2, lr, mom, scale, &t2);
        ck_assert_int_eq(memcmp(&t1, &t2, sizeof t1), 0);
        ck_assert_int_eq(memcmp(&a, &b, sizeof a), 0);
    }
}
END_TEST

/* The device step's loops (tcuda_sumsq2_thread, tcuda_step_thread) over a
 * plan equal the eager host step: norms as tcuda_sumsq_thread forms them,
 * arguments as sgd.c forms them, teng_sgd_span; a step with a non-zero
 * inf/nan count changes nothing at all. */
static void _norms2(const _arena *a, const tcuda_plan *plan, float *w2,
                    float *g2, int two)
{
    memset(w2, 0, NP * sizeof *w2), memset(g2, 0, NP * sizeof *g2);
    for (uint32_t c = 0; c < plan->nchunks; c++)
        for (unsigned t = 0; t < NT; t++) {
            const tcuda_chunk *k = &plan->chunks[c];
            const tcuda_dparam *p = &a->p[k->param];
            float sw, sg;
            if (two) {
                tcuda_sumsq2_thread(p, k->begin, k->end, t, NT, &sw, &sg);
            } else {
                sw = tcuda_sumsq_thread(p, (const char *)a->w, k->begin, k->end,
                                        t, NT);
                sg = tcuda_sumsq_thread(p, (const char *)a->g, k->begin, k->end,
                                        t, NT);
            }
            w2[k->param] += sw, g2[k->param] += sg;
        }
}

START_TEST(device_step_over_a_plan_is_host_step)
{
    _arena gpu, host;
    tcuda_plan plan;
    _pair_make(&gpu, &host, 21, &plan);
    teng_tensor_hyper h[NP];
    for (int i = 0; i < NP; i++) /* LARS, plain with and without decay */
        h[i] = (teng_tensor_hyper){i % 3 == 2 ? 0.f : 1e-4f, i % 3 == 0, 0.001f,
                                   1e-9f};
    const unsigned long long bad[] = {0, 7, 0, 1};
    const double scale = 1024.0;
    float w2[NP], g2[NP], w2b[NP], g2b[NP], t;
    for (int step = 0; step < 4; step++) {
        double lr = 0.1 * (step + 1), mom = 0.9;
        _norms2(&gpu, &plan, w2, g2, 1);
        _norms2(&host, &plan, w2b, g2b, 0);
        ck_assert(!memcmp(w2, w2b, sizeof w2) && !memcmp(g2, g2b, sizeof g2));
        float *w0 = malloc(gpu.total * 4), *v0 = malloc(gpu.total * 4);
        ck_assert(w0 && v0);
        memcpy(w0, gpu.w, gpu.total * 4), memcpy(v0, gpu.v, gpu.total * 4);
        for (uint32_t c = plan.nchunks; c-- > 0;) {
            const tcuda_chunk *k = &plan.chunks[c];
            for (unsigned th = 0; th < NT; th++)
                tcuda_step_thread(&gpu.p[k->param], (char *)gpu.v, &h[k->param],
                                  w2[k->param], g2[k->param], lr, (float)mom,
                                  scale, bad[step], k->begin, k->end, th, NT);
        }
        if (bad[step]) { /* skipped: nothing moved */
            ck_assert(!memcmp(w0, gpu.w, gpu.total * 4));
            ck_assert(!memcmp(v0, gpu.v, gpu.total * 4));
        } else {
            for (int i = 0; i < NP; i++) {
                teng_sgd_args a =
                    _hyper_ref(&h[i], w2b[i], g2b[i], lr, mom, scale, &t);
                teng_sgd_span(host.w + host.off[i], host.g + host.off[i],
                              host.v + host.off[i], _counts[i], a.lr,
                              a.momentum, a.wd);
            }
        }
        free(w0), free(v0);
        ck_assert(!memcmp(gpu.w, host.w, host.total * 4));
        ck_assert(!memcmp(gpu.v, host.v, host.total * 4));
    }
    _check_work(&gpu);
    tcuda_plan_free(&plan);
    _arena_free(&gpu);
    _arena_free(&host);
}
END_TEST

/* The decision kernel's loss (teng_step_loss) is teng_net_loss's rule:
 * the per-row losses summed in row order from 0, over the batch; the
 * momentum (teng_momentum) is sgd.c's remark-2 rule, m * (lr / prev). */
START_TEST(step_loss_and_momentum_are_the_host_rules)
{
    uint64_t seed = 3;
    double rows[256];
    for (int k = 0; k < 2000; k++) {
        int n = 1 + (int)(_xs(&seed) % 256), batch = n + (int)(k % 3);
        double sum = 0.0;
        for (int i = 0; i < n; i++) {
            rows[i] = (double)_xs(&seed) / 4294967296.0 * 9.0;
            sum += rows[i];
        }
        double want = sum / batch, got = teng_step_loss(rows, n, batch);
        ck_assert_int_eq(memcmp(&want, &got, sizeof got), 0);
        double lr = (double)(_xs(&seed) % 100000) / 7919.0,
               prev = k % 5 ? (double)(_xs(&seed) % 100000) / 7907.0 : 0.0;
        double m = 0.9 * (lr / prev), mm = teng_momentum(0.9, 1, lr, prev);
        if (!(prev > 0))
            m = 0.9;
        ck_assert_int_eq(memcmp(&m, &mm, sizeof m), 0);
        mm = teng_momentum(0.9, 0, lr, prev); /* no correction */
        ck_assert_double_eq(mm, 0.9);
    }
}
END_TEST

START_TEST(nonfinite_count_over_a_plan)
{
    _arena a;
    tcuda_plan plan;
    _pair_make(&a, NULL, 3, &plan);
    /* inf, -inf, NaNs (quiet, signalling, negative) and, not counted, the
     * largest finite value and the padding after a param. */
    const uint32_t bad[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                            0xffffffffu};
    int planted = 0;
    for (int i = 0; i < NP; i++)
        for (size_t k = 0; k < _counts[i]; k += 997)
            a.g[a.off[i] + k] = _f(bad[planted++ % 5]);
    a.g[a.off[3] + 1] = 3.4028235e38f;
    a.g[a.off[0] + _counts[0]] = INFINITY; /* padding: no param's element */
    unsigned long long n = 0;
    for (uint32_t c = 0; c < plan.nchunks; c++)
        for (unsigned t = 0; t < NT; t++)
            n += tcuda_nonfinite_thread(&a.p[plan.chunks[c].param],
                                        plan.chunks[c].begin,
                                        plan.chunks[c].end, t, NT);
    ck_assert_uint_eq(n, (unsigned long long)planted);
    tcuda_plan_free(&plan);
    _arena_free(&a);
}
END_TEST

/* v = m v + lr (g + wd w); w = w - v with every product and sum stored
 * to an fp32 (volatile: never kept wider, never fused): the order the
 * update's contract names, written out apart from step_math.h. */
static void _sgd_ref(float *w, float *v, float g, float lr, float m, float wd)
{
    volatile float a = wd * *w, b = g + a, c = lr * b, d = m * *v;
    volatile float vi = d + c, wi = *w - vi;
    *v = vi;
    *w = wi;
}

START_TEST(sgd_elem_is_host_sgd_bit_for_bit)
{
    enum { N = 1 << 16 };
    static float w[N], g[N], v[N], w2[N], v2[N];
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    const float hyper[][3] = {{0.1f, 0.9f, 1e-4f},
                              {3.7e-3f, 0.875f, 0.f},
                              {1e-30f, 0.99f, 5e-5f},
                              {12.5f, 0.f, 0.5f}};
    for (size_t h = 0; h < sizeof hyper / sizeof hyper[0]; h++) {
        for (int i = 0; i < N; i++) {
            /* Random fp32 of every magnitude, with some special values. */
            w[i] = _f((_xs(&s) & 0x8fffffffu) | 0x30000000u);
            g[i] = _f((_xs(&s) & 0x8fffffffu) | 0x2c000000u);
            v[i] = (i % 97 == 0) ? 0.f : _f(_xs(&s) & 0xbfffffffu);
        }
        g[0] = INFINITY, g[1] = NAN, w[2] = -0.f, v[3] = 1e-40f;
        memcpy(w2, w, sizeof w);
        memcpy(v2, v, sizeof v);
        teng_sgd_span(w, g, v, N, hyper[h][0], hyper[h][1], hyper[h][2]);
        for (int i = 0; i < N; i++)
            _sgd_ref(&w2[i], &v2[i], g[i], hyper[h][0], hyper[h][1],
                     hyper[h][2]);
        ck_assert(!memcmp(w, w2, sizeof w));
        ck_assert(!memcmp(v, v2, sizeof v));
    }
}
END_TEST

START_TEST(lars_trust_is_host_bit_for_bit)
{
    uint64_t s = 42;
    for (int i = 0; i < 200000; i++) {
        float wn = _f(_xs(&s) & 0x4fffffffu), gn = _f(_xs(&s) & 0x4fffffffu);
        if (i % 50 == 0)
            wn = 0.f;
        if (i % 70 == 0)
            gn = NAN;
        float a = topt_lars_trust(wn, gn, 1e-3f, 5e-5f, 1e-9f);
        float b = teng_lars_trust(wn, gn, 1e-3f, 5e-5f, 1e-9f);
        ck_assert_msg(!memcmp(&a, &b, sizeof a), "%a %a: %a vs %a", wn, gn, a,
                      b);
    }
}
END_TEST

/* ------------------------------------------------------ the rounding */

/* The format: mantissa bits, lowest normal exponent, largest finite. */
typedef struct {
    int mbits, emin;
    double max;
    uint16_t (*round)(float);
} _fmt;

static uint16_t _r16(float f)
{
    return tcuda_f16_rne(f);
}
static uint16_t _rb16(float f)
{
    return tcuda_bf16_rne(f);
}
static const _fmt _F16 = {10, -14, 65504.0, _r16};
static const _fmt _BF16 = {7, -126, 0x1.fep127, _rb16};

static double _decode(const _fmt *t, uint16_t h, int *nan)
{
    int ebits = 15 - t->mbits, bias = (1 << (ebits - 1)) - 1;
    int e = (h >> t->mbits) & ((1 << ebits) - 1);
    int m = h & ((1 << t->mbits) - 1);
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    *nan = e == (1 << ebits) - 1 && m != 0;
    if (e == (1 << ebits) - 1)
        return sign * INFINITY;
    if (e == 0)
        return sign * ldexp(m, 1 - bias - t->mbits);
    return sign * ldexp(m + (1 << t->mbits), e - bias - t->mbits);
}

/* Round x to the format in double: nearbyint (ties to even in the default
 * mode) at the quantum of x's binade, clamped to the subnormal quantum. */
static double _reference(const _fmt *t, float x)
{
    if (x == 0.f || isinf(x))
        return x;
    int e = ilogb(x);
    int q = (e < t->emin ? t->emin : e) - t->mbits;
    double r = ldexp(nearbyint(ldexp((double)x, -q)), q);
    return fabs(r) > t->max ? copysign(INFINITY, x) : r;
}

/* 1 when the format's rounding of bit pattern u matches the reference. */
static int _check(const _fmt *t, uint32_t u)
{
    float x = _f(u);
    uint16_t h = t->round(x);
    int nan;
    double got = _decode(t, h, &nan);
    if (isnan(x))
        return nan && (h >> 15) == (u >> 31) && (h & (1u << (t->mbits - 1)));
    double want = _reference(t, x);
    return !nan && got == want && (h >> 15) == (u >> 31);
}

/* Every sign and exponent; the mantissa's bits around each possible
 * rounding position (ties, one either side, all ones) with random bits
 * above; the fp16 subnormal binades in full; random patterns. */
static void _sweep(const _fmt *t, int full_lo, int full_hi)
{
    uint64_t s = 7;
    long bad = 0;
    uint32_t first = 0;
    for (uint32_t se = 0; se < 512; se++)
        for (int b = 0; b < 23; b++)
            for (int k = 0; k < 64; k++) {
                uint32_t hi = (_xs(&s) << (b + 1)) & 0x7fffffu;
                uint32_t half = 1u << b;
                uint32_t lo[] = {half, half - 1, half + 1, 0, 2 * half - 1};
                for (int j = 0; j < 5; j++) {
                    uint32_t u = (se << 23) | hi | (lo[j] & (2 * half - 1));
                    if (!_check(t, u) && !bad++)
                        first = u;
                }
            }
    for (int e = full_lo; e <= full_hi; e++)
        for (uint32_t m = 0; m < 0x800000u; m++) {
            uint32_t u = ((uint32_t)e << 23) | m;
            if (!_check(t, u) && !bad++)
                first = u;
        }
    for (int i = 0; i < 4000000; i++) {
        uint32_t u = _xs(&s);
        if (!_check(t, u) && !bad++)
            first = u;
    }
    ck_assert_msg(bad == 0, "%ld patterns wrong, first 0x%08x (%a) -> 0x%04x",
                  bad, first, _f(first), t->round(_f(first)));
}

START_TEST(f16_rounding_matches_reference)
{
    /* Exponents 101..113: every fp32 whose fp16 is subnormal or the
     * smallest normal, where the rounding position moves. */
    _sweep(&_F16, 101, 113);
    /* Hand-picked: the largest finite, the first value that overflows,
     * the smallest subnormal and the tie below it, inf, a NaN, -0. */
    ck_assert_uint_eq(tcuda_f16_rne(65504.f), 0x7bff);
    ck_assert_uint_eq(tcuda_f16_rne(65519.996f), 0x7bff);
    ck_assert_uint_eq(tcuda_f16_rne(65520.f), 0x7c00);
    ck_assert_uint_eq(tcuda_f16_rne(0x1p-24f), 0x0001);
    ck_assert_uint_eq(tcuda_f16_rne(0x1p-25f), 0x0000);
    ck_assert_uint_eq(tcuda_f16_rne(0x1.000002p-25f), 0x0001);
    ck_assert_uint_eq(tcuda_f16_rne(0x1.8p-24f), 0x0002); /* tie up to even */
    ck_assert_uint_eq(tcuda_f16_rne(1.f + 0x1p-11f), 0x3c00); /* tie down */
    ck_assert_uint_eq(tcuda_f16_rne(-INFINITY), 0xfc00);
    ck_assert_uint_eq(tcuda_f16_rne(-0.f), 0x8000);
    ck_assert_uint_eq(tcuda_f16_rne(-NAN) & 0xfe00, 0xfe00);
}
END_TEST

START_TEST(bf16_rounding_matches_reference)
{
    /* Exponents 0..1: the fp32 subnormals and the smallest normals. */
    _sweep(&_BF16, 0, 1);
    ck_assert_uint_eq(tcuda_bf16_rne(1.f + 0x1p-8f), 0x3f80);   /* tie down */
    ck_assert_uint_eq(tcuda_bf16_rne(1.f + 0x3p-8f), 0x3f82);   /* tie up */
    ck_assert_uint_eq(tcuda_bf16_rne(0x1.ffp127f), 0x7f80);     /* to inf */
    ck_assert_uint_eq(tcuda_bf16_rne(_f(0x7f800001u)), 0x7fc0); /* quiet */
}
END_TEST

int main(void)
{
    Suite *su = suite_create("cuda_optim_host");
    TCase *tc = tcase_create("cuda_optim_host");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, plan_covers_every_element_once);
    tcase_add_test(tc, plan_refuses);
    tcase_add_test(tc, kernel_loops_over_a_plan_are_host_sgd);
    tcase_add_test(tc, kernel_sumsq_over_a_plan_within_rounding);
    tcase_add_test(tc, sgd_elem_is_host_sgd_bit_for_bit);
    tcase_add_test(tc, lars_trust_is_host_bit_for_bit);
    tcase_add_test(tc, sgd_hyper_is_the_host_rule_bit_for_bit);
    tcase_add_test(tc, device_step_over_a_plan_is_host_step);
    tcase_add_test(tc, nonfinite_count_over_a_plan);
    tcase_add_test(tc, step_loss_and_momentum_are_the_host_rules);
    tcase_add_test(tc, f16_rounding_matches_reference);
    tcase_add_test(tc, bf16_rounding_matches_reference);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
