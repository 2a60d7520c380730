/* test_loss_scale.c: every transition of the dynamic loss-scale state
 * machine (trainer/optim/loss_scale.c): start, overflow back-off and skip,
 * growth after N clean steps in a row, a clean run broken by an overflow,
 * both bounds, config validation, and restoring checkpointed state
 * (in-range values come back, hostile ones are refused and change
 * nothing); the transition the cuda backend's one-thread decision kernel
 * runs (teng_ls_next, shared with the host) in every case, and its step
 * decision (teng_ls_decide) against torus-train's eager rule. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/backends/cuda/optim_math.h"
#include "trainer/engine/teng.h"
#include "trainer/optim/topt_loss_scale.h"

static topt_loss_scale_config _cfg(long interval)
{
    topt_loss_scale_config c;
    topt_loss_scale_defaults(&c);
    c.interval = interval;
    return c;
}

/* teng_ls_next (trainer/backends/cuda/optim_math.h) is the transition the
 * device's decision kernel runs: every transition against values worked
 * out here from the contract, and topt_loss_scale_update agreeing. */
START_TEST(shared_transition_every_case)
{
    const double lo = 1.0, hi = 1024.0, gr = 2.0, bo = 0.5;
    const long iv = 4;
    const double scales[] = {lo, 1.5, 3.0, 512.0, 600.0, hi};
    const long cleans[] = {0, 1, iv - 2, iv - 1};
    for (int fin = 0; fin < 2; fin++)
        for (int a = 0; a < 6; a++)
            for (int b = 0; b < 4; b++) {
                double sc = scales[a], want_s = sc;
                long cl = cleans[b], ov = 5, want_c, want_o = ov;
                if (!fin) { /* back off to no less than lo, restart, count */
                    want_s = sc / 2 < lo ? lo : sc / 2;
                    want_c = 0;
                    want_o = ov + 1;
                } else if (cl + 1 == iv) { /* the interval-th clean step */
                    want_s = sc * 2 > hi ? hi : sc * 2;
                    want_c = 0;
                } else {
                    want_c = cl + 1;
                }
                double s1 = sc;
                long c1 = cl, o1 = ov;
                int r = teng_ls_next(&s1, &c1, &o1, lo, hi, gr, bo, iv, fin);
                ck_assert_int_eq(r, fin);
                ck_assert_double_eq(s1, want_s);
                ck_assert_int_eq(c1, want_c);
                ck_assert_int_eq(o1, want_o);
                topt_loss_scale_config c = {sc, lo, hi, gr, bo, iv};
                topt_loss_scale_state st = {sc, cl, ov};
                ck_assert_int_eq(topt_loss_scale_update(&st, &c, fin), fin);
                ck_assert_double_eq(st.scale, s1);
                ck_assert_int_eq(st.clean, c1);
                ck_assert_int_eq(st.overflows, o1);
            }
}
END_TEST

/* teng_ls_decide against torus-train's eager _step_update rule, written
 * out here: a long random run of clean and overflowing steps under a
 * dynamic, a static and an off scale, every field after every step. */
