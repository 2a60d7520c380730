/* test_train_hooks.c: torus-train's fault injection for the tests
 * (trainer/train/ttrain_test_hooks.h). Built twice from
 * train/test_hooks.c: as configured (hooks on, as every test build) the
 * variables inject what they say and nothing else; built with
 * TORUS_NO_TEST_HOOKS (test_train_hooks_off, as the Debian package is
 * built) the same variables do nothing (TTRAIN_TEST_SERVED writes no
 * file). */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "trainer/train/ttrain_test_hooks.h"

#ifdef TORUS_NO_TEST_HOOKS
#define ON 0
#else
#define ON 1
#endif

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

START_TEST(overflow_at_its_rank_and_step)
{
    setenv("TTRAIN_TEST_OVERFLOW", "1:5", 1);
    ck_assert_int_eq(ttrain_test_overflow(1, 5), ON);
    ck_assert_int_eq(ttrain_test_overflow(0, 5), 0);
    ck_assert_int_eq(ttrain_test_overflow(1, 4), 0);
    setenv("TTRAIN_TEST_OVERFLOW", "2:0", 1); /* every step */
    ck_assert_int_eq(ttrain_test_overflow(2, 123), ON);
    setenv("TTRAIN_TEST_OVERFLOW", "junk", 1);
    ck_assert_int_eq(ttrain_test_overflow(2, 123), 0);
    unsetenv("TTRAIN_TEST_OVERFLOW");
    ck_assert_int_eq(ttrain_test_overflow(1, 5), 0);
}
END_TEST

START_TEST(sleep_where_asked_only)
{
    setenv("TTRAIN_TEST_SLEEP", "step:0:3:0.3", 1);
    double t0 = _now();
    ttrain_test_sleep("ckpt", 0, 3); /* another place */
    ttrain_test_sleep("step", 1, 3); /* another rank */
    ttrain_test_sleep("step", 0, 4); /* another step */
    ck_assert(_now() - t0 < 0.2);
    t0 = _now();
    ttrain_test_sleep("step", 0, 3);
    double slept = _now() - t0;
    if (ON)
        ck_assert_msg(slept >= 0.29, "slept %g s", slept);
    else
        ck_assert_msg(slept < 0.2, "slept %g s", slept);
    setenv("TTRAIN_TEST_SLEEP", "step:0:3:99999", 1); /* over an hour */
    t0 = _now();
    ttrain_test_sleep("step", 0, 3);
    ck_assert(_now() - t0 < 0.2);
    unsetenv("TTRAIN_TEST_SLEEP");
}
END_TEST

START_TEST(served_ids_recorded_per_rank)
{
    char dir[] = "/tmp/test_train_hooks.XXXXXX", path[64], line[128] = "";
    const uint64_t ids[3] = {7, 0, 12345678901ULL};
    ck_assert_ptr_nonnull(mkdtemp(dir));
    setenv("TTRAIN_TEST_SERVED", dir, 1);
    ttrain_test_served(3, 1, 4, ids, 3);
    ttrain_test_served(3, 1, 5, ids, 1); /* appended */
    unsetenv("TTRAIN_TEST_SERVED");
    ttrain_test_served(3, 9, 9, ids, 3); /* no variable: nothing */
    snprintf(path, sizeof(path), "%s/served-3.txt", dir);
    FILE *f = fopen(path, "r");
    ck_assert_int_eq(f != NULL, ON);
    if (f) {
        ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
        ck_assert_str_eq(line, "1 4 7 0 12345678901\n");
        ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
        ck_assert_str_eq(line, "1 5 7\n");
        ck_assert_ptr_null(fgets(line, sizeof(line), f));
        fclose(f);
        remove(path);
    }
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("train_hooks");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, overflow_at_its_rank_and_step);
    tcase_add_test(tc, sleep_where_asked_only);
    tcase_add_test(tc, served_ids_recorded_per_rank);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
