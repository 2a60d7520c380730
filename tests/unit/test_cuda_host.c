/* test_cuda_host.c: the cuda backend's host-checkable parts, without a
 * GPU: the convolution algorithm cache (trainer/backends/cuda/cuda_algo.c)
 * and the per-element maths of its kernels (cuda_math.h and the engine's
 * elem_math.h it includes, compiled here as plain C) against the engine's
 * host kernels, which the oneDNN backend runs: the dropout hash and masks,
 * cross-entropy rows with label smoothing, ReLU backward, residual add,
 * gradient sums; and the BN + add + ReLU fusion decision on the models'
 * graphs (cuda_fuse.c), and the engine's plan for the fused chain's
 * backward (bit 3 of bwd_reads) on the oneDNN backend, and the engine's
 * step-graph bookkeeping (step count, misuse, plan id) with stand-in
 * graph ops. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/layer_harness.h"
#include "trainer/backends/cuda/cuda_algo.h"
#include "trainer/backends/cuda/cuda_fuse.h"
#include "trainer/backends/cuda/cuda_layout.h"
#include "trainer/backends/cuda/cuda_math.h"
#include "trainer/backends/cuda/cuda_stem.h"
#include "trainer/backends/cuda/tcuda_fastpath.h"
#include "trainer/backends/cuda/tcuda_plan.h"
#include "trainer/engine/host_kernels.h"
#include "trainer/engine/rng.h"
#include "trainer/models/tmodel.h"

static tcuda_algo_key _key(int dir, int n, int c, int hw, int k, int ks, int s)
{
    tcuda_algo_key key = {dir, n, c, hw,     hw,     k, ks,
                          ks,  s, s, ks / 2, ks / 2, 0, 0};
    return key;
}

START_TEST(algo_cache_keys)
{
    tcuda_algo_cache c = {0};
    tcuda_algo_val v = {0};
    tcuda_algo_key a = _key(TCUDA_FWD, 32, 64, 56, 64, 3, 1);
    ck_assert(!tcuda_algo_get(&c, &a, &v));
    ck_assert_int_eq(tcuda_algo_put(&c, &a, &(tcuda_algo_val){7, 4096, 0}), 0);
    ck_assert(tcuda_algo_get(&c, &a, &v));
    ck_assert_int_eq(v.algo, 7);
    ck_assert_uint_eq(v.workspace, 4096);
    /* Every field is part of the key: change each one alone. */
    for (int f = 0; f < 14; f++) {
        tcuda_algo_key b = a;
        int *fields[] = {&b.dir, &b.n,  &b.c,     &b.h,     &b.w,
                         &b.k,   &b.kh, &b.kw,    &b.sh,    &b.sw,
                         &b.ph,  &b.pw, &b.dtype, &b.layout};
        (*fields[f])++;
        ck_assert_msg(!tcuda_algo_key_equal(&a, &b), "field %d ignored", f);
        ck_assert_msg(!tcuda_algo_get(&c, &b, &v), "field %d hit", f);
    }
    /* A direction is its own entry: same shape, another algorithm. */
    tcuda_algo_key d = a;
    d.dir = TCUDA_BWD_FILTER;
    ck_assert_int_eq(tcuda_algo_put(&c, &d, &(tcuda_algo_val){1, 0, 0}), 0);
    ck_assert(tcuda_algo_get(&c, &a, &v) && v.algo == 7);
    ck_assert(tcuda_algo_get(&c, &d, &v) && v.algo == 1);
    /* Replacing keeps one entry. */
    ck_assert_int_eq(tcuda_algo_put(&c, &a, &(tcuda_algo_val){3, 8, 0}), 0);
    ck_assert_uint_eq(c.n, 2);
    ck_assert(tcuda_algo_get(&c, &a, &v) && v.algo == 3);
    tcuda_algo_free(&c);
}
END_TEST

/* ResNet-50-like numbers of shapes: growth keeps every entry. */
START_TEST(algo_cache_grows)
{
    tcuda_algo_cache c = {0};
    tcuda_algo_val v;
    for (int i = 0; i < 1000; i++) {
        tcuda_algo_key k = _key(i % 3, 1 + i / 3, 64, 7 + i % 5, 128, 1, 1);
        ck_assert_int_eq(tcuda_algo_put(&c, &k, &(tcuda_algo_val){i, 0, 0}), 0);
    }
    ck_assert_uint_eq(c.n, 1000);
    ck_assert(2 * c.n <= c.cap);
    for (int i = 0; i < 1000; i++) {
        tcuda_algo_key k = _key(i % 3, 1 + i / 3, 64, 7 + i % 5, 128, 1, 1);
        ck_assert_msg(tcuda_algo_get(&c, &k, &v) && v.algo == i,
                      "entry %d lost", i);
    }
    ck_assert_uint_eq(c.hits, 1000);
    tcuda_algo_free(&c);
}
END_TEST

START_TEST(dropout_matches_host)
{
    enum { N = 4099 };
    static float x[N], yh[N], yc[N], dyh[N], dyc[N];
    static uint8_t mask[N];
    const float p = 0.3f;
    const uint64_t key = 0x1234abcdULL;
    /* The kernels and the host share teng_hash64 (elem_math.h): check it
     * is splitmix64, whose first outputs from state 0 are published. */
    ck_assert(teng_hash64(0) == 0xe220a8397b1dcdafULL);
    ck_assert(teng_hash64(0x9e3779b97f4a7c15ULL) == 0x6e789e6aa1b965f4ULL);
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 97) * 0.37f - 11.0f;
    teng_host_dropout_fwd(x, yh, mask, N, p, key);
    teng_host_dropout_bwd(x, dyh, mask, N, p);
    uint64_t cut = teng_dropout_cut(p);
    int kept = 0;
    for (int i = 0; i < N; i++) {
        int keep = teng_dropout_keep(key, (size_t)i, cut);
        ck_assert_int_eq(keep, mask[i]);
        kept += keep;
        yc[i] = teng_dropout_elem(x[i], keep, p);
        dyc[i] = teng_dropout_elem(x[i], mask[i], p);
    }
    ck_assert(!memcmp(yh, yc, sizeof(yh)));
    ck_assert(!memcmp(dyh, dyc, sizeof(dyh)));
    ck_assert(kept > N / 2 && kept < N * 8 / 10);
}
END_TEST

