/* test_optim.c: the large-batch recipe against hand-computed values:
 * linear scaling, warmup, poly/cosine/step decay, the Sony batch
 * schedule, LARS trust ratios, the update with weight decay, exclusion
 * of bias/BN tensors and momentum correction; config validation; and a
 * small ResNet that must fit a fixed batch with this optimizer. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "config.h"
#include "tests/unit/layer_harness.h"
#include "trainer/engine/backend.h"
#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"

static topt_schedule _sched(topt_decay decay)
{
    topt_schedule s;
    topt_schedule_defaults(&s);
    s.base_lr = 0.1;
    s.ref_batch = 256;
    s.stage[0].global_batch = 1024; /* peak 0.4 */
    s.warmup_epochs = 5;
    s.epochs = 90;
    s.decay = decay;
    s.dataset_size = 102400;
    return s;
}

START_TEST(linear_scaling_and_warmup)
{
    topt_schedule s = _sched(TOPT_DECAY_NONE);
    ck_assert_double_eq_tol(topt_peak_lr(&s, 1024), 0.4, 1e-12);
    /* Goyal: warmup starts at the unscaled base LR. */
    ck_assert_double_eq_tol(topt_lr_at(&s, 0.0), 0.1, 1e-12);
    ck_assert_double_eq_tol(topt_lr_at(&s, 2.5), 0.25, 1e-12);
    ck_assert_double_eq_tol(topt_lr_at(&s, 5.0), 0.4, 1e-12);
    ck_assert_double_eq_tol(topt_lr_at(&s, 50.0), 0.4, 1e-12);
    /* MLPerf style: warmup from zero. 100 steps per epoch here. */
    s.warmup_start_lr = 0;
    ck_assert_int_eq(topt_steps_in_epoch(&s, 0), 100);
    ck_assert_double_eq_tol(topt_lr_at_step(&s, 1, 50), 0.4 * 1.5 / 5, 1e-12);
}
END_TEST

START_TEST(poly_cosine_step)
{
    topt_schedule s = _sched(TOPT_DECAY_POLY);
    /* p = (47.5 - 5) / 85 = 0.5: 0.4 * 0.5^2 */
    ck_assert_double_eq_tol(topt_lr_at(&s, 47.5), 0.1, 1e-12);
    ck_assert_double_eq_tol(topt_lr_at(&s, 90.0), 0.0, 1e-12);
    s.end_lr = 0.0001;
    ck_assert_double_eq_tol(topt_lr_at(&s, 47.5), 0.0001 + 0.3999 * 0.25,
                            1e-12);
    s = _sched(TOPT_DECAY_COSINE);
    ck_assert_double_eq_tol(topt_lr_at(&s, 47.5), 0.2, 1e-12);
    /* p = 0.25: (1 + cos(pi/4)) / 2 = 0.853553... */
    ck_assert_double_eq_tol(topt_lr_at(&s, 26.25), 0.4 * 0.8535533905932737,
                            1e-12);
    s = _sched(TOPT_DECAY_STEP); /* milestones 30, 60, 80 */
    ck_assert_double_eq_tol(topt_lr_at(&s, 29.9), 0.4, 1e-12);
    ck_assert_double_eq_tol(topt_lr_at(&s, 45.0), 0.04, 1e-12);
    ck_assert_double_eq_tol(topt_lr_at(&s, 85.0), 0.0004, 1e-12);
}
END_TEST

START_TEST(sony_batch_schedule)
{
    topt_schedule s = _sched(TOPT_DECAY_NONE);
    s.warmup_epochs = 0;
    ck_assert_int_eq(topt_stages_parse("0:256,10:512,20:1024", &s), TENG_OK);
    ck_assert_int_eq(s.nstages, 3);
    ck_assert_int_eq(topt_schedule_validate(&s), TENG_OK);
    ck_assert_int_eq(topt_batch_at(&s, 9), 256);
    ck_assert_int_eq(topt_batch_at(&s, 10), 512);
    ck_assert_int_eq(topt_batch_at(&s, 89), 1024);
    ck_assert_int_eq(topt_steps_in_epoch(&s, 15), 102400 / 512);
    /* The LR follows the batch: 0.1 * B / 256. */
    ck_assert_double_eq_tol(topt_lr_at(&s, 9.99), 0.1, 1e-12);
    ck_assert_double_eq_tol(topt_lr_at(&s, 10.0), 0.2, 1e-12);
    ck_assert_double_eq_tol(topt_lr_at(&s, 20.5), 0.4, 1e-12);
    ck_assert_int_eq(topt_stages_parse("4096", &s), 0);
    ck_assert_int_eq(topt_batch_at(&s, 50), 4096);
}
END_TEST

