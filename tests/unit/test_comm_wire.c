/* test_comm_wire.c: fp16/bf16 wire conversion. Every SIMD variant must give
 * the same bits as the scalar reference for all 65536 half values and for
 * a spread of floats (rounding ties, overflow, subnormals, nan), and the
 * scale / inf-nan scan must be exact, alone or fused into a cast. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm/core/wire.h"
#include "trainer/comm/core/wire_isa.h"
#include "trainer/comm/core/wire_math.h"

static float _f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Floats that stress rounding: ties, near overflow, subnormals, specials. */
static size_t _inputs(float *x, size_t cap)
{
    size_t n = 0;
    for (uint32_t h = 0; h < 65536 && n < cap; h++) /* every half, exactly */
        x[n++] = tc_float_from_half((uint16_t)h);
    uint64_t s = 12345;
    while (n < cap) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(s >> 32);
        if (n % 4 == 0)
            u = (u & 0xffffe000u) | 0x1000u; /* an exact fp16 tie */
        if (n % 4 == 1)
            u = (u & 0xffff0000u) | 0x8000u; /* an exact bf16 tie */
        x[n++] = _f(u);
    }
    x[cap - 1] = 65519.0f;       /* rounds down to 65504 */
    x[cap - 2] = 65520.0f;       /* rounds up to inf */
    x[cap - 3] = 1e-8f;          /* fp16 subnormal */
    x[cap - 4] = 2.9802322e-08f; /* exactly half the smallest subnormal: to 0 */
    x[cap - 5] = NAN;
    x[cap - 6] = -INFINITY;
    return n;
}

START_TEST(test_half_reference)
{
    /* Spot values with known encodings. */
    ck_assert_uint_eq(tc_half_from_float(1.0f), 0x3c00);
    ck_assert_uint_eq(tc_half_from_float(-2.0f), 0xc000);
    ck_assert_uint_eq(tc_half_from_float(65504.0f), 0x7bff);
    ck_assert_uint_eq(tc_half_from_float(65520.0f), 0x7c00);
    ck_assert_uint_eq(tc_half_from_float(0x1p-24f), 0x0001);
    ck_assert_uint_eq(tc_half_from_float(1.0f + 0x1p-11f),
                      0x3c00); /* tie to even */
    ck_assert_uint_eq(tc_half_from_float(1.0f + 3 * 0x1p-11f), 0x3c02);
    ck_assert_uint_eq(tc_bf16_from_float(1.0f), 0x3f80);
    ck_assert_uint_eq(tc_bf16_from_float(_f(0x3f808000u)),
                      0x3f80); /* tie to even */
    ck_assert_uint_eq(tc_bf16_from_float(_f(0x3f818000u)), 0x3f82);
    /* Round trip of every non-nan half is the identity. */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tc_float_from_half((uint16_t)h);
        if (!isnan(f))
            ck_assert_uint_eq(tc_half_from_float(f), h);
    }
}
END_TEST

START_TEST(test_isa_matches_scalar)
{
    enum { N = 65536 + 40003 };
    float *x = malloc(N * 4), *ref = malloc(N * 4), *got = malloc(N * 4);
    uint16_t *wr = malloc(N * 2), *wg = malloc(N * 2);
    _inputs(x, N);
    int isa = _i; /* 1 = F16C, 2 = AVX-512 */
    for (int w = TCOMM_WIRE_FP16; w <= TCOMM_WIRE_BF16; w++) {
        ck_assert_int_eq(tc_wire_set_isa(TC_ISA_SCALAR), 0);
        tc_encode(w, x, wr, N);
        tc_decode(w, wr, ref, N);
        if (tc_wire_set_isa(isa) != 0)
            continue; /* this CPU lacks it */
        /* odd offset and length exercise the scalar tails */
        tc_encode(w, x + 1, wg + 1, N - 1);
        for (size_t i = 1; i < N; i++)
            ck_assert_msg(wg[i] == wr[i],
                          "%s isa %d: %a -> %04x, reference %04x",
                          tcomm_wire_name(w), isa, (double)x[i], wg[i], wr[i]);
        tc_decode(w, wr, got, N);
        ck_assert_int_eq(memcmp(got, ref, N * 4), 0);
        for (size_t i = 0; i < N; i++)
            got[i] = ref[i] = 0.5f;
        tc_decode_add(w, wr, got, N);
        tc_wire_set_isa(TC_ISA_SCALAR);
        tc_decode_add(w, wr, ref, N);
        ck_assert_int_eq(memcmp(got, ref, N * 4), 0);
    }
    free(x);
    free(ref);
    free(got);
    free(wr);
    free(wg);
}
END_TEST

