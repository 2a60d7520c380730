/* test_train_device.c: the rule that gives each rank of torus-train its
 * GPU (trainer/train/ttrain_device.h), with no GPU: TORUS_LOCAL_GPU wins
 * and is checked, one visible device serves every rank, otherwise the
 * local rank's device, and too few devices for the node's ranks is an
 * error naming the rank on every rank of the node. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/train/ttrain_device.h"

/* Picks for (rank, local rank, local size, visible, env); returns the
 * device or -1, *why or the error into msg. */
static int _pick(int rank, int lr, int ls, int vis, const char *env, char *msg,
                 size_t n)
{
    ttrain_device_in in = {rank, lr, ls, vis, env, "0,1,2"};
    int d = 7;
    char why[64] = "";
    int rc = ttrain_device_pick(&in, &d, why, sizeof(why));
    snprintf(msg, n, "%s", rc ? torus_error_msg() : why);
    if (rc)
        ck_assert_int_eq(d, -1); /* never a stale device on error */
    return rc ? -1 : d;
}

START_TEST(local_rank_picks)
{
    char m[512];
    for (int lr = 0; lr < 4; lr++) {
        ck_assert_int_eq(_pick(8 + lr, lr, 4, 4, NULL, m, sizeof m), lr);
        char want[32];
        snprintf(want, sizeof want, "local rank %d", lr);
        ck_assert_str_eq(m, want);
    }
    /* more devices than ranks: still the local rank's */
    ck_assert_int_eq(_pick(1, 1, 2, 8, NULL, m, sizeof m), 1);
}
END_TEST

START_TEST(one_visible_serves_all)
{
    char m[512];
    /* srun --gpus-per-task=1: every task sees its own as device 0; or two
     * ranks share one GPU on purpose (the MPI-staged 2-rank check) */
    for (int lr = 0; lr < 4; lr++) {
        ck_assert_int_eq(_pick(lr, lr, 4, 1, NULL, m, sizeof m), 0);
        ck_assert_str_eq(m, "the only visible GPU");
    }
}
END_TEST

START_TEST(too_few_devices_name_the_rank)
{
    char m[512];
    /* 4 ranks, 2 GPUs: every rank of the node refuses, also local rank 0,
     * which has a device, so no rank trains while another aborts */
    for (int lr = 0; lr < 4; lr++) {
        ck_assert_int_eq(_pick(12 + lr, lr, 4, 2, NULL, m, sizeof m), -1);
        char want[96];
        snprintf(want, sizeof want,
                 "rank %d: local rank %d of 4 ranks on this node, but 2 GPUs",
                 12 + lr, lr);
        ck_assert_msg(strstr(m, want), "%s", m);
        ck_assert_msg(strstr(m, "CUDA_VISIBLE_DEVICES=0,1,2"), "%s", m);
        ck_assert_msg(strstr(m, "TORUS_LOCAL_GPU"), "%s", m);
    }
    ck_assert_int_eq(_pick(3, 0, 1, 0, NULL, m, sizeof m), -1);
    ck_assert_msg(strstr(m, "rank 3: no GPU visible"), "%s", m);
    /* an inconsistent local rank is refused, not used as an index */
    ck_assert_int_eq(_pick(0, 5, 4, 8, NULL, m, sizeof m), -1);
    ck_assert_int_eq(_pick(0, -1, 4, 8, NULL, m, sizeof m), -1);
}
END_TEST

START_TEST(torus_local_gpu_wins_and_is_checked)
{
    char m[512];
    /* the plugin's pick wins over the local rank, even with few devices */
    ck_assert_int_eq(_pick(5, 3, 4, 2, "1", m, sizeof m), 1);
    ck_assert_str_eq(m, "TORUS_LOCAL_GPU=1");
    ck_assert_int_eq(_pick(5, 0, 1, 1, "0", m, sizeof m), 0);
    static const char *const bad[] = {
        "2", "-1", "", "1x", " 1", "0x1", "99999999999999999999", "one"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(_pick(6, 0, 2, 2, bad[i], m, sizeof m), -1);
        char want[96];
        snprintf(want, sizeof want,
                 "rank 6: TORUS_LOCAL_GPU='%s' is not a device index in "
                 "[0, 2)",
                 bad[i]);
        ck_assert_msg(strstr(m, want), "%s: %s", bad[i], m);
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("train_device");
    TCase *tc = tcase_create("train_device");
    tcase_add_test(tc, local_rank_picks);
    tcase_add_test(tc, one_visible_serves_all);
    tcase_add_test(tc, too_few_devices_name_the_rank);
    tcase_add_test(tc, torus_local_gpu_wins_and_is_checked);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
