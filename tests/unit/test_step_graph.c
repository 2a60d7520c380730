/* test_step_graph.c: when torus-train records its step in a CUDA graph,
 * replays it, or runs eagerly (trainer/train/ttrain_step_graph.h), with no GPU:
 * a warm-up step, then one recording and replays while the key holds; a
 * new plan (batch change, evaluation's re-plan), global batch, loss scale
 * or restore drops the recording and starts again; a failed recording is
 * reported once and the run stays eager; TCUDA_GRAPH=0, a backend without
 * graphs, a host-side exchange and dropout never record; with the device
 * step on, recordings hold the update and the caller queues it only on
 * steps that ran no graph; turning it on or off records again. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/train/ttrain_step_graph.h"

static ttrain_sg_act _next(ttrain_sg *s, ttrain_sg_key k, int *drop)
{
    return ttrain_sg_next(s, &k, drop);
}

/* Steps with key k: the actions, as letters (E, R, P) with a 'd' before
 * a step that drops a recording; a recording succeeds when ok. */
static void _run(ttrain_sg *s, ttrain_sg_key k, int steps, int ok, char *out)
{
    for (int i = 0; i < steps; i++) {
        int drop;
        ttrain_sg_act a = _next(s, k, &drop);
        if (drop)
            *out++ = 'd';
        *out++ = "ERP"[a];
        if (a == TTRAIN_SG_RECORD)
            ttrain_sg_recorded(s, ok);
        if (a != TTRAIN_SG_EAGER && s->have)
            ttrain_sg_replayed(s);
    }
    *out = 0;
}

static const ttrain_sg_key K = {1, 256, 65536.0, 0};

/* Who queues the update, step by step: 'g' (the graph holds it) or 'c'
 * (the caller), after each action letter. */
static void _run_update(ttrain_sg *s, ttrain_sg_key k, int steps, int ok,
                        char *out)
{
    for (int i = 0; i < steps; i++) {
        int drop, ran = 0;
        ttrain_sg_act a = _next(s, k, &drop);
        if (drop)
            *out++ = 'd';
        *out++ = "ERP"[a];
        if (a == TTRAIN_SG_RECORD)
            ttrain_sg_recorded(s, ok);
        ran = a != TTRAIN_SG_EAGER && s->have;
        *out++ = ttrain_sg_update_eager(s, ran) ? 'c' : 'g';
    }
    *out = 0;
}

START_TEST(update_in_the_graph)
{
    ttrain_sg s;
    char a[64];
    ttrain_sg_init(&s, NULL, 1, 0, 0);
    _run_update(&s, K, 3, 1, a); /* device step off: the caller, always */
    ck_assert_str_eq(a, "EcRcPc");
    ttrain_sg_set_update(&s, 1); /* on: eager once, then a new recording */
    ck_assert_str_eq(ttrain_sg_state(&s), "on (the update included)");
    _run_update(&s, K, 4, 1, a);
    ck_assert_str_eq(a, "dEcRgPgPg");
    ttrain_sg_set_update(&s, 1); /* no change: no new recording */
    _run_update(&s, K, 1, 1, a);
    ck_assert_str_eq(a, "Pg");
    ttrain_sg_set_update(&s, 0); /* off again: the recording goes */
    _run_update(&s, K, 3, 1, a);
    ck_assert_str_eq(a, "dEcRcPc");
    /* a failed recording with the update on: the caller, for good */
    ttrain_sg_init(&s, NULL, 1, 0, 0);
    ttrain_sg_set_update(&s, 1);
    _run_update(&s, K, 3, 0, a);
    ck_assert_str_eq(a, "EcRcEc");
    /* graphs off: the caller */
    ttrain_sg_init(&s, "0", 1, 0, 0);
    ttrain_sg_set_update(&s, 1);
    _run_update(&s, K, 2, 1, a);
    ck_assert_str_eq(a, "EcEc");
}
END_TEST

START_TEST(record_once_then_replay)
{
    ttrain_sg s;
    char a[64];
    ttrain_sg_init(&s, NULL, 1, 0, 0);
    ck_assert_str_eq(ttrain_sg_state(&s), "on");
    _run(&s, K, 5, 1, a);
    ck_assert_str_eq(a, "ERPPP");
    ck_assert_int_eq(s.records, 1);
    ck_assert_int_eq(s.replays, 4); /* the recording step replays too */
}
END_TEST

START_TEST(key_changes_record_again)
{
    ttrain_sg s;
    char a[64];
    ttrain_sg_init(&s, "1", 1, 0, 0);
    _run(&s, K, 3, 1, a);
    ck_assert_str_eq(a, "ERP");
    ttrain_sg_key k = K;
    k.plan = 2; /* set_batch to another batch, or evaluation's re-plan */
    _run(&s, k, 3, 1, a);
    ck_assert_str_eq(a, "dERP");
    k.loss_scale = 32768.0; /* the dynamic scale backed off */
    _run(&s, k, 2, 1, a);
    ck_assert_str_eq(a, "dER");
    k.global_batch = 512;
    _run(&s, k, 1, 1, a);
    ck_assert_str_eq(a, "dE");
    k.gen = 1; /* a checkpoint restore */
    _run(&s, k, 3, 1, a);
    ck_assert_str_eq(a, "ERP"); /* nothing was recorded for the old key */
    k.loss_scale = INFINITY;    /* the injected overflow's one step */
    _run(&s, k, 1, 1, a);
    ck_assert_str_eq(a, "dE");
    ck_assert_int_eq(s.records, 4);
}
END_TEST

START_TEST(failure_is_for_good)
{
    ttrain_sg s;
    ttrain_sg_init(&s, NULL, 1, 0, 0);
    int drop;
    ck_assert_int_eq(_next(&s, K, &drop), TTRAIN_SG_EAGER);
    ck_assert_int_eq(_next(&s, K, &drop), TTRAIN_SG_RECORD);
    ck_assert_int_eq(ttrain_sg_recorded(&s, 0), 1); /* report it */
    ck_assert_str_eq(ttrain_sg_state(&s), "failed (eager)");
    char a[64];
    _run(&s, K, 3, 1, a);
    ck_assert_str_eq(a, "EEE");
    ttrain_sg_key k = K;
    k.plan = 9;
    _run(&s, k, 3, 1, a);
    ck_assert_str_eq(a, "EEE");
    ck_assert_int_eq(ttrain_sg_recorded(&s, 0), 0); /* reported once */
}
END_TEST

START_TEST(never_recorded)
{
    static const struct {
        const char *env;
        int supported, host_exchange, dropout;
        const char *state;
    } c[] = {
        {"0", 1, 0, 0, "off: TCUDA_GRAPH=0"},
        {NULL, 0, 0, 0, "off: the backend records no graphs"},
        {NULL, 1, 1, 0, "off: the gradient exchange sums on the host"},
        {NULL, 1, 0, 1, "off: dropout masks change every step"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ttrain_sg s;
        char a[64];
        ttrain_sg_init(&s, c[i].env, c[i].supported, c[i].host_exchange,
                       c[i].dropout);
        ck_assert_str_eq(ttrain_sg_state(&s), c[i].state);
        _run(&s, K, 4, 1, a);
        ck_assert_str_eq(a, "EEEE");
        ck_assert_int_eq(s.records, 0);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("step_graph");
    TCase *tc = tcase_create("step_graph");
    tcase_add_test(tc, record_once_then_replay);
    tcase_add_test(tc, key_changes_record_again);
    tcase_add_test(tc, failure_is_for_good);
    tcase_add_test(tc, never_recorded);
    tcase_add_test(tc, update_in_the_graph);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
