/* test_engine.c: the backend-independent parts of the engine: graph
 * building and shape inference, error reporting, the liveness arena
 * planner, and the deterministic random numbers. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/layer_harness.h"
#include "trainer/engine/arena.h"
#include "trainer/engine/teng.h"
#include "trainer/engine/host_kernels.h"
#include "trainer/engine/step_math.h"
#include "trainer/engine/rng.h"

START_TEST(shapes)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 3, 224, 224);
    int c = teng_add_conv(&net, "conv1", x, 64, 7, 2, 3, 0);
    int p = teng_add_maxpool(&net, "pool", c, 3, 2, 1);
    int g = teng_add_gap(&net, "gap", p);
    int f = teng_add_fc(&net, "fc", g, 1000, 1);
    ck_assert_int_ge(f, 0);
    ck_assert_int_eq(net.t[c].shape.h, 112);
    ck_assert_int_eq(net.t[p].shape.w, 56);
    ck_assert_int_eq(net.t[g].shape.c, 64);
    ck_assert_int_eq(net.t[g].shape.h, 1);
    ck_assert_int_eq(net.t[f].shape.c, 1000);
    /* conv 64x3x7x7 + fc 1000x64 + bias 1000 */
    ck_assert_uint_eq(teng_net_param_count(&net),
                      64 * 3 * 49 + 1000 * 64 + 1000);
    ck_assert_int_eq(net.np, 3);
    ck_assert_str_eq(net.p[0].name, "conv1.w");
    ck_assert_int_eq(net.p[2].is_bn_or_bias, 1);
    ck_assert_int_eq(net.p[1].is_bn_or_bias, 0);
    teng_net_free(&net);
}
END_TEST

START_TEST(bad_graphs)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 3, 8, 8);
    ck_assert_int_eq(teng_add_conv(&net, "c", 7, 4, 3, 1, 1, 0), TENG_EINVAL);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "no tensor 7"));
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "net.c:"));
    ck_assert_int_eq(teng_add_conv(&net, "big", x, 4, 11, 1, 0, 0),
                     TENG_EINVAL);
    int a = teng_add_conv(&net, "a", x, 4, 3, 1, 1, 0);
    int b = teng_add_conv(&net, "b", x, 4, 3, 2, 1, 0);
    ck_assert_int_eq(teng_add_residual(&net, "r", a, b, 0), TENG_EINVAL);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "differ"));
    ck_assert_int_eq(teng_add_dropout(&net, "d", a, 1.0f), TENG_EINVAL);
    ck_assert_int_eq(teng_add_xent(&net, "l", a, 0.f), TENG_EINVAL);
    ck_assert_int_eq(teng_add_input(&net, 1, 1, 1), TENG_EINVAL);
    ck_assert_int_eq(teng_net_forward(&net, 1), TENG_ESTATE);
    teng_net_free(&net);
}
END_TEST

/* Checks that no two buffers overlapping in time overlap in memory. */
static void _assert_disjoint(const teng_interval *b, int n, size_t total)
{
    for (int i = 0; i < n; i++) {
        ck_assert_uint_le(b[i].offset + b[i].bytes, total);
        ck_assert_uint_eq(b[i].offset % 64, 0);
        for (int j = i + 1; j < n; j++) {
            int live = b[i].first <= b[j].last && b[j].first <= b[i].last;
            int mem = b[i].offset < b[j].offset + b[j].bytes &&
                      b[j].offset < b[i].offset + b[i].bytes;
            ck_assert_msg(!(live && mem), "buffers %d and %d collide", i, j);
        }
    }
}

START_TEST(arena_chain_reuses)
{
    /* A chain: buffer i lives over steps [i, i+1]. Only two are ever
     * alive, so the arena needs two slots, not n. */
    teng_interval b[10];
    for (int i = 0; i < 10; i++)
        b[i] = (teng_interval){1000, i, i + 1, 0};
    size_t total = teng_arena_plan(b, 10, 64);
    _assert_disjoint(b, 10, total);
    ck_assert_uint_eq(total, 2 * 1024);
}
END_TEST

START_TEST(arena_random)
{
    teng_interval b[200];
    teng_rng r;
    teng_rng_seed(&r, 3);
    size_t sum = 0;
    for (int i = 0; i < 200; i++) {
        int f = (int)(teng_rng_next(&r) % 100);
        b[i] = (teng_interval){1 + teng_rng_next(&r) % 5000, f,
                               f + (int)(teng_rng_next(&r) % 10), 0};
        sum += (b[i].bytes + 63) & ~(size_t)63;
    }
    size_t total = teng_arena_plan(b, 200, 64);
    _assert_disjoint(b, 200, total);
    ck_assert_uint_lt(total, sum);
}
END_TEST

