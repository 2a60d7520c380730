/* test_data_transform.c: RandomResizedCrop draws, the eval centre crop,
 * the DCT scale choice, antialiased resize, fp16 conversion and the final
 * flip/normalise/layout write. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/read/read.h"
#include "tests/unit/test_data_main.h"

START_TEST(test_rrc_bounds)
{
    tdata_rng r = {99};
    const int W = 500, H = 375;
    double asum = 0;
    int flat = 0, tall = 0;
    for (int i = 0; i < 20000; i++) {
        tdata_crop c;
        tdata_rrc(&r, W, H, 0.08, 1.0, 3.0 / 4, 4.0 / 3, &c);
        ck_assert(c.x >= 0 && c.y >= 0 && c.w >= 1 && c.h >= 1);
        ck_assert(c.x + c.w <= W && c.y + c.h <= H);
        double a = c.w * c.h / (W * (double)H), ar = c.w / c.h;
        /* lround() of w and h moves area and ratio a little. */
        ck_assert(a > 0.075 && a < 1.0001);
        ck_assert(ar > 0.74 && ar < 1.35);
        asum += a;
        flat += ar > 1.1;
        tall += ar < 0.9;
    }
    /* Large crops are often rejected (they do not fit), so the mean area
     * is a bit below the 0.54 of U(0.08, 1). */
    ck_assert(asum / 20000 > 0.35 && asum / 20000 < 0.56);
    ck_assert_int_gt(flat, 2000);
    ck_assert_int_gt(tall, 2000);
}
END_TEST

START_TEST(test_rrc_fallback)
{
    tdata_rng r = {5};
    tdata_crop c;
    /* Aspect 100: no draw fits; the largest centred 4/3 crop is used. */
    tdata_rrc(&r, 1000, 10, 0.08, 1.0, 3.0 / 4, 4.0 / 3, &c);
    ck_assert_double_eq(c.h, 10);
    ck_assert_double_eq(c.w, 13);
    ck_assert_double_eq(c.x, floor((1000 - 13) / 2.0));
}
END_TEST

START_TEST(test_center_crop)
{
    tdata_crop c;
    tdata_center_crop(500, 375, 256, 224, 224, &c);
    double s = 256.0 / 375;
    ck_assert_double_eq_tol(c.w, 224 / s, 1e-9);
    ck_assert_double_eq_tol(c.h, 224 / s, 1e-9);
    ck_assert_double_eq_tol(c.x, (500 - 224 / s) / 2, 1e-9);
    ck_assert_double_eq_tol(c.y, (375 - 224 / s) / 2, 1e-9);
    ck_assert_int_eq(c.flip, 0);
}
END_TEST

START_TEST(test_dct_scale)
{
    ck_assert_int_eq(tdata_dct_scale(1792, 1792, 224, 224), 1);
    ck_assert_int_eq(tdata_dct_scale(800, 800, 224, 224), 4);
    ck_assert_int_eq(tdata_dct_scale(1000, 900, 224, 224), 2);
    ck_assert_int_eq(tdata_dct_scale(448, 500, 224, 224), 4);
    ck_assert_int_eq(tdata_dct_scale(447, 500, 224, 224), 8);
    ck_assert_int_eq(tdata_dct_scale(300, 300, 224, 224), 8);
    ck_assert_int_eq(tdata_dct_scale(100, 100, 224, 224), 8);
}
END_TEST

