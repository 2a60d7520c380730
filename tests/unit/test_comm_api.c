/* test_comm_api.c: libtoruscomm's exported API (trainer/comm/api/), linked
 * as the shared library the Python hooks load: known fp16/bf16 encodings
 * and decodings, the fused decode-and-add, the scale-and-round of a
 * rank's own values, the refusal of an unknown wire
 * code or a NULL buffer (nothing written), and that libtcomm's internal
 * kernels are not exported beside the API. */
#include <check.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "trainer/comm/api/tcomm_api.h"

START_TEST(test_version_isa)
{
    ck_assert_uint_eq(tcomm_api_version(), TCOMM_API_VERSION);
    const char *isa = tcomm_api_isa();
    ck_assert(strcmp(isa, "avx512") == 0 || strcmp(isa, "f16c") == 0 ||
              strcmp(isa, "scalar") == 0);
}
END_TEST

START_TEST(test_fp16_bf16)
{
    /* 37 values: enough for every SIMD variant's main loop and its tail. */
    float x[37], back[37];
    uint16_t h[37], b[37];
    for (int i = 0; i < 37; i++)
        x[i] = (float)(i - 18) * 0.25f;
    x[0] = 65520.0f;          /* above fp16's range: inf */
    x[1] = 1.0f / 3.0f;       /* fp16 0x3555, bf16 0x3eab */
    ck_assert_int_eq(tcomm_api_encode(1, x, h, 37), 0);
    ck_assert_int_eq(tcomm_api_encode(2, x, b, 37), 0);
    ck_assert_uint_eq(h[0], 0x7c00);
    ck_assert_uint_eq(h[1], 0x3555);
    ck_assert_uint_eq(b[1], 0x3eab);
    ck_assert_uint_eq(h[22], 0x3c00); /* 1.0 */
    ck_assert_uint_eq(b[22], 0x3f80);
    ck_assert_int_eq(tcomm_api_decode(1, h, back, 37), 0);
    for (int i = 2; i < 37; i++) /* quarter steps are exact in fp16 */
        ck_assert_float_eq(back[i], x[i]);
    float acc[37];
    for (int i = 0; i < 37; i++)
        acc[i] = 1.5f;
    ck_assert_int_eq(tcomm_api_decode_add(1, h, acc, 37), 0);
    for (int i = 2; i < 37; i++)
        ck_assert_float_eq(acc[i], 1.5f + x[i]);
    ck_assert_int_eq(tcomm_api_decode_add(0, x, acc, 37), 0); /* fp32 wire */
    ck_assert_float_eq(acc[36], 1.5f + 2 * x[36]);
}
END_TEST

START_TEST(test_scale_round)
{
    /* 5000 values: more than one of the function's 4096-value blocks. */
    static float x[5000], y[5000];
    uint16_t h;
    for (int i = 0; i < 5000; i++)
        x[i] = y[i] = 1.0f + (float)i / 3.0f;
    ck_assert_int_eq(tcomm_api_scale_round(1, x, 5000, 0.25f), 0);
    ck_assert_int_eq(tcomm_api_scale_round(0, y, 5000, 0.25f), 0);
    for (int i = 0; i < 5000; i++) {
        ck_assert_float_eq(y[i], (1.0f + (float)i / 3.0f) * 0.25f);
        float want;
        tcomm_api_encode(1, &y[i], &h, 1);
        tcomm_api_decode(1, &h, &want, 1);
        ck_assert_float_eq(x[i], want); /* scaled, then fp16's value */
    }
    ck_assert_float_ne(x[1], y[1]); /* 1/3 is not an fp16 value */
}
END_TEST

START_TEST(test_refusals)
{
    float x[4] = {1, 2, 3, 4}, acc[4] = {0};
    uint16_t h[4] = {7, 7, 7, 7};
    ck_assert_int_eq(tcomm_api_encode(3, x, h, 4), TCOMM_API_EINVAL);
    ck_assert_int_eq(tcomm_api_encode(-1, x, h, 4), TCOMM_API_EINVAL);
    ck_assert_int_eq(tcomm_api_decode_add(1, NULL, acc, 4), TCOMM_API_EINVAL);
    ck_assert_int_eq(tcomm_api_decode(1, h, NULL, 4), TCOMM_API_EINVAL);
    ck_assert_int_eq(tcomm_api_encode(1, NULL, NULL, 0), 0);
    ck_assert_int_eq(tcomm_api_scale_round(7, x, 4, 2.0f), TCOMM_API_EINVAL);
    ck_assert_float_eq(x[3], 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(h[i], 7);
        ck_assert_float_eq(acc[i], 0);
    }
}
END_TEST

START_TEST(test_exports)
{
    ck_assert_ptr_nonnull(dlsym(RTLD_DEFAULT, "tcomm_api_encode"));
    ck_assert_ptr_null(dlsym(RTLD_DEFAULT, "tc_encode"));
    ck_assert_ptr_null(dlsym(RTLD_DEFAULT, "tcomm_wire_bytes"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_api");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, test_version_isa);
    tcase_add_test(tc, test_fp16_bf16);
    tcase_add_test(tc, test_scale_round);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_exports);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
