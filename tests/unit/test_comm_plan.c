/* test_comm_plan.c: the bucket plan shared by the host and device fusion
 * (trainer/comm/fusion/plan.h) and the choice of the device path, on any
 * machine (no GPU, no MPI): bucket cuts, ready counts, launch order (a
 * complete bucket waits behind an incomplete earlier one), flush, the
 * same launches step after step (a per-bucket CUDA event is re-recorded
 * once per step, never twice in one), spans over a grads arena laid out
 * in forward order, overlapping spans refused, and NCCL vs host staging. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/comm/fusion/plan.h"

/* A grads arena like the engine's: params in forward order, each at a
 * 64-byte aligned offset; tensors registered in backward order (the
 * reverse), as torus-train does. */
enum { NP = 7 };
static const size_t _counts[NP] = {100, 3, 2048, 16, 1000, 1, 4096};
static float _arena[16384];

static size_t _off(int p)
{
    size_t o = 0;
    for (int i = 0; i < p; i++)
        o += (_counts[i] + 15) / 16 * 16;
    return o;
}

static void _build(tc_plan *pl, size_t theta)
{
    memset(pl, 0, sizeof *pl);
    for (int p = NP - 1; p >= 0; p--)
        ck_assert_int_eq(tc_plan_add(pl, _arena + _off(p), _counts[p]), 0);
    ck_assert_int_eq(tc_plan_cut(pl, theta), 0);
}

START_TEST(test_cuts)
{
    tc_plan pl;
    /* theta 8 KB = 2048 floats; backward order: 4096 | 1, 1000, 16, 2048 |
     * 3, 100 (the last bucket closes at the end). */
    _build(&pl, 8192);
    ck_assert_int_eq(pl.nb, 3);
    ck_assert_int_eq(pl.b[0].first, 0);
    ck_assert_int_eq(pl.b[0].n, 1);
    ck_assert_int_eq(pl.b[1].first, 1);
    ck_assert_int_eq(pl.b[1].n, 4);
    ck_assert_uint_eq(pl.b[1].count, 1 + 1000 + 16 + 2048);
    ck_assert_int_eq(pl.b[2].n, 2);
    ck_assert_int_eq(tc_plan_cut(&pl, 0), TCOMM_ERR_ARG);
    /* theta of one byte: one bucket per tensor */
    ck_assert_int_eq(tc_plan_cut(&pl, 1), 0);
    ck_assert_int_eq(pl.nb, NP);
    ck_assert_int_eq(tc_plan_add(&pl, _arena, 1), TCOMM_ERR_ARG);
    tc_plan_free(&pl);
}
END_TEST

/* Marks tensors ready in the order given and returns the launches, in
 * order, as digits ("01-2": 0 and 1 after the first ready, ...). */
static void _step(tc_plan *pl, const int *order, int n, char *out)
{
    *out = 0;
    for (int k = 0; k < n; k++) {
        ck_assert_int_eq(tc_plan_ready(pl, order[k]), 0);
        for (int b; (b = tc_plan_next(pl)) >= 0;)
            sprintf(out + strlen(out), "%d", b);
        strcat(out, "-");
    }
}

START_TEST(test_launch_order_and_reuse)
{
    tc_plan pl;
    _build(&pl, 8192);
    char got[64];
    /* Backward order: bucket 0 after tensor 0, 1 after 4, 2 after 6. */
    static const int fwd[NP] = {0, 1, 2, 3, 4, 5, 6};
    _step(&pl, fwd, NP, got);
    ck_assert_str_eq(got, "0----1--2-");
    ck_assert_int_eq(tc_plan_launched(&pl), 3);
    ck_assert_int_eq(tc_plan_next(&pl), -1); /* never twice in a step */
    ck_assert_int_eq(tc_plan_ready(&pl, 3), TCOMM_ERR_ARG);
    /* Bucket 2 completes first, but launches only after 0 and 1. */
    tc_plan_reset(&pl);
    static const int odd[NP] = {5, 6, 1, 2, 3, 4, 0};
    _step(&pl, odd, NP, got);
    ck_assert_str_eq(got, "------012-");
    /* The next step launches the same buckets in the same order (each
     * bucket's event is recorded once per step). */
    for (int step = 0; step < 3; step++) {
        tc_plan_reset(&pl);
        ck_assert_int_eq(tc_plan_launched(&pl), 0);
        _step(&pl, fwd, NP, got);
        ck_assert_str_eq(got, "0----1--2-");
    }
    /* An unused tensor (never marked) goes at flush. */
    tc_plan_reset(&pl);
    static const int part[3] = {0, 1, 2};
    _step(&pl, part, 3, got);
    ck_assert_str_eq(got, "0---");
    tc_plan_flush(&pl);
    ck_assert_int_eq(tc_plan_next(&pl), 1);
    ck_assert_int_eq(tc_plan_next(&pl), 2);
    ck_assert_int_eq(tc_plan_next(&pl), -1);
    ck_assert_int_eq(tc_plan_ready(&pl, NP), TCOMM_ERR_ARG);
    ck_assert_int_eq(tc_plan_ready(&pl, -1), TCOMM_ERR_ARG);
    tc_plan_free(&pl);
}
END_TEST

