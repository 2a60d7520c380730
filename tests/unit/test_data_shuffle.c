/* test_data_shuffle.c: the per-epoch permutation and its k slices: a true
 * permutation, the same for the same (seed, epoch), different across
 * epochs and seeds; slices disjoint and covering the epoch. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "data/read/read.h"
#include "tests/unit/test_data_main.h"

START_TEST(test_is_permutation)
{
    const uint64_t n = 10007;
    uint64_t *p = malloc(n * sizeof *p);
    uint8_t *seen = calloc(n, 1);
    tdata_perm(42, 3, n, p);
    for (uint64_t i = 0; i < n; i++) {
        ck_assert_uint_lt(p[i], n);
        ck_assert_uint_eq(seen[p[i]], 0);
        seen[p[i]] = 1;
    }
    /* Not the identity, and not a rotation: few fixed points. */
    uint64_t fixed = 0;
    for (uint64_t i = 0; i < n; i++)
        fixed += p[i] == i;
    ck_assert_uint_lt(fixed, 20);
    free(p);
    free(seen);
}
END_TEST

START_TEST(test_reproducible_and_epoch_dependent)
{
    const uint64_t n = 5000;
    uint64_t *a = malloc(n * 8), *b = malloc(n * 8), *c = malloc(n * 8),
             *d = malloc(n * 8);
    tdata_perm(7, 1, n, a);
    tdata_perm(7, 1, n, b);
    tdata_perm(7, 2, n, c);
    tdata_perm(8, 1, n, d);
    ck_assert(memcmp(a, b, n * 8) == 0);
    uint64_t same_c = 0, same_d = 0;
    for (uint64_t i = 0; i < n; i++) {
        same_c += a[i] == c[i];
        same_d += a[i] == d[i];
    }
    ck_assert_uint_lt(same_c, 20);
    ck_assert_uint_lt(same_d, 20);
    free(a);
    free(b);
    free(c);
    free(d);
}
END_TEST

START_TEST(test_partition)
{
    const uint64_t n = 1003;
    for (int k = 1; k <= 9; k++) {
        /* Uneven: contiguous, disjoint, covering everything. */
        uint64_t prev = 0;
        for (int r = 0; r < k; r++) {
            uint64_t b, e;
            tdata_partition(n, k, r, 0, &b, &e);
            ck_assert_uint_eq(b, prev);
            ck_assert_uint_le(e - b, n / k + 1);
            prev = e;
        }
        ck_assert_uint_eq(prev, n);
        /* Even: all the same size, disjoint, n mod k dropped. */
        prev = 0;
        for (int r = 0; r < k; r++) {
            uint64_t b, e;
            tdata_partition(n, k, r, 1, &b, &e);
            ck_assert_uint_eq(b, prev);
            ck_assert_uint_eq(e - b, n / k);
            prev = e;
        }
        ck_assert_uint_eq(n - prev, n % k);
    }
}
END_TEST

START_TEST(test_slices_of_permutation_cover_epoch)
{
    const uint64_t n = 4096;
    const int k = 6;
    uint64_t *p = malloc(n * 8);
    uint8_t *seen = calloc(n, 1);
    tdata_perm(1, 0, n, p);
    for (int r = 0; r < k; r++) {
        uint64_t b, e;
        tdata_partition(n, k, r, 0, &b, &e);
        for (uint64_t i = b; i < e; i++) {
            ck_assert_uint_eq(seen[p[i]], 0);
            seen[p[i]] = (uint8_t)(r + 1);
        }
    }
    for (uint64_t i = 0; i < n; i++)
        ck_assert_uint_ne(seen[i], 0);
    free(p);
    free(seen);
}
END_TEST

START_TEST(test_rng_uniform)
{
    tdata_rng r = {123};
    double sum = 0;
    int bins[10] = {0};
    for (int i = 0; i < 100000; i++) {
        double u = tdata_rng_uniform(&r);
        ck_assert(u >= 0 && u < 1);
        sum += u;
        bins[(int)(u * 10)]++;
    }
    ck_assert_double_eq_tol(sum / 100000, 0.5, 0.01);
    for (int b = 0; b < 10; b++)
        ck_assert_int_gt(bins[b], 9500);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data_shuffle");
    TCase *tc = tcase_create("shuffle");
    tcase_add_test(tc, test_is_permutation);
    tcase_add_test(tc, test_reproducible_and_epoch_dependent);
    tcase_add_test(tc, test_partition);
    tcase_add_test(tc, test_slices_of_permutation_cover_epoch);
    tcase_add_test(tc, test_rng_uniform);
    suite_add_tcase(s, tc);
    return tdata_test_run(s);
}