START_TEST(xent_rows_match_host)
{
    enum { N = 5, K = 13 };
    float z[N * K], dh[N * K], dc[N * K];
    int32_t lab[N] = {0, 12, 5, 5, 7};
    for (int i = 0; i < N * K; i++)
        z[i] = sinf((float)i * 1.7f) * 9.0f;
    for (int si = 0; si < 2; si++) {
        float s = si ? 0.1f : 0.0f;
        double host = teng_host_xent(z, lab, N, K, s, 256.0f, dh), dev = 0.0;
        for (int i = 0; i < N; i++)
            dev += teng_xent_row(z + i * K, K, lab[i], s, 256.0f, dc + i * K);
        ck_assert_double_eq_tol(dev, host, 1e-12 * fabs(host));
        for (int i = 0; i < N * K; i++)
            ck_assert_float_eq(dc[i], dh[i]);
        /* The loss alone (forward) is the same without the gradient. */
        ck_assert(teng_xent_row(z, K, lab[0], s, 1.0f, NULL) ==
                  teng_xent_row(z, K, lab[0], s, 256.0f, dc));
    }
}
END_TEST

START_TEST(elementwise_maths)
{
    ck_assert_float_eq(tcuda_relu_bwd(0.5f, -3.0f), -3.0f);
    ck_assert_float_eq(tcuda_relu_bwd(0.0f, 2.0f), 0.0f);
    ck_assert_float_eq(tcuda_relu_bwd(-1.0f, 2.0f), 0.0f);
    ck_assert_float_eq(tcuda_add(1.5f, -2.0f, 0), -0.5f);
    ck_assert_float_eq(tcuda_add(1.5f, -2.0f, 1), 0.0f);
    ck_assert_float_eq(tcuda_add(1.5f, 2.0f, 1), 3.5f);
    ck_assert(tcuda_add(NAN, 1.0f, 1) == 0.0f);
    float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, c[3] = {100, 200, 300};
    const float *src[3] = {a, b, c};
    ck_assert_float_eq(tcuda_sum4(src, 3, 1), 222.0f);
    ck_assert_float_eq(tcuda_sum4(src, 1, 2), 3.0f);
}
END_TEST

/* Every half back to fp32, and fp32 values of every kind (normals, ties,
 * subnormals, overflow, inf, nan) to half, against the compiler's
 * _Float16 (IEEE binary16, round to nearest even). */
START_TEST(fp16_conversions)
{
    for (uint32_t h = 0; h < 65536; h++) {
        _Float16 ref;
        uint16_t b = (uint16_t)h;
        memcpy(&ref, &b, 2);
        float a = tcuda_f32_from_f16(b), r = (float)ref;
        ck_assert_msg(!memcmp(&a, &r, 4) || (isnan(a) && isnan(r)),
                      "half %04x: %a, want %a", h, a, r);
    }
    uint64_t x = 12345;
    for (long i = 0; i < 65536 * 8 + 200000; i++) {
        uint32_t u;
        if (i < 65536 * 8) /* around every half: the value and its ties */
            u = (((uint32_t)(i / 8) << 13) + 0x38000000u +
                 (uint32_t)(i % 8) * 0x400u - 0x800u);
        else
            u = (uint32_t)(x = teng_hash64(x));
        float f;
        memcpy(&f, &u, 4);
        _Float16 ref = (_Float16)f;
        uint16_t rb, got = tcuda_f16_from_f32(f);
        memcpy(&rb, &ref, 2);
        /* ck_assert per value is too slow for this many: test, then say. */
        int ok =
            isnan(f) ? (got & 0x7c00) == 0x7c00 && (got & 0x3ff) : got == rb;
        if (!ok)
            ck_abort_msg("%a (%08x) -> %04x, want %04x", f, u, got, rb);
    }
}
END_TEST

/* NHWC offsets against nested loops, both directions, odd sizes. */
START_TEST(layout_index_maths)
{
    enum { N = 3, C = 5, H = 4, W = 7, T = N * C * H * W };
    static float nchw[T], nhwc[T], back[T], loops[T];
    for (int i = 0; i < T; i++)
        nchw[i] = (float)i;
    size_t k = 0;
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++)
                for (int c = 0; c < C; c++, k++) {
                    size_t src = tcuda_nchw(n, c, h, w, C, H, W);
                    ck_assert_uint_eq(src, ((n * C + c) * H + h) * W + w);
                    ck_assert_uint_eq(tcuda_nhwc(n, c, h, w, C, H, W), k);
                    ck_assert_uint_eq(tcuda_nchw_of_nhwc(k, C, H, W), src);
                    loops[k] = nchw[src];
                }
    tcuda_relayout(nchw, nhwc, N, C, H, W, 1);
    ck_assert(!memcmp(nhwc, loops, sizeof(loops)));
    tcuda_relayout(nhwc, back, N, C, H, W, 0);
    ck_assert(!memcmp(back, nchw, sizeof(nchw)));
    /* 1 x 1 images (FC outputs): both layouts are the same. */
    for (size_t i = 0; i < 60; i++)
        ck_assert_uint_eq(tcuda_nchw_of_nhwc(i, 12, 1, 1), i);
}
END_TEST

/* The fused chains of a model's graph in FP16 NHWC mode (or not); checks
 * that each names an add with its ReLU and a BN without one. */
