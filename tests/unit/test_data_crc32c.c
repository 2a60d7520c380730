/* test_data_crc32c.c: CRC32C against the standard check values, and the
 * SSE4.2 path against the portable table at every length and alignment. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "data/tdata.h"
#include "tests/unit/test_data_main.h"

START_TEST(test_check_values)
{
    /* RFC 3720 (iSCSI) B.4 and the usual "123456789" check value. */
    ck_assert_uint_eq(tdata_crc32c(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(tdata_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    uint8_t z[32], o[32], inc[32];
    memset(z, 0, 32);
    memset(o, 0xff, 32);
    for (int i = 0; i < 32; i++)
        inc[i] = (uint8_t)i;
    ck_assert_uint_eq(tdata_crc32c(0, z, 32), 0x8A9136AAu);
    ck_assert_uint_eq(tdata_crc32c(0, o, 32), 0x62A8AB43u);
    ck_assert_uint_eq(tdata_crc32c(0, inc, 32), 0x46DD794Eu);
    ck_assert_uint_eq(tdata_crc32c(0, "", 0), 0u);
}
END_TEST

START_TEST(test_hw_equals_sw)
{
    uint8_t *buf = malloc(4096 + 16);
    srand(12345);
    for (int i = 0; i < 4096 + 16; i++)
        buf[i] = (uint8_t)rand();
    for (int off = 0; off < 8; off++)
        for (size_t len = 0; len < 600; len += 7)
            ck_assert_uint_eq(tdata_crc32c(0, buf + off, len),
                              tdata_crc32c_sw(0, buf + off, len));
    free(buf);
}
END_TEST

START_TEST(test_incremental)
{
    const char *s = "The quick brown fox jumps over the lazy dog";
    size_t n = strlen(s);
    uint32_t whole = tdata_crc32c(0, s, n);
    for (size_t cut = 0; cut <= n; cut++)
        ck_assert_uint_eq(
            tdata_crc32c(tdata_crc32c(0, s, cut), s + cut, n - cut), whole);
    ck_assert_uint_eq(whole, 0x22620404u);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data_crc32c");
    TCase *tc = tcase_create("crc32c");
    tcase_add_test(tc, test_check_values);
    tcase_add_test(tc, test_hw_equals_sw);
    tcase_add_test(tc, test_incremental);
    suite_add_tcase(s, tc);
    return tdata_test_run(s);
}