START_TEST(test_scan_and_scale)
{
    float x[37];
    for (int i = 0; i < 37; i++)
        x[i] = (float)i;
    tc_scale(x, 37, 0.25f);
    ck_assert(x[36] == 9.0f);
    ck_assert_uint_eq(tc_count_nonfinite(x, 37), 0);
    x[3] = NAN;
    x[20] = INFINITY;
    x[36] = -INFINITY;
    ck_assert_uint_eq(tc_count_nonfinite(x, 37), 3);
    /* fp16 overflow from a sum that is finite in fp32 is reported too */
    float y[2] = {60000.0f, 1.0f};
    uint16_t t[2];
    tc_round_to_wire(TCOMM_WIRE_FP16, y, 2, t);
    ck_assert_uint_eq(tc_count_nonfinite(y, 2), 0);
    y[0] = 70000.0f;
    tc_round_to_wire(TCOMM_WIRE_FP16, y, 2, t);
    ck_assert_uint_eq(tc_count_nonfinite(y, 2), 1);
}
END_TEST

/* The casts that fold the pre-scale and the inf/nan count (tc_fold): the
 * bits and the count of the separate passes, on every wire, over more
 * values than one block so that the block edges are crossed. */
START_TEST(test_fused_passes)
{
    enum { N = 3 * 4096 + 77 };
    float *x = malloc(N * 4), *t = malloc(N * 4);
    unsigned char *a = malloc(N * 4), *b = malloc(N * 4);
    ck_assert(x && t && a && b);
    _inputs(x, N);
    tcomm_wire w = (tcomm_wire)_i;
    size_t wb = tcomm_wire_bytes(w);
    memcpy(t, x, N * 4);
    tc_scale(t, N, 1.0f / 3.0f);
    tc_encode(w, t, a, N);
    tc_encode_scaled(w, x, b, N, 1.0f / 3.0f);
    ck_assert_msg(memcmp(a, b, N * wb) == 0, "scaled cast, wire %d", _i);
    tc_encode(w, x, a, N);
    ck_assert_uint_eq(tc_encode_count(w, x, b, N), tc_count_nonfinite(x, N));
    ck_assert_msg(memcmp(a, b, N * wb) == 0, "counting cast, wire %d", _i);
    ck_assert_uint_gt(tc_count_nonfinite(x, N), 1); /* the inputs have some */
    free(x);
    free(t);
    free(a);
    free(b);
}
END_TEST

/* The NCCL transport's kernels run core/wire_math.h per element: pack
 * (pre-scale by 1/P, then cast) and unpack (widen, count inf/nan). They
 * must give the bits of the host's own path, tc_scale then tc_encode (and
 * tc_decode_count), on every ISA the host has, so a bucket cast on the
 * device is the bucket the CPU path would send. */
START_TEST(test_device_maths_match_host)
{
    enum { N = 65536 + 20011 };
    static const int ranks[] = {1, 2, 3, 7, 8, 1000};
    float *x = malloc(N * 4), *buf = malloc(N * 4), *back = malloc(N * 4);
    uint16_t *w = malloc(N * 2);
    _inputs(x, N);
    int isa = _i;
    if (tc_wire_set_isa(isa) != 0) {
        free(x), free(buf), free(back), free(w);
        return; /* this CPU lacks it: the scalar case covers the rest */
    }
    for (int wi = TCOMM_WIRE_FP16; wi <= TCOMM_WIRE_BF16; wi++)
        for (size_t k = 0; k < sizeof ranks / sizeof ranks[0]; k++) {
            float s = 1.0f / (float)ranks[k];
            memcpy(buf, x, N * 4);
            tc_scale(buf, N, s);
            tc_encode(wi, buf, w, N);
            int bf = wi == TCOMM_WIRE_BF16;
            for (size_t i = 0; i < N; i++)
                ck_assert_msg(tc_wm_pack16(x[i], s, bf) == w[i],
                              "%s isa %d P %d: %a -> %04x, host %04x",
                              tcomm_wire_name(wi), isa, ranks[k], (double)x[i],
                              tc_wm_pack16(x[i], s, bf), w[i]);
            size_t bad = tc_decode_count(wi, w, back, N), dbad = 0;
            for (size_t i = 0; i < N; i++) {
                float v = tc_wm_unpack16(w[i], bf);
                dbad += (size_t)tc_wm_nonfinite(v);
                ck_assert_msg(!memcmp(&v, &back[i], 4), "unpack %04x", w[i]);
            }
            ck_assert_uint_eq(dbad, bad);
        }
    tc_wire_set_isa(TC_ISA_SCALAR);
    free(x);
    free(buf);
    free(back);
    free(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_wire");
    TCase *t = tcase_create("wire");
    tcase_add_test(t, test_half_reference);
    tcase_add_loop_test(t, test_isa_matches_scalar, TC_ISA_F16C,
                        TC_ISA_AVX512 + 1);
    tcase_add_test(t, test_scan_and_scale);
    tcase_add_loop_test(t, test_fused_passes, TCOMM_WIRE_FP32,
                        TCOMM_WIRE_COUNT);
    tcase_add_loop_test(t, test_device_maths_match_host, TC_ISA_SCALAR,
                        TC_ISA_AVX512 + 1);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