static int _fusions(tmodel_kind kind, int half)
{
    teng_net net;
    tmodel_spec spec = tmodel_defaults(kind);
    ck_assert_int_eq(teng_net_init(&net), 0);
    ck_assert_int_ge(tmodel_build(&net, &spec), 0);
    int *bn_of = malloc(sizeof(int) * (size_t)net.nl), n, deferred = 0;
    unsigned char *def = malloc((size_t)net.nl);
    n = tcuda_fuse_plan(&net, half, bn_of, def);
    for (int i = 0; i < net.nl; i++) {
        deferred += def[i];
        if (bn_of[i] < 0)
            continue;
        ck_assert(net.l[i].kind == TENG_L_ADD && net.l[i].relu);
        ck_assert(net.l[bn_of[i]].kind == TENG_L_BN && !net.l[bn_of[i]].relu);
        ck_assert(def[bn_of[i]]);
        ck_assert_int_eq(net.t[net.l[i].in[0]].producer, bn_of[i]);
    }
    ck_assert_int_eq(deferred, n);
    free(bn_of);
    free(def);
    teng_net_free(&net);
    return n;
}

START_TEST(fusion_on_models)
{
    ck_assert_int_eq(_fusions(TMODEL_RESNET50, 1), 16); /* every block */
    ck_assert_int_eq(_fusions(TMODEL_RESNET18, 1), 8);
    ck_assert_int_eq(_fusions(TMODEL_CIFAR_RESNET, 1), 9); /* depth 20 */
    ck_assert_int_eq(_fusions(TMODEL_TINY_CNN, 1), 0);     /* no BN */
    ck_assert_int_eq(_fusions(TMODEL_ALEXNET_BN, 1), 0);   /* no residual */
    ck_assert_int_eq(_fusions(TMODEL_RESNET50, 0), 0);     /* FP32 NCHW */
}
END_TEST

/* ---- every BN's call (tcuda_bn_plan) and the plan report ---- */

/* A model's BN modes under the switches: counts per mode in n[0..4]
 * (tcuda_bn_mode); checks that each mode fits its layer: BN_ACTIVATION
 * only on a BN with its ReLU, ops BN only on one without, the add-fused
 * BNs exactly tcuda_fuse_plan's. */
static void _bn_modes(tmodel_kind kind, int half, int bn_ex, int fuse,
                      int n[5])
{
    teng_net net;
    tmodel_spec spec = tmodel_defaults(kind);
    tcuda_switches sw = {.half_nhwc = half, .bn_ex = bn_ex, .fuse = fuse};
    ck_assert_int_eq(teng_net_init(&net), 0);
    ck_assert_int_ge(tmodel_build(&net, &spec), 0);
    int *bn_of = malloc(sizeof(int) * (size_t)net.nl);
    unsigned char *def = malloc((size_t)net.nl), *mode = malloc((size_t)net.nl);
    int nex = tcuda_bn_plan(&net, &sw, bn_of, def, mode);
    memset(n, 0, 5 * sizeof(int));
    for (int i = 0; i < net.nl; i++) {
        const teng_layer *l = &net.l[i];
        n[mode[i]]++;
        ck_assert_int_eq(l->kind == TENG_L_BN, mode[i] != TCUDA_BN_NONE);
        ck_assert_int_eq(def[i], mode[i] == TCUDA_BN_EX_ADD_ACT);
        if (mode[i] == TCUDA_BN_EX_ACT)
            ck_assert(l->relu);
        if (mode[i] == TCUDA_BN_EX || mode[i] == TCUDA_BN_EX_ADD_ACT)
            ck_assert(!l->relu);
    }
    ck_assert_int_eq(nex, n[TCUDA_BN_EX] + n[TCUDA_BN_EX_ACT] +
                              n[TCUDA_BN_EX_ADD_ACT]);
    free(bn_of);
    free(def);
    free(mode);
    teng_net_free(&net);
}

#define _MODES(kind, half, ex, fuse, legacy, bn, act, add)   \
    do {                                                     \
        int n_[5];                                           \
        _bn_modes(kind, half, ex, fuse, n_);                 \
        ck_assert_int_eq(n_[TCUDA_BN_LEGACY], legacy);       \
        ck_assert_int_eq(n_[TCUDA_BN_EX], bn);               \
        ck_assert_int_eq(n_[TCUDA_BN_EX_ACT], act);          \
        ck_assert_int_eq(n_[TCUDA_BN_EX_ADD_ACT], add);      \
    } while (0)

START_TEST(bn_plan_on_models)
{
    /* ResNet-50: 16 block ends with the add, 33 with their ReLU (two per
     * block and the stem), 4 projection shortcuts plain; none legacy. */
    _MODES(TMODEL_RESNET50, 1, 1, 1, 0, 4, 33, 16);
    _MODES(TMODEL_RESNET50, 1, 0, 1, 37, 0, 0, 16); /* TCUDA_BN_EX=0 */
    _MODES(TMODEL_RESNET50, 1, 1, 0, 0, 20, 33, 0); /* TCUDA_FUSE=0 */
    _MODES(TMODEL_RESNET50, 0, 1, 1, 53, 0, 0, 0);  /* FP32 NCHW */
    _MODES(TMODEL_RESNET18, 1, 1, 1, 0, 3, 9, 8);
    _MODES(TMODEL_RESNET18, 1, 0, 1, 12, 0, 0, 8);
    _MODES(TMODEL_CIFAR_RESNET, 1, 1, 1, 0, 2, 10, 9); /* depth 20 */
    _MODES(TMODEL_ALEXNET_BN, 1, 1, 1, 0, 1, 5, 0);
    _MODES(TMODEL_ALEXNET_BN, 1, 0, 1, 6, 0, 0, 0);
    _MODES(TMODEL_TINY_CNN, 1, 1, 1, 0, 0, 0, 0); /* no BN */
}
END_TEST