START_TEST(test_spans)
{
    tc_plan pl;
    _build(&pl, 8192);
    size_t maxf = 0;
    ck_assert_int_eq(tc_plan_spans(&pl, &maxf), 0);
    /* Bucket 0 is param 6 alone; bucket 1 params 5..2 with the padding
     * between them; bucket 2 params 1..0. */
    ck_assert_ptr_eq((void *)pl.b[0].lo, _arena + _off(6));
    ck_assert_ptr_eq((void *)pl.b[0].hi, _arena + _off(6) + 4096);
    ck_assert_ptr_eq((void *)pl.b[1].lo, _arena + _off(2));
    ck_assert_ptr_eq((void *)pl.b[1].hi, _arena + _off(5) + 1);
    ck_assert_ptr_eq((void *)pl.b[2].lo, _arena);
    ck_assert_ptr_eq((void *)pl.b[2].hi, _arena + _off(1) + 3);
    ck_assert_uint_eq(maxf, 4096);
    ck_assert_uint_eq(maxf, (pl.b[0].hi - pl.b[0].lo) / 4);
    tc_plan_free(&pl);
    /* Tensors out of arena order: bucket 0 would span over bucket 1's. */
    memset(&pl, 0, sizeof pl);
    tc_plan_add(&pl, _arena, 100);
    tc_plan_add(&pl, _arena + 200, 100);
    tc_plan_add(&pl, _arena + 100, 100);
    ck_assert_int_eq(tc_plan_cut(&pl, 800), 0);
    ck_assert_int_eq(pl.nb, 2);
    ck_assert_int_eq(tc_plan_spans(&pl, &maxf), TCOMM_ERR_LAYOUT);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "buckets 0 and 1 overlap"));
    tc_plan_free(&pl);
}
END_TEST

START_TEST(test_gpu_choice)
{
    int a, b;
    /* Two nodes, two ranks each on devices 0 and 1: NCCL. */
    int node[4] = {0, 0, 1, 1}, dev[4] = {0, 1, 0, 1}, pref[4] = {0};
    ck_assert_int_eq(tc_gpu_choose(4, node, dev, pref, 1, &a, &b), TC_GPU_NCCL);
    ck_assert_int_eq(a, -1);
    /* Not built with NCCL: staged. */
    ck_assert_int_eq(tc_gpu_choose(4, node, dev, pref, 0, &a, &b),
                     TC_GPU_STAGED);
    /* Two ranks on one GPU (one device, two local ranks): staged, and the
     * pair is named. */
    int dev1[4] = {0, 1, 0, 0};
    ck_assert_int_eq(tc_gpu_choose(4, node, dev1, pref, 1, &a, &b),
                     TC_GPU_STAGED);
    ck_assert_int_eq(a, 2);
    ck_assert_int_eq(b, 3);
    /* Forcing NCCL there is an error, naming the pair. */
    pref[1] = TC_GPU_NCCL;
    ck_assert_int_eq(tc_gpu_choose(4, node, dev1, pref, 1, &a, &b), -1);
    ck_assert_int_eq(a, 2);
    ck_assert_int_eq(tc_gpu_choose(4, node, dev, pref, 0, &a, &b), -1);
    ck_assert_int_eq(a, -1);
    /* Any rank asking for staged wins (all ranks agree). */
    pref[3] = TC_GPU_STAGED;
    ck_assert_int_eq(tc_gpu_choose(4, node, dev, pref, 1, &a, &b),
                     TC_GPU_STAGED);
    /* Same device number on different nodes is no clash. */
    int same[2] = {0, 0}, nodes2[2] = {0, 1}, p2[2] = {0, 0};
    ck_assert_int_eq(tc_gpu_choose(2, nodes2, same, p2, 1, &a, &b),
                     TC_GPU_NCCL);
    ck_assert_int_eq(tc_gpu_parse(NULL), TC_GPU_AUTO);
    ck_assert_int_eq(tc_gpu_parse("staged"), TC_GPU_STAGED);
    ck_assert_int_eq(tc_gpu_parse("nccl"), TC_GPU_NCCL);
    ck_assert_int_eq(tc_gpu_parse("mpi"), -1);
    ck_assert_str_eq(tc_gpu_name(TC_GPU_STAGED), "staged");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_plan");
    TCase *t = tcase_create("plan");
    tcase_add_test(t, test_cuts);
    tcase_add_test(t, test_launch_order_and_reuse);
    tcase_add_test(t, test_spans);
    tcase_add_test(t, test_gpu_choice);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