START_TEST(bad_values)
{
    topt_schedule s = _sched(TOPT_DECAY_STEP);
    topt_config c;
    topt_decay d;
    ck_assert_int_eq(topt_stages_parse("0:256,x", &s), TENG_EINVAL);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "EPOCH:BATCH"));
    ck_assert_int_eq(topt_stages_parse("-5", &s), TENG_EINVAL);
    ck_assert_int_eq(topt_stages_parse("5:256,10:512", &s), 0);
    ck_assert_int_eq(topt_schedule_validate(&s), TENG_EINVAL);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "start at epoch 0"));
    s = _sched(TOPT_DECAY_STEP);
    s.milestones[1] = 20; /* 30, 20, 80 */
    ck_assert_int_eq(topt_schedule_validate(&s), TENG_EINVAL);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "increasing"));
    s = _sched(TOPT_DECAY_NONE);
    s.warmup_epochs = 90;
    ck_assert_int_eq(topt_schedule_validate(&s), TENG_EINVAL);
    topt_config_defaults(&c);
    c.momentum = 1.0;
    ck_assert_int_eq(topt_config_validate(&c), TENG_EINVAL);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "momentum 1"));
    ck_assert_int_eq(topt_decay_parse("linear", &d), TENG_EINVAL);
    ck_assert_int_eq(topt_decay_parse("poly", &d), TENG_OK);
    ck_assert_int_eq(d, TOPT_DECAY_POLY);
}
END_TEST

START_TEST(lars_trust_by_hand)
{
    /* |w| = 5, |g| = 1, eta 0.001, wd 0.0005: 0.005 / 1.0025 */
    ck_assert_float_eq_tol(topt_lars_trust(5.f, 1.f, 0.001f, 0.0005f, 0.f),
                           0.005f / 1.0025f, 1e-9f);
    ck_assert_float_eq(topt_lars_trust(0.f, 1.f, 0.001f, 0.f, 0.f), 1.f);
    ck_assert_float_eq(topt_lars_trust(2.f, 0.f, 0.001f, 0.f, 0.f), 1.f);
}
END_TEST