/* x -> conv(c) -> bn(relu): Ex only with channels a multiple of 4. */
START_TEST(bn_plan_channels)
{
    for (int c = 3; c <= 8; c++) {
        teng_net net;
        ck_assert_int_eq(teng_net_init(&net), 0);
        int x = teng_add_input(&net, 3, 6, 6);
        int y = teng_add_conv(&net, "conv", x, c, 3, 1, 1, 0);
        ck_assert_int_ge(teng_add_bn(&net, "bn", y, 1, 0), 0);
        tcuda_switches sw = {.half_nhwc = 1, .bn_ex = 1, .fuse = 1};
        int bn_of[4];
        unsigned char def[4], mode[4];
        ck_assert_int_le(net.nl, 4);
        ck_assert_int_eq(tcuda_bn_plan(&net, &sw, bn_of, def, mode),
                         c % 4 == 0);
        ck_assert_int_eq(mode[2],
                         c % 4 ? TCUDA_BN_LEGACY : TCUDA_BN_EX_ACT);
        teng_net_free(&net);
    }
}
END_TEST

/* The run-time bookkeeping (tcuda_bn_state) on ResNet-50: what each
 * layer's forward runs, and after cuDNN declines a call. */
START_TEST(bn_state_declines)
{
    teng_net net;
    tmodel_spec spec = tmodel_defaults(TMODEL_RESNET50);
    tcuda_switches sw = {.half_nhwc = 1, .bn_ex = 1, .fuse = 1};
    tcuda_bn_state st;
    int n[4] = {0}, add = -1, act = -1;
    ck_assert_int_eq(teng_net_init(&net), 0);
    ck_assert_int_ge(tmodel_build(&net, &spec), 0);
    ck_assert_int_eq(tcuda_bn_state_open(&st, &net, &sw), 0);
    ck_assert_int_eq(st.nex, 53);
    ck_assert_int_eq(st.nfused, 16);
    for (int i = 0; i < net.nl; i++) {
        n[tcuda_bn_fwd_call(&st, i, 1)]++;
        ck_assert_int_eq(tcuda_bn_fwd_call(&st, i, 0), TCUDA_CALL_PLAIN);
        if (net.l[i].kind == TENG_L_BN) {
            ck_assert(st.bwd_ex[i] && tcuda_bn_fallback(&st, i, 1));
            ck_assert(!tcuda_bn_fallback(&st, i, 0)); /* evaluation */
        }
        if (add < 0 && st.fuse_bn[i] >= 0)
            add = i;
        if (act < 0 && st.plan[i] == TCUDA_BN_EX_ACT)
            act = i;
    }
    ck_assert_int_eq(n[TCUDA_CALL_DEFERRED], 16);
    ck_assert_int_eq(n[TCUDA_CALL_ADD_FUSED], 16);
    ck_assert_int_eq(n[TCUDA_CALL_EX], 37);
    /* The fused forward declined: the chain runs as BN (legacy, each
     * call a fallback) then the add, both ways. */
    int b = st.fuse_bn[add];
    tcuda_bn_decline(&st, b, 1);
    ck_assert_int_eq(st.nfused, 15);
    ck_assert_int_eq(tcuda_bn_fwd_call(&st, add, 1), TCUDA_CALL_PLAIN);
    ck_assert_int_eq(tcuda_bn_fwd_call(&st, b, 1), TCUDA_CALL_PLAIN);
    ck_assert(!st.bwd_ex[b] && !st.deferred[b]);
    ck_assert(tcuda_bn_fallback(&st, b, 1));
    /* A backward declined: the forward stays on the Ex call. */
    tcuda_bn_decline(&st, act, 0);
    ck_assert_int_eq(tcuda_bn_fwd_call(&st, act, 1), TCUDA_CALL_EX);
    ck_assert(!st.bwd_ex[act]);
    tcuda_bn_state_close(&st);
    /* TCUDA_BN_EX=0: a BN with its ReLU is planned legacy, no fallback. */
    sw.bn_ex = 0;
    ck_assert_int_eq(tcuda_bn_state_open(&st, &net, &sw), 0);
    ck_assert_int_eq(tcuda_bn_fwd_call(&st, act, 1), TCUDA_CALL_PLAIN);
    ck_assert(!st.bwd_ex[act] && !tcuda_bn_fallback(&st, act, 1));
    tcuda_bn_state_close(&st);
    teng_net_free(&net);
}
END_TEST

/* The report's totals for a model under the environment's switches. */
static tcuda_plan_totals _report(tmodel_kind kind, int half)
{
    teng_net net;
    tmodel_spec spec = tmodel_defaults(kind);
    tcuda_plan_in in = {.half_nhwc = half, .conv = TCUDA_ALGO_HEURISTIC};
    tcuda_plan_totals t;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(teng_net_init(&net), 0);
    ck_assert_int_ge(tmodel_build(&net, &spec), 0);
    ck_assert_int_eq(tcuda_plan_report(&net, &in, f, &t), 0);
    fclose(f);
    char want[128];
    snprintf(want, sizeof want,
             "BN fused %d/%d, separate activation passes %d;", t.bn_ex, t.bn,
             t.separate);
    ck_assert_msg(strstr(text, want), "no '%s' in:\n%s", want, text);
    free(text);
    teng_net_free(&net);
    return t;
}

