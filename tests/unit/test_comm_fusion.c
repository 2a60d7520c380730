/* test_comm_fusion.c: fusion buckets on one rank (no launcher needed):
 * where buckets are cut for a given theta, that finish() flushes unready
 * gradients, that the communication thread and the synchronous path give
 * the same bits, that inf/nan is reported, and that misuse is an error. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/comm/core/model.h"
#include "trainer/comm/tcomm_fusion.h"

static tcomm_t *_c;

static void _setup(void)
{
    /* This test is a single rank even if the caller runs under Slurm. */
    unsetenv("SLURM_NTASKS");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    tcomm_options o = {0};
    ck_assert_msg(tcomm_init(&o, &_c) == TCOMM_OK, "%s", torus_error_msg());
}

static void _teardown(void)
{
    tcomm_finalize(_c);
}

START_TEST(test_bucket_cuts)
{
    /* floats: 100, 200, 300 | 1000 | 50, 60 with theta = 2000 bytes = 500
     * floats */
    static const size_t sz[] = {100, 200, 300, 1000, 50, 60};
    float *g[6];
    tcomm_fusion_options o = {
        .bucket_bytes = 2000, .algo = TCOMM_ALGO_RING, .wire = TCOMM_WIRE_FP32};
    tcomm_fusion_t *f;
    ck_assert_int_eq(tcomm_fusion_create(_c, &o, &f), TCOMM_OK);
    for (int i = 0; i < 6; i++) {
        int ix;
        g[i] = calloc(sz[i], 4);
        ck_assert_int_eq(tcomm_fusion_add(f, g[i], sz[i], "t", &ix), TCOMM_OK);
        ck_assert_int_eq(ix, i);
    }
    ck_assert_int_eq(tcomm_fusion_seal(f), TCOMM_OK);
    ck_assert_uint_eq(tcomm_fusion_bucket_count(f), 3);
    int first, n;
    size_t count;
    ck_assert_int_eq(tcomm_fusion_bucket(f, 0, &first, &n, &count), TCOMM_OK);
    ck_assert_int_eq(first, 0);
    ck_assert_int_eq(n, 3);
    ck_assert_uint_eq(count, 600);
    ck_assert_int_eq(tcomm_fusion_bucket(f, 1, &first, &n, &count), TCOMM_OK);
    ck_assert_int_eq(first, 3);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(tcomm_fusion_bucket(f, 2, &first, &n, &count), TCOMM_OK);
    ck_assert_int_eq(first, 4);
    ck_assert_int_eq(n, 2); /* the short tail: flushed when backward ends */
    ck_assert_uint_eq(count, 110);
    ck_assert_int_eq(tcomm_fusion_bucket(f, 3, &first, &n, &count),
                     TCOMM_ERR_ARG);
    /* No more tensors after seal. */
    ck_assert_int_eq(tcomm_fusion_add(f, g[0], 1, "late", NULL), TCOMM_ERR_ARG);
    /* Cut again between steps (a resume's size): one bucket, then three;
     * not during a step, not to auto. */
    ck_assert_int_eq(tcomm_fusion_set_theta(f, 1 << 20), TCOMM_OK);
    ck_assert_uint_eq(tcomm_fusion_bucket_count(f), 1);
    ck_assert_uint_eq(tcomm_fusion_theta(f), 1 << 20);
    ck_assert_int_eq(tcomm_fusion_set_theta(f, TCOMM_FUSION_AUTO),
                     TCOMM_ERR_ARG);
    ck_assert_int_eq(tcomm_fusion_ready(f, 0), TCOMM_OK);
    ck_assert_int_eq(tcomm_fusion_set_theta(f, 2000), TCOMM_ERR_ARG);
    ck_assert_int_eq(tcomm_fusion_finish(f, NULL), TCOMM_OK);
    ck_assert_int_eq(tcomm_fusion_set_theta(f, 2000), TCOMM_OK);
    ck_assert_uint_eq(tcomm_fusion_bucket_count(f), 3);
    ck_assert_int_eq(tcomm_fusion_bucket(f, 2, &first, &n, &count), TCOMM_OK);
    ck_assert_int_eq(first, 4);
    tcomm_fusion_destroy(f);
    /* auto over gradients that every size cuts alike: the default, and
     * nothing probed or timed. */
    o.bucket_bytes = TCOMM_FUSION_AUTO;
    ck_assert_int_eq(tcomm_fusion_create(_c, &o, &f), TCOMM_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(tcomm_fusion_add(f, g[i], sz[i], "t", NULL), TCOMM_OK);
    ck_assert_int_eq(tcomm_fusion_seal(f), TCOMM_OK);
    ck_assert_uint_eq(tcomm_fusion_theta(f), TCOMM_FUSION_DEFAULT_BYTES);
    ck_assert_uint_eq(tcomm_fusion_bucket_count(f), 1);
    ck_assert_ptr_nonnull(
        strstr(tcomm_fusion_theta_why(f), "nothing was probed or timed"));
    tcomm_fusion_destroy(f);
    for (int i = 0; i < 6; i++)
        free(g[i]);
}
END_TEST

/* One step over tensors of sizes sz: values i*0.1 + j*1e-3 (not fp16-exact). */
static void _step(int synchronous, tcomm_wire w, int shuffle, float **out,
                  size_t *sz, int n, tcomm_fusion_stats *st)
{
    tcomm_fusion_options o = {.bucket_bytes = 4096,
                              .algo = TCOMM_ALGO_RING,
                              .wire = w,
                              .flags = TCOMM_AVERAGE,
                              .synchronous = synchronous};
    tcomm_fusion_t *f;
    ck_assert_int_eq(tcomm_fusion_create(_c, &o, &f), TCOMM_OK);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(tcomm_fusion_add(f, out[i], sz[i], "g", NULL),
                         TCOMM_OK);
    ck_assert_int_eq(tcomm_fusion_seal(f), TCOMM_OK);
    for (int step = 0; step < 2; step++) {
        for (int i = 0; i < n; i++)
            for (size_t j = 0; j < sz[i]; j++)
                out[i][j] = (float)i * 0.1f + (float)j * 1e-3f;
        /* Backward order, or a scrambled one; every 5th left for finish(). */
        for (int k = 0; k < n; k++) {
            int i = shuffle ? (k * 7) % n : k;
            if (i % 5 != 4)
                ck_assert_int_eq(tcomm_fusion_ready(f, i), TCOMM_OK);
        }
        ck_assert_int_eq(tcomm_fusion_finish(f, st), TCOMM_OK);
        ck_assert_uint_eq(st->buckets, tcomm_fusion_bucket_count(f));
    }
    tcomm_fusion_destroy(f);
}

START_TEST(test_thread_equals_sync)
{
    enum { N = 23 };
    size_t sz[N];
    float *a[N], *b[N];
    for (int i = 0; i < N; i++) {
        sz[i] = (size_t)(1 + (i * 389) % 1500);
        a[i] = malloc(sz[i] * 4);
        b[i] = malloc(sz[i] * 4);
    }
    tcomm_fusion_stats st;
    for (int w = TCOMM_WIRE_FP32; w <= TCOMM_WIRE_FP16; w++) {
        _step(1, w, 0, a, sz, N, &st);
        _step(0, w, 1, b, sz, N, &st);
        ck_assert_uint_eq(st.nonfinite, 0);
        for (int i = 0; i < N; i++) {
            ck_assert_int_eq(memcmp(a[i], b[i], sz[i] * 4), 0);
            /* one rank: the result is the input at wire precision */
            float x = (float)i * 0.1f + (float)(sz[i] - 1) * 1e-3f;
            if (w == TCOMM_WIRE_FP32)
                ck_assert(a[i][sz[i] - 1] == x);
            else
                ck_assert(fabsf(a[i][sz[i] - 1] - x) <= fabsf(x) * 0x1p-11f);
        }
    }
    for (int i = 0; i < N; i++) {
        free(a[i]);
        free(b[i]);
    }
}
END_TEST

START_TEST(test_nonfinite_and_misuse)
{
    float g0[10] = {0}, g1[10] = {0};
    tcomm_fusion_options o = {
        .bucket_bytes = 40, .algo = TCOMM_ALGO_FLAT, .wire = TCOMM_WIRE_FP16};
    tcomm_fusion_t *f;
    tcomm_fusion_stats st;
    ck_assert_int_eq(tcomm_fusion_create(_c, &o, &f), TCOMM_OK);
    tcomm_fusion_add(f, g0, 10, "a", NULL);
    tcomm_fusion_add(f, g1, 10, "b", NULL);
    ck_assert_int_eq(tcomm_fusion_ready(f, 0), TCOMM_ERR_ARG); /* before seal */
    ck_assert_int_eq(tcomm_fusion_seal(f), TCOMM_OK);
    ck_assert_uint_eq(tcomm_fusion_bucket_count(f), 2);
    g0[3] = NAN;
    g1[9] = 1e6f; /* finite in fp32, inf in fp16 */
    ck_assert_int_eq(tcomm_fusion_ready(f, 1), TCOMM_OK);
    ck_assert_int_eq(tcomm_fusion_ready(f, 1), TCOMM_ERR_ARG); /* twice */
    ck_assert_int_eq(tcomm_fusion_ready(f, 7), TCOMM_ERR_ARG);
    ck_assert_int_eq(tcomm_fusion_finish(f, &st), TCOMM_OK);
    ck_assert_uint_eq(st.nonfinite, 2);
    ck_assert(isinf(g1[9]));
    tcomm_fusion_destroy(f);
}
END_TEST

/* tcomm_fusion_wait: with every gradient ready, the thread reduces the
 * buckets in order and wait returns once the asked-for ones are done
 * (more may be); a count past the buckets is clamped; without a thread
 * (synchronous) it returns what the readies already reduced. */
START_TEST(test_wait_for_buckets)
{
    float g[3][8] = {{1}, {2}, {3}};
    for (int sync = 0; sync < 2; sync++) {
        tcomm_fusion_options o = {.bucket_bytes = 32,
                                  .algo = TCOMM_ALGO_FLAT,
                                  .wire = TCOMM_WIRE_FP32,
                                  .synchronous = sync};
        tcomm_fusion_t *f;
        tcomm_fusion_stats st;
        ck_assert_int_eq(tcomm_fusion_create(_c, &o, &f), TCOMM_OK);
        for (int i = 0; i < 3; i++)
            tcomm_fusion_add(f, g[i], 8, "g", NULL);
        ck_assert_int_eq(tcomm_fusion_seal(f), TCOMM_OK);
        ck_assert_uint_eq(tcomm_fusion_bucket_count(f), 3);
        ck_assert_int_eq(tcomm_fusion_wait(f, 0), 0); /* nothing ready */
        ck_assert_int_eq(tcomm_fusion_ready(f, 0), TCOMM_OK);
        ck_assert_int_ge(tcomm_fusion_wait(f, 1), 1);
        ck_assert_int_eq(tcomm_fusion_ready(f, 1), TCOMM_OK);
        ck_assert_int_eq(tcomm_fusion_ready(f, 2), TCOMM_OK);
        ck_assert_int_eq(tcomm_fusion_wait(f, 99), 3);
        ck_assert_int_eq(tcomm_fusion_finish(f, &st), TCOMM_OK);
        ck_assert_uint_eq(st.buckets, 3);
        ck_assert_int_eq(tcomm_fusion_wait(f, 0), 0); /* the next step */
        tcomm_fusion_destroy(f);
    }
}
END_TEST

/* The bucket plan is resolved at seal: steps ask the cost model nothing
 * (hybrid, with and without the communication thread), and the plan's
 * line names each bucket's route. A direct hybrid call still asks it,
 * so the counter is live. */
START_TEST(test_plan_once)
{
    enum { N = 9 };
    float *g[N];
    for (int i = 0; i < N; i++)
        g[i] = calloc(1000, 4);
    for (int sync = 0; sync < 2; sync++) {
        tcomm_fusion_options o = {.bucket_bytes = 8000,
                                  .algo = TCOMM_ALGO_HYBRID,
                                  .wire = TCOMM_WIRE_FP16,
                                  .flags = TCOMM_AVERAGE,
                                  .synchronous = sync};
        tcomm_fusion_t *f;
        char line[256];
        ck_assert_int_eq(tcomm_fusion_create(_c, &o, &f), TCOMM_OK);
        line[0] = 'x';
        ck_assert_int_eq(tcomm_fusion_plan_text(f, line, sizeof line), 0);
        ck_assert_str_eq(line, ""); /* no plan before seal */
        for (int i = 0; i < N; i++)
            ck_assert_int_eq(tcomm_fusion_add(f, g[i], 1000, "g", NULL),
                             TCOMM_OK);
        ck_assert_int_eq(tcomm_fusion_seal(f), TCOMM_OK);
        unsigned long calls = tcomm_model_calls();
        for (int step = 0; step < 3; step++) {
            tcomm_fusion_stats st;
            for (int i = 0; i < N; i++)
                ck_assert_int_eq(tcomm_fusion_ready(f, i), TCOMM_OK);
            ck_assert_int_eq(tcomm_fusion_finish(f, &st), TCOMM_OK);
            ck_assert_uint_eq(st.buckets, 5);
        }
        ck_assert_uint_eq(tcomm_model_calls(), calls);
        /* Cut again: routes resolved again, and steps still price none. */
        ck_assert_int_eq(tcomm_fusion_set_theta(f, 1 << 20), TCOMM_OK);
        ck_assert_uint_gt(tcomm_model_calls(), calls);
        calls = tcomm_model_calls();
        for (int i = 0; i < N; i++)
            ck_assert_int_eq(tcomm_fusion_ready(f, i), TCOMM_OK);
        ck_assert_int_eq(tcomm_fusion_finish(f, NULL), TCOMM_OK);
        ck_assert_uint_eq(tcomm_model_calls(), calls);
        tcomm_fusion_plan_text(f, line, sizeof line);
        ck_assert_msg(strncmp(line, "1 bucket: 0 ", 12) == 0, "%s", line);
        tcomm_fusion_destroy(f);
    }
    tcomm_seg seg = {g[0], 1000};
    unsigned long calls = tcomm_model_calls();
    ck_assert_int_eq(tcomm_allreduce_segs(_c, &seg, 1, TCOMM_ALGO_HYBRID,
                                          TCOMM_WIRE_FP32, 0, NULL),
                     TCOMM_OK);
    ck_assert_uint_gt(tcomm_model_calls(), calls);
    for (int i = 0; i < N; i++)
        free(g[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_fusion");
    TCase *t = tcase_create("fusion");
    tcase_add_unchecked_fixture(t, _setup, _teardown);
    tcase_add_test(t, test_bucket_cuts);
    tcase_add_test(t, test_thread_equals_sync);
    tcase_add_test(t, test_nonfinite_and_misuse);
    tcase_add_test(t, test_wait_for_buckets);
    tcase_add_test(t, test_plan_once);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    /* One process: tcomm is initialised once for all tests. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