#ifdef TORUS_HAVE_DNNL
START_TEST(sgd_lars_update_by_hand)
{
    /* fc: weight 1x2 = (3, 4), bias (1); grads (0.6, 0.8) and (0.5). */
    teng_backend *bk = lh_backend();
    teng_net net;
    topt_sgd o;
    topt_config c;
    teng_net_init(&net);
    int x = teng_add_input(&net, 2, 1, 1);
    ck_assert_int_ge(teng_add_fc(&net, "fc", x, 1, 1), 0);
    ck_assert_int_eq(teng_net_compile(&net, bk, 1), 0);
    float w[2] = {3.f, 4.f}, gw[2] = {0.6f, 0.8f}, b = 1.f, gb = 0.5f;
    ck_assert_int_eq(teng_param_write(&net, 0, 0, w), 0);
    ck_assert_int_eq(teng_param_write(&net, 0, 1, gw), 0);
    ck_assert_int_eq(teng_param_write(&net, 1, 0, &b), 0);
    ck_assert_int_eq(teng_param_write(&net, 1, 1, &gb), 0);
    topt_config_defaults(&c);
    c.lars = 1;
    c.lars_eps = 0;
    c.weight_decay = 0.0005;
    ck_assert_int_eq(topt_sgd_init(&o, &net, &c), 0);
    ck_assert_int_eq(topt_sgd_step(&o, 2.0), 0);
    /* Weight: trust 0.005/1.0025, v = 2 * trust * (g + 0.0005 w). */
    double t = 0.005 / 1.0025;
    double v0 = 2 * t * (0.6 + 0.0015), v1 = 2 * t * (0.8 + 0.002);
    ck_assert_float_eq_tol(o.trust[0], t, 1e-8);
    ck_assert_float_eq(o.trust[1], 1.f); /* bias excluded */
    float nw[2], nb;
    ck_assert_int_eq(teng_param_read(&net, 0, 0, nw), 0);
    ck_assert_int_eq(teng_param_read(&net, 1, 0, &nb), 0);
    ck_assert_double_eq_tol(nw[0], 3 - v0, 1e-6);
    ck_assert_double_eq_tol(nw[1], 4 - v1, 1e-6);
    /* Bias: no LARS and no weight decay: v = 2 * 0.5. */
    ck_assert_double_eq_tol(nb, 1 - 1.0, 1e-6);
    /* Second step at lr 1 with zero grads: momentum correction halves
     * the carried velocity (0.9 * 1/2), weight decay adds lr*wd*w;
     * LARS sees |g| = 0 and keeps trust 1. */
    float z[2] = {0, 0};
    ck_assert_int_eq(teng_param_write(&net, 0, 1, z), 0);
    ck_assert_int_eq(teng_param_write(&net, 1, 1, z), 0);
    ck_assert_int_eq(topt_sgd_step(&o, 1.0), 0);
    float w2[2], b2;
    ck_assert_int_eq(teng_param_read(&net, 0, 0, w2), 0);
    ck_assert_int_eq(teng_param_read(&net, 1, 0, &b2), 0);
    double nv0 = 0.45 * v0 + 1.0 * 0.0005 * nw[0];
    ck_assert_double_eq_tol(w2[0], nw[0] - nv0, 1e-6);
    ck_assert_double_eq_tol(b2, nb - 0.45 * 1.0, 1e-6);
    /* Without correction the carried velocity is scaled by 0.9 only. */
    topt_sgd_free(&o);
    c.lars = 0;
    c.momentum_correction = 0;
    c.weight_decay = 0;
    ck_assert_int_eq(topt_sgd_init(&o, &net, &c), 0);
    ck_assert_int_eq(teng_param_write(&net, 1, 1, &gb), 0);
    ck_assert_int_eq(topt_sgd_step(&o, 2.0), 0); /* v = 1 */
    ck_assert_int_eq(teng_param_write(&net, 1, 1, z), 0);
    ck_assert_int_eq(topt_sgd_step(&o, 1.0), 0); /* v = 0.9 */
    float b3;
    ck_assert_int_eq(teng_param_read(&net, 1, 0, &b3), 0);
    ck_assert_double_eq_tol(b3, b2 - 1.0 - 0.9, 1e-6);
    /* Momentum state round-trips in canonical layout (checkpoints):
     * set v = (1, -2) for the weight and step with zero grads, no wd. */
    float vin[2] = {1.f, -2.f}, vout[2], w4[2], w5[2];
    ck_assert_int_eq(topt_sgd_state_write(&o, 0, vin), 0);
    ck_assert_int_eq(topt_sgd_state_read(&o, 0, vout), 0);
    ck_assert_int_eq(memcmp(vin, vout, sizeof(vin)), 0);
    ck_assert_int_eq(teng_param_read(&net, 0, 0, w4), 0);
    ck_assert_int_eq(topt_sgd_step(&o, 1.0), 0);
    ck_assert_int_eq(teng_param_read(&net, 0, 0, w5), 0);
    ck_assert_double_eq_tol(w5[0], w4[0] - 0.9, 1e-6);
    ck_assert_double_eq_tol(w5[1], w4[1] + 1.8, 1e-6);
    ck_assert_int_eq(topt_sgd_state_read(&o, 7, vout), TENG_EINVAL);
    topt_sgd_free(&o);
    teng_net_free(&net);
    teng_backend_close(bk);
}
END_TEST