START_TEST(device_decision_is_the_eager_rule)
{
    uint64_t seed = 7;
    for (int mode = 0; mode < 3; mode++) {
        topt_loss_scale_config c = _cfg(5);
        c.init = 64, c.max_scale = 4096;
        if (mode) /* static:S or off: min = max = init */
            c.min_scale = c.max_scale = c.init = mode == 1 ? 256 : 1;
        teng_dstep_config dc = {c.min_scale, c.max_scale, c.growth, c.backoff,
                                c.interval,  mode == 0,   0.9,      1};
        topt_loss_scale_state ref;
        topt_loss_scale_init(&ref, &c);
        teng_dstep_state d = {.scale = c.init};
        long skipped = 0, worst = 0, applied = 0;
        double loss_sum = 0, prev_lr = 0;
        for (int k = 0; k < 20000; k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            /* bursts of overflow: long enough to reach the minimum */
            unsigned long long bad =
                (seed >> 33) % 9 < 2 ? (seed >> 40) % 3 : 0;
            if (k % 1000 > 980)
                bad = 1 + k % 4;
            double before = ref.scale;
            int fin = bad == 0;
            topt_loss_scale_update(&ref, &c, fin);
            int backs_off = mode == 0 && before > c.min_scale;
            double lr = 0.1 + k * 1e-4, loss = 2.5 - k * 1e-5;
            if (fin)
                skipped = 0, loss_sum += loss, applied++, prev_lr = lr;
            else if (!backs_off && ++skipped > worst)
                worst = skipped;
            ck_assert_int_eq(teng_ls_decide(&d, &dc, bad, lr, loss), fin);
            ck_assert_double_eq(d.loss_sum, loss_sum);
            ck_assert_int_eq(d.applied, applied);
            ck_assert_double_eq(d.prev_lr, prev_lr);
            ck_assert_double_eq(d.used, before);
            ck_assert_double_eq(d.scale, ref.scale);
            ck_assert_int_eq(d.clean, ref.clean);
            ck_assert_int_eq(d.overflows, ref.overflows);
            ck_assert_int_eq(d.skipped, skipped);
            ck_assert_int_eq(d.worst, worst);
            ck_assert_int_eq(d.decided, k + 1);
            ck_assert_uint_eq(d.bad, bad);
        }
        ck_assert_int_gt(worst, 1); /* the run reached the skip counting */
    }
}
END_TEST

START_TEST(defaults_and_start)
{
    topt_loss_scale_config c;
    topt_loss_scale_state s;
    topt_loss_scale_defaults(&c);
    ck_assert_int_eq(topt_loss_scale_validate(&c), TENG_OK);
    ck_assert_double_eq(c.init, 65536.0);
    ck_assert_int_eq(c.interval, 2000);
    topt_loss_scale_init(&s, &c);
    ck_assert_double_eq(s.scale, 65536.0);
    ck_assert_int_eq(s.clean, 0);
    ck_assert_int_eq(s.overflows, 0);
}
END_TEST

START_TEST(overflow_backs_off_and_skips)
{
    topt_loss_scale_config c = _cfg(3);
    topt_loss_scale_state s;
    topt_loss_scale_init(&s, &c);
    ck_assert_int_eq(topt_loss_scale_update(&s, &c, 1), 1);
    ck_assert_int_eq(s.clean, 1);
    ck_assert_int_eq(topt_loss_scale_update(&s, &c, 0), 0);
    ck_assert_double_eq(s.scale, 32768.0);
    ck_assert_int_eq(s.clean, 0);
    ck_assert_int_eq(s.overflows, 1);
    ck_assert_int_eq(topt_loss_scale_update(&s, &c, 0), 0);
    ck_assert_double_eq(s.scale, 16384.0);
    ck_assert_int_eq(s.overflows, 2);
}
END_TEST

START_TEST(grows_after_interval_clean_steps)
{
    topt_loss_scale_config c = _cfg(3);
    topt_loss_scale_state s;
    topt_loss_scale_init(&s, &c);
    /* Two clean, an overflow: the run restarts, so growth needs 3 more. */
    topt_loss_scale_update(&s, &c, 1);
    topt_loss_scale_update(&s, &c, 1);
    topt_loss_scale_update(&s, &c, 0);
    ck_assert_double_eq(s.scale, 32768.0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(topt_loss_scale_update(&s, &c, 1), 1);
        ck_assert_double_eq(s.scale, 32768.0);
    }
    ck_assert_int_eq(topt_loss_scale_update(&s, &c, 1), 1);
    ck_assert_double_eq(s.scale, 65536.0);
    ck_assert_int_eq(s.clean, 0);
    for (int i = 0; i < 3; i++)
        topt_loss_scale_update(&s, &c, 1);
    ck_assert_double_eq(s.scale, 131072.0);
}
END_TEST