START_TEST(plan_report_totals)
{
    unsetenv("TCUDA_BN_EX");
    unsetenv("TCUDA_FUSE");
    tcuda_plan_totals t = _report(TMODEL_RESNET50, 1);
    ck_assert_int_eq(t.bn, 53);
    ck_assert_int_eq(t.bn_ex, 53);
    ck_assert_int_eq(t.separate, 0);
    ck_assert_int_eq(t.conv, 53);
    t = _report(TMODEL_RESNET18, 1);
    ck_assert_int_eq(t.bn_ex, 20);
    ck_assert_int_eq(t.bn, 20);
    ck_assert_int_eq(t.separate, 0);
    /* The legacy path: the add-fused BNs stay, every BN+ReLU pays. */
    setenv("TCUDA_BN_EX", "0", 1);
    t = _report(TMODEL_RESNET50, 1);
    ck_assert_int_eq(t.bn_ex, 16);
    ck_assert_int_eq(t.separate, 33);
    unsetenv("TCUDA_BN_EX");
    t = _report(TMODEL_RESNET50, 0); /* FP32 NCHW: all legacy */
    ck_assert_int_eq(t.bn_ex, 0);
    ck_assert_int_eq(t.separate, 33);
}
END_TEST

/* ---- the padded stem (cuda_stem.h) ---- */

/* Which convolution is padded, and to how many channels. */
static int _stem(tmodel_kind kind, int in_channels, int half, int pad,
                 int input_grad, int *cp)
{
    teng_net net;
    tmodel_spec spec = tmodel_defaults(kind);
    tcuda_switches sw = {.half_nhwc = half, .bn_ex = 1, .fuse = 1,
                         .pad_stem = pad};
    spec.in_channels = in_channels;
    ck_assert_int_eq(teng_net_init(&net), 0);
    ck_assert_int_ge(tmodel_build(&net, &spec), 0);
    teng_net_set_input_grad(&net, input_grad);
    int stem = tcuda_stem_plan(&net, &sw, cp);
    if (stem >= 0) {
        ck_assert(net.l[stem].kind == TENG_L_CONV);
        ck_assert_int_eq(net.l[stem].in[0], net.input);
    }
    teng_net_free(&net);
    return stem;
}

START_TEST(stem_plan)
{
    int cp;
    ck_assert_int_ge(_stem(TMODEL_RESNET50, 3, 1, 1, 0, &cp), 0);
    ck_assert_int_eq(cp, 4);
    ck_assert_int_ge(_stem(TMODEL_CIFAR_RESNET, 3, 1, 1, 0, &cp), 0);
    ck_assert_int_ge(_stem(TMODEL_ALEXNET_BN, 3, 1, 1, 0, &cp), 0);
    ck_assert_int_ge(_stem(TMODEL_RESNET18, 1, 1, 1, 0, &cp), 0);
    ck_assert_int_eq(cp, 4); /* one channel (Fashion-MNIST) pads to 4 too */
    ck_assert_int_lt(_stem(TMODEL_RESNET50, 3, 1, 0, 0, &cp), 0); /* off */
    ck_assert_int_eq(cp, 3);
    ck_assert_int_lt(_stem(TMODEL_RESNET50, 3, 0, 1, 0, &cp), 0); /* FP32 */
    ck_assert_int_lt(_stem(TMODEL_RESNET50, 3, 1, 1, 1, &cp), 0); /* dx */
    ck_assert_int_lt(_stem(TMODEL_RESNET50, 4, 1, 1, 0, &cp), 0); /* 4 */
}
END_TEST

/* The padded layout's index maths against nested loops, and the 8-bit
 * input's padded elements against the engine's host path (dnnl): each
 * real channel the host's value bit for bit, each padding channel 0. */
START_TEST(stem_layout_and_input)
{
    enum { N = 2, C = 3, CP = 4, H = 5, W = 6 };
    for (size_t i = 0, j = 0; i < (size_t)N * H * W * CP; i++) {
        size_t u = tcuda_stem_unpad(i, C, CP);
        if (i % CP >= C) {
            ck_assert(u == TCUDA_STEM_PAD);
            continue;
        }
        ck_assert_uint_eq(u, j);
        ck_assert_uint_eq(tcuda_stem_pad(j, C, CP), i);
        j++;
    }
    teng_backend *bk = lh_backend();
    teng_net *net;
    ck_assert_int_eq(teng_net_create(&net), 0);
    int x = teng_add_input(net, C, H, W);
    ck_assert_int_ge(teng_add_conv(net, "stem", x, 4, 3, 1, 1, 0), 0);
    ck_assert_int_eq(teng_net_compile(net, bk, N), 0);
    uint8_t *px = teng_backend_host_alloc(bk, N * H * W * C);
    uint8_t flips[N] = {0, 1};
    for (int i = 0; i < N * H * W * C; i++)
        px[i] = (uint8_t)(i * 37 + 11);
    const float scale[3] = {0.017f, 0.0175f, 0.0171f};
    const float bias[3] = {-2.1f, -2.0f, -1.8f};
    ck_assert_int_eq(teng_net_stage_input_u8(net, 0, px, flips, N), 0);
    ck_assert_int_eq(teng_net_use_input_u8(net, 0, scale, bias), 0);
    float host[N * C * H * W];
    ck_assert_int_eq(teng_tensor_read(net, x, 0, host), 0);
    size_t bad = 0;
    for (size_t i = 0; i < (size_t)N * H * W * CP; i++) {
        float v = tcuda_stem_input_px(i, C, CP, H, W, px, flips, scale, bias);
        size_t u = tcuda_stem_unpad(i, C, CP);
        bad += u == TCUDA_STEM_PAD
                   ? v != 0.f
                   : v != host[tcuda_nchw_of_nhwc(u, C, H, W)];
    }
    ck_assert_uint_eq(bad, 0);
    teng_backend_host_free(bk, px);
    teng_net_destroy(net);
    bk->ops->destroy(bk);
}
END_TEST

/* A ResNet stem and one residual block on dnnl, c input channels of 32 x
 * 32, batch 2: conv 7x7/2 (bias) -> BN+ReLU -> maxpool 3/2 -> conv 3x3
 * -> BN -> add+ReLU -> GAP -> FC 10 -> loss (ResNet-18 whole costs a
 * minute on a loaded 2-core machine; the stem is what differs). */
