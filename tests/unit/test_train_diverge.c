/* test_train_diverge.c: the divergence rule on a finite loss
 * (trainer/train/ttrain_diverge.h, --diverge-loss): off does nothing
 * whatever the loss; a point at or below the limit starts the count
 * again, so one noisy window passes; a window of skipped steps (NaN)
 * neither counts nor resets; an infinite loss counts; the points-th in a
 * row stops with TTRAIN_EDIVERGED, a message naming the steps, the loss
 * and the limit, and the "diverged" record in the metrics file. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "trainer/train/ttrain_diverge.h"
#include "trainer/train/ttrain_error.h"

/* Feeds losses[i] at global step 10 * (i + 1); the index of the point
 * that stopped the run, or -1. */
static int _feed(ttrain_diverge *d, const double *loss, int n)
{
    for (int i = 0; i < n; i++) {
        int rc = ttrain_diverge_check(d, 10L * (i + 1), 0.5, loss[i]);
        if (rc) {
            ck_assert_int_eq(rc, TTRAIN_EDIVERGED);
            return i;
        }
    }
    return -1;
}

START_TEST(off_never_stops)
{
    ttrain_diverge d = {.limit = 0, .points = 1};
    const double l[] = {1e30, INFINITY, 1e300};
    ck_assert(!ttrain_diverge_on(&d));
    ck_assert_int_eq(_feed(&d, l, 3), -1);
}
END_TEST

START_TEST(a_spike_passes_a_run_above_stops)
{
    ttrain_diverge d = {.limit = 20, .points = 3};
    /* 50 50 then 20 (at the limit: not above) starts again; NaN keeps
     * the count; then 21, inf, 30 are three in a row. */
    const double l[] = {2.3, 50, 50, 20, 21, NAN, INFINITY, 30, 2};
    ck_assert(ttrain_diverge_on(&d));
    ck_assert_int_eq(_feed(&d, l, 9), 7);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(),
                                 "training diverged: global step 80: the "
                                 "training loss 30 is above --diverge-loss "
                                 "20 at 3 progress points in a row (global "
                                 "steps 50 to 80; lr 0.5)"));
}
END_TEST

START_TEST(one_point_and_the_record)
{
    char p[512], text[256] = "";
    const char *dir = getenv("TMPDIR");
    snprintf(p, sizeof p, "%s/test_train_diverge.%d.jsonl", dir ? dir : "/tmp",
             (int)getpid());
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    ttrain_diverge d = {.limit = 5, .points = 1, .mf = f};
    const double l[] = {4, 5, 5.5};
    ck_assert_int_eq(_feed(&d, l, 3), 2);
    fclose(f);
    f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(text, sizeof text, f));
    fclose(f);
    remove(p);
    ck_assert_str_eq(text, "{\"diverged\":1,\"global_step\":30}\n");
}
END_TEST

int main(void)
{
    Suite *su = suite_create("train_diverge");
    TCase *tc = tcase_create("train_diverge");
    tcase_add_test(tc, off_never_stops);
    tcase_add_test(tc, a_spike_passes_a_run_above_stops);
    tcase_add_test(tc, one_point_and_the_record);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
