/* test_cuda_vec.c: the host-checkable parts of the cuda backend's vector
 * kernels (cuda_kernels.cu), without a GPU: the alignment rule that picks
 * the 16-byte kernels (tcuda_vec_aligned, cuda_math.h), and the
 * warp-per-row softmax cross-entropy, whose lanes run elem_math.h's
 * teng_xent_lane_* and combine across the warp as the kernel's shuffles
 * do (the butterfly, then lane 0's value): emulated here lane by lane on
 * the CPU and compared with the host's row (teng_xent_row): the loss
 * within fp64 rounding of the sum's order, the gradient within one fp32
 * rounding, a nan logit where the host has one; and the loss-scale
 * check's inf/nan count with 16-byte loads (optim_math.h) against the
 * scalar count over every alignment of a chunk. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/backends/cuda/cuda_math.h"
#include "trainer/backends/cuda/optim_math.h"
#include "trainer/engine/rng.h"

START_TEST(alignment_rule)
{
    _Alignas(16) unsigned char buf[64];
    const void *p[3] = {buf, buf + 16, buf + 48};
    ck_assert_int_eq(tcuda_vec_aligned(p, 3), 1);
    for (int off = 1; off < 16; off++) {
        p[1] = buf + 16 + off;
        ck_assert_int_eq(tcuda_vec_aligned(p, 3), 0);
        ck_assert_int_eq(tcuda_vec_aligned(p, 1), 1); /* only the first */
    }
    ck_assert_int_eq(tcuda_vec_aligned(p, 0), 1);
}
END_TEST

#define LANES 32

/* The kernel's butterfly over 32 lanes (v[l] op= v[l ^ o], o = 16..1),
 * then lane 0's value, as _warp_sum does. */
static double _warp_sum(double v[LANES])
{
    for (int o = 16; o; o >>= 1) {
        double t[LANES];
        for (int l = 0; l < LANES; l++)
            t[l] = v[l] + v[l ^ o];
        memcpy(v, t, sizeof t);
    }
    return v[0];
}

static float _warp_max(float v[LANES])
{
    for (int o = 16; o; o >>= 1) {
        float t[LANES];
        for (int l = 0; l < LANES; l++)
            t[l] = v[l ^ o] > v[l] ? v[l ^ o] : v[l];
        memcpy(v, t, sizeof t);
    }
    return v[0];
}

/* _xent_warp_row, lane by lane. */
static double _warp_row(const float *z, int k, int32_t label, float s,
                        float norm, float *dz)
{
    float m[LANES];
    double a[LANES], b[LANES];
    for (int l = 0; l < LANES; l++)
        m[l] = teng_xent_lane_max(z, k, l, LANES);
    float zmax = _warp_max(m);
    for (int l = 0; l < LANES; l++)
        a[l] = teng_xent_lane_sum(z, k, zmax, l, LANES);
    double lse = log(_warp_sum(a)) + zmax;
    for (int l = 0; l < LANES; l++)
        b[l] = teng_xent_lane_loss(z, k, label, s, lse, l, LANES);
    for (int j = 0; j < k; j++)
        dz[j] = teng_xent_grad(z[j], lse, teng_xent_target(j, label, s, k),
                               norm);
    return _warp_sum(b);
}

START_TEST(warp_row_matches_host)
{
    const int ks[] = {1, 7, 32, 33, 1000};
    float z[1000], dzh[1000], dzw[1000];
    teng_rng st;
    teng_rng_seed(&st, 42);
    for (int c = 0; c < 5; c++)
        for (int r = 0; r < 20; r++) {
            int k = ks[c];
            for (int j = 0; j < k; j++)
                z[j] = teng_rng_uniform(&st) * 40.0f - 20.0f;
            int32_t label = (int32_t)(r % k);
            float s = r % 2 ? 0.1f : 0.0f, norm = 256.0f;
            double lh = teng_xent_row(z, k, label, s, norm, dzh);
            double lw = _warp_row(z, k, label, s, norm, dzw);
            ck_assert_msg(fabs(lh - lw) <= 1e-12 * fabs(lh) + 1e-300,
                          "k %d row %d: loss %.17g vs %.17g", k, r, lh, lw);
            for (int j = 0; j < k; j++)
                ck_assert_msg(fabsf(dzh[j] - dzw[j]) <=
                                  2e-7f * fabsf(dzh[j]) + 1e-30f,
                              "k %d: dz[%d] %.9g vs %.9g", k, j, dzh[j],
                              dzw[j]);
        }
    /* A nan logit: the host's loop and the lanes both end in nan. */
    for (int j = 0; j < 64; j++)
        z[j] = (float)j;
    z[0] = NAN;
    ck_assert(isnan(teng_xent_row(z, 64, 3, 0.0f, 1.0f, dzh)));
    ck_assert(isnan(_warp_row(z, 64, 3, 0.0f, 1.0f, dzw)));
    z[0] = 0.0f;
    z[40] = NAN;
    ck_assert(isnan(teng_xent_row(z, 64, 3, 0.0f, 1.0f, dzh)));
    ck_assert(isnan(_warp_row(z, 64, 3, 0.0f, 1.0f, dzw)));
}
END_TEST

/* The loss-scale check's inf/nan count with 16-byte loads: over all the
 * threads of a chunk, the scalar count, whatever the chunk's alignment. */
START_TEST(nonfinite_count_vector)
{
    _Alignas(16) float g[1031];
    for (int i = 0; i < 1031; i++)
        g[i] = (float)i;
    for (int i = 0; i < 1031; i++) /* dense: heads and tails hold some */
        if (i % 5 == 0 || i % 7 == 3)
            g[i] = i % 2 ? INFINITY : NAN;
    g[1030] = -INFINITY;
    const unsigned nts[] = {1, 3, 256};
    for (int base = 0; base < 4; base++) {
        tcuda_dparam p = {0};
        p.grad = g + base;
        for (uint64_t b = 0; b < 9; b++)
            for (uint64_t e = b; e <= 1031 - (uint64_t)base; e += 97)
                for (int c = 0; c < 3; c++) {
                    unsigned s1 = 0, s2 = 0;
                    for (unsigned t = 0; t < nts[c]; t++) {
                        s1 += tcuda_nonfinite_thread(&p, b, e, t, nts[c]);
                        s2 += tcuda_nonfinite_thread_v(&p, b, e, t, nts[c]);
                    }
                    ck_assert_msg(s1 == s2, "base %d [%d, %d) nt %u: %u vs %u",
                                  base, (int)b, (int)e, nts[c], s1, s2);
                }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_vec");
    TCase *tc = tcase_create("cuda_vec");
    tcase_add_test(tc, alignment_rule);
    tcase_add_test(tc, warp_row_matches_host);
    tcase_add_test(tc, nonfinite_count_vector);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