static teng_net *_stem_net(teng_backend *bk, int c)
{
    teng_net *net;
    ck_assert_int_eq(teng_net_create(&net), 0);
    int x = teng_add_input(net, c, 32, 32);
    int y = teng_add_conv(net, "conv1", x, 16, 7, 2, 3, 1);
    y = teng_add_maxpool(net, "pool", teng_add_bn(net, "bn1", y, 1, 0), 3, 2,
                         1);
    int b = teng_add_bn(net, "bn2", teng_add_conv(net, "conv2", y, 16, 3, 1,
                                                  1, 0),
                        0, 0);
    y = teng_add_gap(net, "gap", teng_add_residual(net, "add", b, y, 1));
    ck_assert_int_ge(teng_add_xent(net, "loss", teng_add_fc(net, "fc", y, 10,
                                                            1),
                                   0.f),
                     0);
    ck_assert_int_eq(teng_net_compile(net, bk, 2), 0);
    ck_assert_int_eq(tmodel_init(net, 7), 0);
    return net;
}

/* |a - b| within 1e-5 of the tensor's largest magnitude (oneDNN may run
 * another kernel for 4 input channels than for 3, summing in another
 * order: a sum of many terms may then differ in its last bits relative
 * to the terms, not to itself). */
static void _close(const float *a, const float *b, size_t n, const char *what)
{
    float m = 0.f;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        m = fmaxf(m, fmaxf(fabsf(a[i]), fabsf(b[i])));
        if (fabsf(a[i] - b[i]) > fabsf(a[worst] - b[worst]))
            worst = i;
    }
    /* one assertion per tensor: Check's are slow by the hundred thousand */
    ck_assert_msg(fabsf(a[worst] - b[worst]) <= 1e-5f * m,
                  "%s[%zu]: %g vs %g (max %g)", what, worst, a[worst],
                  b[worst], m);
}

/* The stem's weights of b: a's, a zero tap on input channel 3. */
static void _pad_weights(teng_net *a, teng_net *b, int id)
{
    const teng_param *p = teng_net_param(a, id);
    size_t k = (size_t)p->dims[0], hw = (size_t)p->dims[2] * p->dims[3];
    float *w = malloc(sizeof(float) * p->count);
    float *wp = calloc(k * 4 * hw, sizeof(float));
    ck_assert_int_eq(teng_param_read(a, id, 0, w), 0);
    for (size_t o = 0; o < k; o++)
        memcpy(wp + o * 4 * hw, w + o * 3 * hw, sizeof(float) * 3 * hw);
    ck_assert_int_eq(teng_param_write(b, id, 0, wp), 0);
    free(w);
    free(wp);
}

/* One training step of a and b on the same (padded) batch. */
static void _stem_step(teng_net *a, teng_net *b)
{
    enum { N = 2, HW = 32 * 32 };
    float x3[N * 3 * HW], x4[N * 4 * HW] = {0};
    int32_t labels[N] = {3, 8};
    lh_fill(x3, N * 3 * HW, 5, -2.f, 2.f);
    for (int n = 0; n < N; n++)
        memcpy(x4 + n * 4 * HW, x3 + n * 3 * HW, sizeof(float) * 3 * HW);
    ck_assert_int_eq(teng_net_set_input(a, x3), 0);
    ck_assert_int_eq(teng_net_set_input(b, x4), 0);
    for (teng_net *net = a; net; net = net == a ? b : NULL) {
        ck_assert_int_eq(teng_net_set_labels(net, labels), 0);
        ck_assert_int_eq(teng_net_forward(net, 1), 0);
        ck_assert_int_eq(teng_net_backward(net), 0);
        ck_assert_int_eq(teng_net_sync(net), 0);
    }
}

START_TEST(stem_padded_equals_unpadded)
{
    teng_backend *bk = lh_backend();
    teng_net *a = _stem_net(bk, 3), *b = _stem_net(bk, 4);
    int np = teng_net_nparams(a), stem = -1;
    for (int i = 0; i < np; i++) {
        const teng_param *p = teng_net_param(a, i);
        float *v = malloc(sizeof(float) * p->count);
        ck_assert_int_eq(teng_param_read(a, i, 0, v), 0);
        if (p->ndims == 4 && p->dims[1] == 3)
            stem = i, _pad_weights(a, b, i);
        else
            ck_assert_int_eq(teng_param_write(b, i, 0, v), 0);
        free(v);
    }
    ck_assert_int_ge(stem, 0);
    _stem_step(a, b);
    ck_assert(fabs(teng_net_loss(a) - teng_net_loss(b)) <=
              1e-6 * fabs(teng_net_loss(a)));
    for (int i = 0; i < np; i++) {
        const teng_param *p = teng_net_param(a, i), *q = teng_net_param(b, i);
        float *ga = malloc(sizeof(float) * p->count);
        float *gb = malloc(sizeof(float) * q->count);
        ck_assert_int_eq(teng_param_read(a, i, 1, ga), 0);
        ck_assert_int_eq(teng_param_read(b, i, 1, gb), 0);
        if (i == stem) { /* the real taps match, the padding's are 0 */
            size_t hw = (size_t)p->dims[2] * p->dims[3];
            size_t nonzero = 0;
            for (int o = 0; o < p->dims[0]; o++) {
                _close(ga + o * 3 * hw, gb + o * 4 * hw, 3 * hw, "stem dW");
                for (size_t t = 0; t < hw; t++)
                    nonzero += gb[(o * 4 + 3) * hw + t] != 0.f;
            }
            ck_assert_uint_eq(nonzero, 0);
        } else
            _close(ga, gb, p->count, p->name);
        free(ga);
        free(gb);
    }
    teng_net_destroy(a);
    teng_net_destroy(b);
    bk->ops->destroy(bk);
}
END_TEST