START_TEST(bounds_hold)
{
    topt_loss_scale_config c = _cfg(1);
    c.init = 4.0;
    c.min_scale = 2.0;
    c.max_scale = 8.0;
    topt_loss_scale_state s;
    topt_loss_scale_init(&s, &c);
    topt_loss_scale_update(&s, &c, 0);
    ck_assert_double_eq(s.scale, 2.0);
    /* At the floor an overflow still skips the step. */
    ck_assert_int_eq(topt_loss_scale_update(&s, &c, 0), 0);
    ck_assert_double_eq(s.scale, 2.0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(topt_loss_scale_update(&s, &c, 1), 1);
    ck_assert_double_eq(s.scale, 8.0);
    ck_assert_int_eq(s.clean, 0);
    /* A non-power-of-two factor is clamped to the bound, not past it. */
    c.growth = 3.0;
    topt_loss_scale_restore(&s, &c, 6.0, 0, 0);
    topt_loss_scale_update(&s, &c, 1);
    ck_assert_double_eq(s.scale, 8.0);
}
END_TEST

START_TEST(bad_configs)
{
    struct {
        const char *field;
        double value;
        const char *words;
    } bad[] = {
        {"min", 0.0, "finite and > 0"},    {"max", INFINITY, "finite"},
        {"max", 0.5, "above the maximum"}, {"init", 1e9, "initial scale"},
        {"growth", 1.0, "growth"},         {"backoff", 1.0, "backoff"},
        {"backoff", 0.0, "backoff"},       {"interval", 0, "interval"},
        {"init", NAN, "initial scale"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        topt_loss_scale_config c = _cfg(2000);
        const char *f = bad[i].field;
        double v = bad[i].value;
        if (!strcmp(f, "min"))
            c.min_scale = v;
        else if (!strcmp(f, "max"))
            c.max_scale = v;
        else if (!strcmp(f, "init"))
            c.init = v;
        else if (!strcmp(f, "growth"))
            c.growth = v;
        else if (!strcmp(f, "backoff"))
            c.backoff = v;
        else
            c.interval = (long)v;
        torus_error_clear();
        ck_assert_int_eq(topt_loss_scale_validate(&c), TENG_EINVAL);
        ck_assert_msg(strstr(torus_error_msg(), bad[i].words), "%s=%g: '%s'", f,
                      v, torus_error_msg());
    }
}
END_TEST

START_TEST(restore_checks_saved_state)
{
    topt_loss_scale_config c = _cfg(2000);
    topt_loss_scale_state s;
    topt_loss_scale_init(&s, &c);
    ck_assert_int_eq(topt_loss_scale_restore(&s, &c, 1024.0, 1999, 7), TENG_OK);
    ck_assert_double_eq(s.scale, 1024.0);
    ck_assert_int_eq(s.clean, 1999);
    ck_assert_int_eq(s.overflows, 7);
    /* The restored counter carries on: one clean step grows the scale. */
    topt_loss_scale_update(&s, &c, 1);
    ck_assert_double_eq(s.scale, 2048.0);
    const struct {
        double scale;
        long clean, overflows;
        const char *words;
    } bad[] = {
        {NAN, 0, 0, "saved scale"},      {INFINITY, 0, 0, "saved scale"},
        {0.5, 0, 0, "saved scale"},      {1e30, 0, 0, "saved scale"},
        {1024, -1, 0, "clean-step"},     {1024, 2000, 0, "clean-step"},
        {1024, 0, -3, "overflow count"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        topt_loss_scale_state before = s;
        ck_assert_int_eq(topt_loss_scale_restore(&s, &c, bad[i].scale,
                                                 bad[i].clean,
                                                 bad[i].overflows),
                         TENG_EINVAL);
        ck_assert_msg(strstr(torus_error_msg(), bad[i].words), "%zu: %s", i,
                      torus_error_msg());
        ck_assert(!memcmp(&before, &s, sizeof s));
    }
}
END_TEST

/* --loss-scale's modes: what each sets, and every malformed text refused
 * without touching the outputs. */
START_TEST(parse_modes)
{
    topt_loss_scale_mode m;
    topt_loss_scale_config c, d;
    topt_loss_scale_defaults(&d);
    ck_assert_int_eq(topt_loss_scale_parse("off", &m, &c), TENG_OK);
    ck_assert_int_eq(m, TOPT_LOSS_SCALE_OFF);
    ck_assert_int_eq(topt_loss_scale_parse("auto", &m, &c), TENG_OK);
    ck_assert_int_eq(m, TOPT_LOSS_SCALE_AUTO);
    ck_assert(!memcmp(&c, &d, sizeof c));
    ck_assert_int_eq(topt_loss_scale_parse("dynamic", &m, &c), TENG_OK);
    ck_assert_int_eq(m, TOPT_LOSS_SCALE_DYNAMIC);
    ck_assert(!memcmp(&c, &d, sizeof c));
    ck_assert_int_eq(topt_loss_scale_parse("dynamic:1024", &m, &c), TENG_OK);
    ck_assert(c.init == 1024 && c.interval == d.interval);
    ck_assert_int_eq(topt_loss_scale_parse("dynamic:8:5", &m, &c), TENG_OK);
    ck_assert(c.init == 8 && c.interval == 5 && c.max_scale == d.max_scale);
    ck_assert_int_eq(topt_loss_scale_validate(&c), TENG_OK);
    ck_assert_int_eq(topt_loss_scale_parse("static:128", &m, &c), TENG_OK);
    ck_assert_int_eq(m, TOPT_LOSS_SCALE_STATIC);
    ck_assert(c.init == 128 && c.min_scale == 128 && c.max_scale == 128);
    ck_assert_int_eq(topt_loss_scale_validate(&c), TENG_OK);
    /* a static scale never moves, overflow or not */
    topt_loss_scale_state st;
    topt_loss_scale_init(&st, &c);
    ck_assert_int_eq(topt_loss_scale_update(&st, &c, 0), 0);
    for (int i = 0; i < 3000; i++)
        topt_loss_scale_update(&st, &c, 1);
    ck_assert(st.scale == 128);
    ck_assert_str_eq(topt_loss_scale_mode_name(TOPT_LOSS_SCALE_STATIC),
                     "static");
    static const char *const bad[] = {"",
                                      "on",
                                      "dynamic:",
                                      "dynamic:0.5",
                                      "dynamic:1e9",
                                      "dynamic:8:",
                                      "dynamic:8:0",
                                      "dynamic:8:2.5",
                                      "dynamic:8:5:",
                                      "dynamic8",
                                      "static",
                                      "static:",
                                      "static:nan",
                                      "static:inf",
                                      "static:3e7",
                                      "static: 8",
                                      "static:8x",
                                      "dynamic:8:1e10",
                                      "Dynamic",
                                      "off:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        m = TOPT_LOSS_SCALE_STATIC;
        memset(&c, 0x5a, sizeof c);
        topt_loss_scale_config before = c;
        ck_assert_int_eq(topt_loss_scale_parse(bad[i], &m, &c), TENG_EINVAL);
        ck_assert_msg(strstr(torus_error_msg(), "expected off, auto"), "%s: %s",
                      bad[i], torus_error_msg());
        ck_assert_int_eq(m, TOPT_LOSS_SCALE_STATIC);
        ck_assert(!memcmp(&c, &before, sizeof c));
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("loss_scale");
    TCase *tc = tcase_create("loss_scale");
    tcase_add_test(tc, defaults_and_start);
    tcase_add_test(tc, overflow_backs_off_and_skips);
    tcase_add_test(tc, grows_after_interval_clean_steps);
    tcase_add_test(tc, bounds_hold);
    tcase_add_test(tc, bad_configs);
    tcase_add_test(tc, restore_checks_saved_state);
    tcase_add_test(tc, parse_modes);
    tcase_add_test(tc, shared_transition_every_case);
    tcase_add_test(tc, device_decision_is_the_eager_rule);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