START_TEST(lars_on_bias_when_not_excluded)
{
    /* --no-exclude-bn-bias: the bias (|b| = 2, |g| = 0.5) gets its own
     * trust ratio and weight decay like any weight. */
    teng_backend *bk = lh_backend();
    teng_net net;
    topt_sgd o;
    topt_config c;
    teng_net_init(&net);
    int x = teng_add_input(&net, 1, 1, 1);
    ck_assert_int_ge(teng_add_fc(&net, "fc", x, 1, 1), 0);
    ck_assert_int_eq(teng_net_compile(&net, bk, 1), 0);
    float w = 1.f, gw = 1.f, b = 2.f, gb = 0.5f, nb;
    ck_assert_int_eq(teng_param_write(&net, 0, 0, &w), 0);
    ck_assert_int_eq(teng_param_write(&net, 0, 1, &gw), 0);
    ck_assert_int_eq(teng_param_write(&net, 1, 0, &b), 0);
    ck_assert_int_eq(teng_param_write(&net, 1, 1, &gb), 0);
    topt_config_defaults(&c);
    c.lars = 1;
    c.lars_eps = 0;
    c.weight_decay = 0.01;
    c.exclude_bn_bias = 0;
    ck_assert_int_eq(topt_sgd_init(&o, &net, &c), 0);
    ck_assert_int_eq(topt_sgd_step(&o, 1.0), 0);
    double t = 0.001 * 2 / (0.5 + 0.01 * 2);
    ck_assert_float_eq_tol(o.trust[1], t, 1e-8);
    ck_assert_int_eq(teng_param_read(&net, 1, 0, &nb), 0);
    ck_assert_double_eq_tol(nb, 2 - t * (0.5 + 0.01 * 2), 1e-7);
    topt_sgd_free(&o);
    teng_net_free(&net);
    teng_backend_close(bk);
}
END_TEST

START_TEST(fits_a_fixed_batch)
{
    /* ResNet-8 on 8 random 12x12 images of 4 classes: 30 steps of
     * momentum SGD must drive the loss far below ln 4. */
    enum { N = 8 };
    teng_backend *bk = lh_backend();
    teng_net net;
    topt_sgd o;
    topt_config c;
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    s.depth = 8;
    s.image_size = 12;
    s.classes = 4;
    teng_net_init(&net);
    ck_assert_int_ge(tmodel_build(&net, &s), 0);
    ck_assert_int_eq(teng_net_compile(&net, bk, N), 0);
    ck_assert_int_eq(tmodel_init(&net, 3), 0);
    topt_config_defaults(&c);
    c.lars = _i; /* with and without LARS */
    c.lars_eta = 0.02;
    ck_assert_int_eq(topt_sgd_init(&o, &net, &c), 0);
    float x[N * 144];
    int32_t y[N];
    for (int i = 0; i < N * 144; i++)
        x[i] = sinf((float)i * 0.37f) + cosf((float)(i * i) * 0.011f);
    for (int i = 0; i < N; i++)
        y[i] = i % 4;
    ck_assert_int_eq(teng_net_set_input(&net, x), 0);
    ck_assert_int_eq(teng_net_set_labels(&net, y), 0);
    double first = 0, last = 0;
    for (int step = 0; step < 30; step++) {
        ck_assert_int_eq(teng_net_forward(&net, 1), 0);
        ck_assert_int_eq(teng_net_backward(&net), 0);
        ck_assert_int_eq(topt_sgd_step(&o, c.lars ? 1.0 : 0.1), 0);
        last = teng_net_loss(&net);
        if (!step)
            first = last;
    }
    ck_assert_double_eq_tol(first, log(4.0), 0.1);
    ck_assert_msg(last < 0.3, "loss %g after 30 steps (from %g)", last, first);
    topt_sgd_free(&o);
    teng_net_free(&net);
    teng_backend_close(bk);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optim");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, linear_scaling_and_warmup);
    tcase_add_test(tc, poly_cosine_step);
    tcase_add_test(tc, sony_batch_schedule);
    tcase_add_test(tc, bad_values);
    tcase_add_test(tc, lars_trust_by_hand);
#ifdef TORUS_HAVE_DNNL
    tcase_add_test(tc, sgd_lars_update_by_hand);
    tcase_add_test(tc, lars_on_bias_when_not_excluded);
    tcase_add_loop_test(tc, fits_a_fixed_batch, 0, 2);
#endif
    suite_add_tcase(s, tc);
    return lh_run(s);
}
