/* test_train_device.c: the rule that gives each rank of torus-train its
 * GPU (trainer/train/ttrain_device.h), with no GPU: TORUS_LOCAL_GPU wins
 * and is checked, one visible device serves every rank, otherwise the
 * local rank's device, a subset per task (--gpu-bind=closest) picked by
 * the local rank when the step holds a GPU per rank, and too few devices
 * for the node's ranks is an error naming the rank on every rank of the
 * node. Also which variables say that Slurm granted GPUs, and the stop of
 * a step granted GPUs that --backend auto cannot use. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/train/ttrain_device.h"
#include "trainer/train/ttrain_error.h"

/* Picks for (rank, local rank, local size, visible, env); returns the
 * device or -1, *why or the error into msg. */
static int _pick(int rank, int lr, int ls, int vis, const char *env, char *msg,
                 size_t n)
{
    ttrain_device_in in = {rank, lr, ls, vis, env, "0,1,2", 0};
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

START_TEST(subset_per_task_by_local_rank)
{
    /* --gpu-bind=closest on 8 GPUs and 8 ranks, 2 sockets: each task sees
     * the 4 of its socket; the step holds 8 on the node */
    int seen[8] = {0};
    for (int lr = 0; lr < 8; lr++) {
        ttrain_device_in in = {lr, lr, 8, 4, NULL, lr < 4 ? "0,1,2,3" : "4,5,6,7",
                               8};
        int d = -1;
        char why[64];
        ck_assert_int_eq(ttrain_device_pick(&in, &d, why, sizeof why), 0);
        ck_assert_int_eq(d, lr % 4);
        seen[(lr < 4 ? 0 : 4) + d]++; /* the physical GPU it lands on */
        char want[64];
        snprintf(want, sizeof want, "local rank %d of 8, 4 visible", lr);
        ck_assert_str_eq(why, want);
    }
    for (int g = 0; g < 8; g++)
        ck_assert_int_eq(seen[g], 1); /* every rank its own GPU */
    /* the same view without a grant of one per rank is oversubscription */
    ttrain_device_in in = {9, 5, 8, 4, NULL, "4,5,6,7", 4};
    int d;
    char why[64];
    ck_assert_int_eq(ttrain_device_pick(&in, &d, why, sizeof why),
                     TTRAIN_EDEVICE);
    ck_assert_msg(strstr(torus_error_msg(), "granted 4 on this node"), "%s",
                  torus_error_msg());
}
END_TEST

/* A fake environment for ttrain_device_granted: NAME=VALUE pairs. */
static const char *_env_tab[8];
static const char *_fake_getenv(const char *name)
{
    for (int i = 0; _env_tab[i]; i += 2)
        if (!strcmp(_env_tab[i], name))
            return _env_tab[i + 1];
    return NULL;
}

static int _granted(const char *k1, const char *v1, const char *k2,
                    const char *v2, char *what, size_t n)
{
    memset(_env_tab, 0, sizeof _env_tab);
    _env_tab[0] = k1, _env_tab[1] = v1, _env_tab[2] = k2, _env_tab[3] = v2;
    return ttrain_device_granted(_fake_getenv, what, n);
}

START_TEST(granted_gpus_from_slurm_and_cuda)
{
    char w[96];
    ck_assert_int_eq(_granted(NULL, NULL, NULL, NULL, w, sizeof w), 0);
    ck_assert_str_eq(w, "no GPU granted");
    ck_assert_int_eq(_granted("SLURM_STEP_GPUS", "0,1,3", "CUDA_VISIBLE_DEVICES",
                              "1", w, sizeof w),
                     3);
    ck_assert_str_eq(w, "SLURM_STEP_GPUS=0,1,3");
    ck_assert_int_eq(
        _granted("SLURM_GPUS_ON_NODE", "2", NULL, NULL, w, sizeof w), 2);
    ck_assert_str_eq(w, "SLURM_GPUS_ON_NODE=2");
    ck_assert_int_eq(
        _granted("CUDA_VISIBLE_DEVICES", "0", NULL, NULL, w, sizeof w), 1);
    ck_assert_str_eq(w, "CUDA_VISIBLE_DEVICES=0");
    /* the values that mean none: sbatch --gpus-per-task=0, a hidden GPU,
     * Slurm's GRES without device files */
    ck_assert_int_eq(_granted("SLURM_GPUS_ON_NODE", "0", "CUDA_VISIBLE_DEVICES",
                              "", w, sizeof w),
                     0);
    ck_assert_int_eq(_granted("CUDA_VISIBLE_DEVICES", "-1", "SLURM_STEP_GPUS",
                              "NoDevFiles", w, sizeof w),
                     0);
}
END_TEST

START_TEST(unused_grant_stops_auto)
{
    unsetenv("SLURM_STEP_GPUS");
    unsetenv("SLURM_GPUS_ON_NODE");
    unsetenv("CUDA_VISIBLE_DEVICES");
    ck_assert_int_eq(ttrain_device_unused_grant(3, "no driver"), 0);
    setenv("SLURM_STEP_GPUS", "2", 1);
    ck_assert_int_eq(ttrain_device_unused_grant(3, "cuda backend: no driver"),
                     TTRAIN_EDEVICE);
    const char *m = torus_error_msg();
    ck_assert_msg(strstr(m, "rank 3: Slurm granted this step GPUs "
                            "(SLURM_STEP_GPUS=2), but --backend auto cannot "
                            "use them: cuda backend: no driver"),
                  "%s", m);
    unsetenv("SLURM_STEP_GPUS");
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
    tcase_add_test(tc, subset_per_task_by_local_rank);
    tcase_add_test(tc, granted_gpus_from_slurm_and_cuda);
    tcase_add_test(tc, unused_grant_stops_auto);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