START_TEST(rng_streams)
{
    teng_rng a, b;
    teng_rng_seed(&a, 42);
    teng_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++)
        ck_assert_uint_eq(teng_rng_next(&a), teng_rng_next(&b));
    teng_rng_seed(&b, 43);
    ck_assert_uint_ne(teng_rng_next(&a), teng_rng_next(&b));
    /* Normal samples: mean ~0 and variance ~1 over 20000 draws. */
    double s = 0, s2 = 0;
    for (int i = 0; i < 20000; i++) {
        double v = teng_rng_normal(&a);
        s += v;
        s2 += v * v;
    }
    ck_assert_double_lt(fabs(s / 20000), 0.03);
    ck_assert_double_lt(fabs(s2 / 20000 - 1.0), 0.05);
    float u = teng_rng_uniform(&a);
    ck_assert(u >= 0.f && u < 1.f);
}
END_TEST

START_TEST(host_sgd_and_sumsq)
{
    float w[3] = {1.f, -2.f, 0.5f}, g[3] = {0.1f, 0.2f, -0.4f};
    float v[3] = {0.5f, 0.f, -1.f};
    /* v = 0.9 v + 0.1 (g + 0.01 w); w -= v, by hand: */
    teng_sgd_span(w, g, v, 3, 0.1f, 0.9f, 0.01f);
    ck_assert_float_eq_tol(v[0], 0.45f + 0.1f * (0.1f + 0.01f), 1e-6f);
    ck_assert_float_eq_tol(v[1], 0.1f * (0.2f - 0.02f), 1e-6f);
    ck_assert_float_eq_tol(v[2], -0.9f + 0.1f * (-0.4f + 0.005f), 1e-6f);
    ck_assert_float_eq_tol(w[0], 1.f - 0.461f, 1e-6f);
    float x[37];
    double ref = 0;
    for (int i = 0; i < 37; i++) {
        x[i] = (float)(i - 18) / 7.f;
        ref += (double)x[i] * x[i];
    }
    ck_assert_double_eq_tol(teng_sumsq(x, 37), ref, 1e-4);
}
END_TEST

START_TEST(host_xent_by_hand)
{
    /* Two classes, logits (0, ln 3): softmax (1/4, 3/4). */
    float z[2] = {0.f, logf(3.f)}, d[2];
    int32_t y = 1;
    double l = teng_host_xent(z, &y, 1, 2, 0.f, 2.f, d);
    ck_assert_double_eq_tol(l, -log(0.75), 1e-6);
    ck_assert_float_eq_tol(d[0], 0.25f / 2.f, 1e-6f);
    ck_assert_float_eq_tol(d[1], -0.25f / 2.f, 1e-6f);
    /* Smoothing 0.2 over 2 classes: targets (0.1, 0.9). */
    l = teng_host_xent(z, &y, 1, 2, 0.2f, 1.f, d);
    ck_assert_double_eq_tol(l, -(0.1 * log(0.25) + 0.9 * log(0.75)), 1e-6);
    ck_assert_float_eq_tol(d[0], 0.25f - 0.1f, 1e-6f);
}
END_TEST

START_TEST(host_dropout_rate)
{
    enum { N = 20000 };
    static float x[N], y[N], dx[N];
    static uint8_t m[N];
    for (int i = 0; i < N; i++)
        x[i] = 1.f;
    teng_host_dropout_fwd(x, y, m, N, 0.25f, 1234);
    int kept = 0;
    for (int i = 0; i < N; i++) {
        kept += m[i];
        ck_assert_float_eq(y[i], m[i] ? 1.f / 0.75f : 0.f);
    }
    ck_assert_int_gt(kept, (int)(0.73 * N));
    ck_assert_int_lt(kept, (int)(0.77 * N));
    teng_host_dropout_bwd(x, dx, m, N, 0.25f);
    ck_assert_float_eq(dx[0], y[0]);
    /* Same key, same mask: resume needs no saved dropout state. */
    uint8_t m2[16];
    float y2[16];
    teng_host_dropout_fwd(x, y2, m2, 16, 0.25f, 1234);
    ck_assert_int_eq(memcmp(m, m2, 16), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, shapes);
    tcase_add_test(tc, bad_graphs);
    tcase_add_test(tc, arena_chain_reuses);
    tcase_add_test(tc, arena_random);
    tcase_add_test(tc, rng_streams);
    tcase_add_test(tc, host_sgd_and_sumsq);
    tcase_add_test(tc, host_xent_by_hand);
    tcase_add_test(tc, host_dropout_rate);
    suite_add_tcase(s, tc);
    return lh_run(s);
}