/* x -> conv -> bn(relu?) -> add(relu?) with the conv's input, and the
 * fusion count; extra: a second reader of the BN output. */
static int _chain(int c, int bn_relu, int add_relu, int extra)
{
    teng_net net;
    ck_assert_int_eq(teng_net_init(&net), 0);
    int x = teng_add_input(&net, c, 6, 6);
    int y = teng_add_conv(&net, "conv", x, c, 3, 1, 1, 0);
    int b = teng_add_bn(&net, "bn", y, bn_relu, 0);
    ck_assert_int_ge(teng_add_residual(&net, "add", b, y, add_relu), 0);
    if (extra)
        ck_assert_int_ge(teng_add_relu(&net, "extra", b), 0);
    int bn_of[8];
    unsigned char def[8];
    ck_assert_int_le(net.nl, 8);
    int n = tcuda_fuse_plan(&net, 1, bn_of, def);
    teng_net_free(&net);
    return n;
}

START_TEST(fusion_rules)
{
    ck_assert_int_eq(_chain(8, 0, 1, 0), 1);
    ck_assert_int_eq(_chain(6, 0, 1, 0), 0); /* channels not a multiple of 4 */
    ck_assert_int_eq(_chain(8, 1, 1, 0), 0); /* the BN has its own ReLU */
    ck_assert_int_eq(_chain(8, 0, 0, 0), 0); /* the add has no ReLU */
    ck_assert_int_eq(_chain(8, 0, 1, 1), 0); /* the BN output read twice */
}
END_TEST

/* ---- the fused chain's backward (cuda_fuse.h) on the engine's plan ---- */

/* The oneDNN backend as the cuda backend plans a fused chain: its BN
 * reports tcuda_fuse_reads' bits, and at that BN's backward the test
 * checks that y (the add's output after forward) is still there. */
static teng_backend_ops _fops;
static const teng_backend_ops *_dnnl_ops;
static int _fbn = -1, _fadd = -1, _fbits = 1, _fseen;
static float _fy[64 * 36];

static unsigned _freads(teng_backend *bk, const teng_net *net, int li)
{
    unsigned plain = _dnnl_ops->bwd_reads(bk, net, li);
    if (li != _fbn)
        return plain;
    return _fbits ? tcuda_fuse_reads(plain, 1) : plain | 4u;
}

static int _fbackward(teng_backend *bk, teng_net *net, int li)
{
    if (li == _fbn) {
        size_t n = teng_tensor_count(net, net->l[_fadd].out);
        _fseen =
            !memcmp(net->t[net->l[_fadd].out].data, _fy, sizeof(float) * n);
    }
    return _dnnl_ops->backward(bk, net, li);
}

/* x -> conv -> bn -> [conv shortcut] -> add(relu); compiled with reuse on
 * the wrapped backend; returns whether y survived to the BN's backward
 * and, in *same, whether the add wrote in place over the BN output. */
static int _fused_liveness(int bits, int *same)
{
    teng_backend *bk = lh_backend();
    _dnnl_ops = bk->ops;
    _fops = *bk->ops;
    _fops.bwd_reads = _freads;
    _fops.backward = _fbackward;
    bk->ops = &_fops;
    _fbits = bits;
    _fseen = 0;
    teng_net *net;
    ck_assert_int_eq(teng_net_create(&net), 0);
    int x = teng_add_input(net, 8, 6, 6);
    int c = teng_add_conv(net, "conv", x, 8, 3, 1, 1, 0);
    int b = teng_add_bn(net, "bn", c, 0, 0);
    int d = teng_add_conv(net, "down", x, 8, 1, 1, 0, 0);
    int y =
        teng_add_residual(net, "add", b, teng_add_bn(net, "dbn", d, 0, 0), 1);
    int out = teng_add_conv(net, "head", y, 8, 3, 1, 1, 0);
    _fbn = net->t[b].producer;
    _fadd = net->t[y].producer;
    teng_net_set_input_grad(net, 1);
    ck_assert_int_eq(teng_net_compile(net, bk, 2), 0);
    float in[2 * 8 * 36], g[2 * 8 * 36];
    lh_fill(in, 2 * 8 * 36, 3, -1.f, 1.f);
    lh_fill(g, 2 * 8 * 36, 4, -1.f, 1.f);
    ck_assert_int_eq(teng_net_set_input(net, in), 0);
    ck_assert_int_eq(teng_net_forward(net, 1), 0);
    ck_assert_int_eq(teng_net_sync(net), 0);
    memcpy(_fy, net->t[y].data, sizeof(float) * teng_tensor_count(net, y));
    ck_assert_int_eq(teng_tensor_write(net, out, 1, g), 0);
    ck_assert_int_eq(teng_net_backward(net), 0);
    *same = net->t[b].data == net->t[y].data;
    ck_assert_int_eq(tcuda_fuse_bwd_ok(net, _fbn, _fadd), *same);
    teng_net_destroy(net);
    bk->ops = _dnnl_ops;
    bk->ops->destroy(bk);
    return _fseen;
}

START_TEST(fused_backward_plan)
{
    int same;
    /* Bit 3: the add still writes in place, and y lives to the BN's
     * backward. */
    ck_assert(_fused_liveness(1, &same));
    ck_assert(same);
    /* Bit 2 alone: no in-place add (the BN output would be overwritten),
     * so the fused backward would not find y at the BN output. */
    _fused_liveness(0, &same);
    ck_assert(!same);
    ck_assert_uint_eq(tcuda_fuse_reads(1u, 0), 1u);
    ck_assert_uint_eq(tcuda_fuse_reads(1u, 1), 13u);
    ck_assert_int_eq(tcuda_fuse_status(1, 0), TCUDA_FUSE_KEEP);
    ck_assert_int_eq(tcuda_fuse_status(0, 1), TCUDA_FUSE_UNFUSE);
    ck_assert_int_eq(tcuda_fuse_status(0, 0), TCUDA_FUSE_FAIL);
}
END_TEST