START_TEST(test_resize)
{
    tdata_scratch sc = {0};
    const int W = 64, H = 48;
    uint8_t *src = malloc(W * H * 3), *dst = malloc(W * H * 3);
    /* A constant image stays constant at any size. */
    memset(src, 77, W * H * 3);
    tdata_resize(src, W, H, W * 3, 3, 0, 0, W, H, dst, 20, 30, &sc);
    for (int i = 0; i < 20 * 30 * 3; i++)
        ck_assert_int_eq(dst[i], 77);
    /* Same size, whole box: an exact copy. */
    for (int i = 0; i < W * H * 3; i++)
        src[i] = (uint8_t)(i * 31 + 7);
    tdata_resize(src, W, H, W * 3, 3, 0, 0, W, H, dst, W, H, &sc);
    ck_assert(memcmp(src, dst, W * H * 3) == 0);
    /* Columns alternating 0/255 average to ~128 at half size (antialias:
     * plain bilinear sampling would alias to 0 or 255). */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            memset(src + (y * W + x) * 3, x & 1 ? 255 : 0, 3);
    tdata_resize(src, W, H, W * 3, 3, 0, 0, W, H, dst, W / 2, H / 2, &sc);
    for (int i = 3 * 2; i < (W / 2 - 1) * 3; i++)
        ck_assert_int_le(abs(dst[i] - 128), 2);
    /* A box: the crop of a horizontal ramp stays a ramp of that part. */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            memset(src + (y * W + x) * 3, x * 4, 3);
    tdata_resize(src, W, H, W * 3, 3, 16, 8, 48, 40, dst, 32, 32, &sc);
    for (int x = 0; x < 32; x++)
        ck_assert_int_le(abs(dst[(5 * 32 + x) * 3] - (16 + x) * 4), 1);
    free(src);
    free(dst);
    tdata_scratch_free(&sc);
}
END_TEST

START_TEST(test_f16)
{
    ck_assert_uint_eq(tdata_f32_to_f16(1.0f), 0x3C00);
    ck_assert_uint_eq(tdata_f32_to_f16(-2.0f), 0xC000);
    ck_assert_uint_eq(tdata_f32_to_f16(65504.0f), 0x7BFF);
    ck_assert_uint_eq(tdata_f32_to_f16(1e6f), 0x7C00);
    ck_assert_uint_eq(tdata_f32_to_f16(0.1f), 0x2E66);
    ck_assert_uint_eq(tdata_f32_to_f16(1e-9f), 0);
    ck_assert_uint_eq(tdata_f32_to_f16(5.9604645e-8f), 0x0001);
    for (float f = -8; f < 8; f += 0.01f) {
        float back = tdata_f16_to_f32(tdata_f32_to_f16(f));
        ck_assert(fabsf(back - f) <= fabsf(f) / 1024 + 1e-7f);
    }
}
END_TEST

START_TEST(test_emit_layouts)
{
    /* 2x2 RGB: pixel (x, y) = (10x+y, 100+x, 200+y). */
    uint8_t src[12];
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 2; x++) {
            uint8_t *p = src + (y * 2 + x) * 3;
            p[0] = (uint8_t)(10 * x + y);
            p[1] = (uint8_t)(100 + x);
            p[2] = (uint8_t)(200 + y);
        }
    float sc[3] = {2, 1, 0.5f}, bi[3] = {-1, 0, 1};
    float nchw[12], nhwc[12];
    uint16_t h16[12];
    tdata_emit(src, 2, 2, 3, 1, TDATA_NCHW, TDATA_F32, sc, bi, nchw);
    tdata_emit(src, 2, 2, 3, 1, TDATA_NHWC, TDATA_F32, sc, bi, nhwc);
    tdata_emit(src, 2, 2, 3, 1, TDATA_NCHW, TDATA_F16, sc, bi, h16);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 2; x++) {
                /* flipped: output x reads source 1-x */
                float want = src[(y * 2 + (1 - x)) * 3 + c] * sc[c] + bi[c];
                ck_assert_float_eq(nchw[c * 4 + y * 2 + x], want);
                ck_assert_float_eq(nhwc[(y * 2 + x) * 3 + c], want);
                ck_assert_float_eq_tol(tdata_f16_to_f32(h16[c * 4 + y * 2 + x]),
                                       want, fabsf(want) / 512);
            }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data_transform");
    TCase *tc = tcase_create("transform");
    tcase_add_test(tc, test_rrc_bounds);
    tcase_add_test(tc, test_rrc_fallback);
    tcase_add_test(tc, test_center_crop);
    tcase_add_test(tc, test_dct_scale);
    tcase_add_test(tc, test_resize);
    tcase_add_test(tc, test_f16);
    tcase_add_test(tc, test_emit_layouts);
    suite_add_tcase(s, tc);
    return tdata_test_run(s);
}