/* ---- the engine's step-graph bookkeeping (teng_net_graph_*) ---- */

/* The oneDNN backend with stand-in graph ops: they record and launch
 * nothing, and count; _gfail makes the next graph_end fail. */
static int _gbegun, _glaunched, _gfail;
static int _gbegin(teng_backend *bk)
{
    (void)bk;
    _gbegun++;
    return 0;
}
static int _gend(teng_backend *bk, void **graph)
{
    (void)bk;
    *graph = &_gbegun;
    return _gfail ? TENG_EBACKEND : 0;
}
static int _glaunch(teng_backend *bk, void *graph)
{
    (void)bk;
    _glaunched += graph == &_gbegun;
    return 0;
}
static void _gfree(teng_backend *bk, void *graph)
{
    (void)bk, (void)graph;
}

START_TEST(graph_step_count)
{
    teng_backend *bk = lh_backend();
    const teng_backend_ops *dnnl = bk->ops;
    ck_assert(!teng_backend_graph_supported(bk));
    _fops = *bk->ops;
    _fops.graph_begin = _gbegin;
    _fops.graph_end = _gend;
    _fops.graph_launch = _glaunch;
    _fops.graph_free = _gfree;
    bk->ops = &_fops;
    teng_net *net;
    teng_graph *g = NULL, *g2 = NULL;
    ck_assert_int_eq(teng_net_create(&net), 0);
    int x = teng_add_input(net, 4, 4, 4);
    int y = teng_add_conv(net, "c", x, 4, 3, 1, 1, 0);
    ck_assert_int_ge(teng_add_dropout(net, "d", y, 0.5f), 0);
    ck_assert_int_eq(teng_net_compile(net, bk, 2), 0);
    ck_assert(teng_net_graph_supported(net));
    unsigned plan = teng_net_plan_id(net);
    uint64_t s0 = teng_net_dropout_step(net);
    /* Recording runs nothing: the step count is back; the replay counts. */
    ck_assert_int_eq(teng_net_graph_begin(net), 0);
    ck_assert_int_eq(teng_net_graph_begin(net), TENG_ESTATE); /* nested */
    ck_assert_int_eq(teng_net_forward(net, 1), 0);
    ck_assert_int_eq(teng_net_graph_replay(net, g), TENG_ESTATE);
    ck_assert_int_eq(teng_net_graph_end(net, &g), 0);
    ck_assert_uint_eq(teng_net_dropout_step(net), s0);
    ck_assert_int_eq(teng_net_graph_replay(net, g), 0);
    ck_assert_int_eq(teng_net_graph_replay(net, g), 0);
    ck_assert_uint_eq(teng_net_dropout_step(net), s0 + 2);
    ck_assert_int_eq(_glaunched, 2);
    /* A failed recording leaves the count as it was, and no graph. */
    _gfail = 1;
    ck_assert_int_eq(teng_net_graph_begin(net), 0);
    ck_assert_int_eq(teng_net_forward(net, 1), 0);
    ck_assert_int_ne(teng_net_graph_end(net, &g2), 0);
    ck_assert_ptr_null(g2);
    ck_assert_uint_eq(teng_net_dropout_step(net), s0 + 2);
    ck_assert_int_eq(teng_net_graph_end(net, &g2), TENG_ESTATE);
    _gfail = 0;
    /* Another batch re-plans: the plan id changes (graphs go stale). */
    ck_assert_int_eq(teng_net_set_batch(net, 1), 0);
    ck_assert_uint_ne(teng_net_plan_id(net), plan);
    teng_net_graph_free(net, g);
    teng_net_destroy(net);
    bk->ops = dnnl;
    bk->ops->destroy(bk);
}
END_TEST

/* The counters' line is what tests/gpu/run-gpu parses: its exact form,
 * and room for the largest counts in torus-train's 256-byte buffer. */
START_TEST(fastpath_line)
{
    tcuda_fastpath c = {1, 2, 3, 4, 5, 6, 7};
    char buf[256];
    tcuda_fastpath_format(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, "fastpath: graph_capture=1 graph_replay=2 bn_ex=3 "
                          "bn_fallback=4 conv_tuned=5 conv_cached=6 "
                          "conv_heuristic=7");
    memset(&c, 0xff, sizeof c);
    ck_assert_int_lt(tcuda_fastpath_format(&c, buf, sizeof buf), 256);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host");
    TCase *tc = tcase_create("cuda_host");
    tcase_add_test(tc, algo_cache_keys);
    tcase_add_test(tc, algo_cache_grows);
    tcase_add_test(tc, dropout_matches_host);
    tcase_add_test(tc, xent_rows_match_host);
    tcase_add_test(tc, elementwise_maths);
    tcase_add_test(tc, fp16_conversions);
    tcase_add_test(tc, layout_index_maths);
    tcase_add_test(tc, fusion_on_models);
    tcase_add_test(tc, fusion_rules);
    tcase_add_test(tc, fused_backward_plan);
    tcase_add_test(tc, graph_step_count);
    tcase_add_test(tc, fastpath_line);
    tcase_add_test(tc, bn_plan_on_models);
    tcase_add_test(tc, bn_plan_channels);
    tcase_add_test(tc, plan_report_totals);
    tcase_add_test(tc, bn_state_declines);
    tcase_add_test(tc, stem_plan);
    tcase_add_test(tc, stem_layout_and_input);
    tcase_add_test(tc, stem_padded_equals_unpadded);
    suite_add_tcase(s, tc);
    return lh_run(s);
}
