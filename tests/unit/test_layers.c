/* test_layers.c: finite-difference gradient checks for every engine layer
 * on the oneDNN backend, alone and in small graphs (blocked layouts
 * between layers, residual fan-in, loss). Shapes are tiny: the whole file
 * runs in seconds on 2 cores. */
#include <check.h>
#include <stdlib.h>

#include "tests/unit/layer_harness.h"
#include "trainer/models/tmodel.h"

#define H       1e-2
#define ATOL    2e-3
#define RTOL    2e-2
#define SAMPLES 24

static teng_backend *bk;

static void _setup(void)
{
    bk = lh_backend();
}

static void _teardown(void)
{
    teng_backend_close(bk);
}

/* Compiles net at batch n, fills the input (spaced or uniform) and runs
 * the gradient check on tensor out. */
static void _gradcheck_h(teng_net *net, int out, int n, int spaced, double h)
{
    char msg[256];
    teng_net_set_input_grad(net, 1);
    ck_assert_msg(teng_net_compile(net, bk, n) == TENG_OK, "%s",
                  torus_error_msg());
    size_t nx = teng_tensor_count(net, net->input);
    float *x = malloc(nx * sizeof(float));
    ck_assert_ptr_nonnull(x);
    if (spaced)
        lh_fill_spaced(x, nx, 7);
    else
        lh_fill(x, nx, 7, -1.f, 1.f);
    /* Params: small random values so every path carries gradient (a
     * fresh BN has gamma 1, beta 0 which we keep apart from noise). */
    for (int p = 0; p < net->np; p++) {
        float *v = malloc(net->p[p].count * sizeof(float));
        ck_assert_ptr_nonnull(v);
        lh_fill(v, net->p[p].count, 11 + p, -0.5f, 0.5f);
        if (net->p[p].kind == TENG_P_GAMMA)
            for (size_t i = 0; i < net->p[p].count; i++)
                v[i] += 1.0f;
        ck_assert_int_eq(teng_param_write(net, p, 0, v), TENG_OK);
        free(v);
    }
    int bad =
        lh_gradcheck(net, out, x, h, ATOL, RTOL, SAMPLES, msg, sizeof(msg));
    ck_assert_msg(bad == 0, "%d mismatches; first: %s", bad, msg);
    free(x);
    teng_net_free(net);
}

static void _gradcheck(teng_net *net, int out, int n, int spaced)
{
    _gradcheck_h(net, out, n, spaced, H);
}

/* Where many elements sit behind one ReLU (BN+ReLU, residual+ReLU) a
 * finite step crosses kinks in proportion to its size: use a smaller one
 * (fp32 rounding still far below the tolerance at these sizes). */
#define H_KINKY 1e-3

START_TEST(conv_bias_stride1)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 3, 5, 5);
    int y = teng_add_conv(&net, "c", x, 4, 3, 1, 1, 1);
    ck_assert_int_ge(y, 0);
    _gradcheck(&net, y, 2, 0);
}
END_TEST

START_TEST(conv_stride2_blocked)
{
    /* 16 channels make oneDNN pick its blocked layouts; the second conv
     * reads the first one's blocked output. */
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 16, 6, 6);
    int a = teng_add_conv(&net, "c1", x, 16, 3, 2, 1, 0);
    int b = teng_add_conv(&net, "c2", a, 16, 1, 1, 0, 0);
    ck_assert_int_ge(b, 0);
    _gradcheck(&net, b, 2, 0);
}
END_TEST

START_TEST(bn_train)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 16, 4, 4);
    int y = teng_add_bn(&net, "bn", x, 0, 0);
    ck_assert_int_ge(y, 0);
    _gradcheck(&net, y, 3, 0);
}
END_TEST

START_TEST(bn_relu_after_conv)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 3, 5, 5);
    int a = teng_add_conv(&net, "c", x, 16, 3, 1, 1, 0);
    int y = teng_add_bn(&net, "bn", a, 1, 0);
    ck_assert_int_ge(y, 0);
    _gradcheck_h(&net, y, 2, 0, H_KINKY);
}
END_TEST

START_TEST(relu)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 5, 3, 3);
    int y = teng_add_relu(&net, "r", x);
    ck_assert_int_ge(y, 0);
    _gradcheck(&net, y, 2, 1);
}
END_TEST

START_TEST(maxpool)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 3, 7, 7);
    int y = teng_add_maxpool(&net, "mp", x, 3, 2, 1);
    ck_assert_int_ge(y, 0);
    _gradcheck(&net, y, 2, 1);
}
END_TEST

START_TEST(avgpool)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 3, 7, 7);
    int y = teng_add_avgpool(&net, "ap", x, 3, 2, 1);
    ck_assert_int_ge(y, 0);
    _gradcheck(&net, y, 2, 0);
}
END_TEST

START_TEST(gap)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 16, 5, 5);
    int a = teng_add_conv(&net, "c", x, 16, 1, 1, 0, 0);
    int y = teng_add_gap(&net, "gap", a);
    ck_assert_int_ge(y, 0);
    _gradcheck(&net, y, 2, 0);
}
END_TEST

START_TEST(fc_4d_then_2d)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 4, 3, 3);
    int a = teng_add_fc(&net, "fc1", x, 6, 1);
    int y = teng_add_fc(&net, "fc2", a, 5, 1);
    ck_assert_int_ge(y, 0);
    _gradcheck(&net, y, 3, 0);
}
END_TEST

START_TEST(alexnet_tail_blocked)
{
    /* AlexNet-BN's tail on blocked layouts: conv -> BN+ReLU -> max pool
     * -> BN (the Tencent pool5 BN) -> fc (flattening nChw16c) -> ReLU ->
     * dropout -> fc. */
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 3, 7, 7);
    int c = teng_add_conv(&net, "conv", x, 16, 3, 1, 1, 0);
    int b = teng_add_bn(&net, "bn", c, 1, 0);
    int m = teng_add_maxpool(&net, "pool", b, 3, 2, 0);
    int b5 = teng_add_bn(&net, "bn5", m, 0, 0);
    int f = teng_add_fc(&net, "fc6", b5, 8, 1);
    int r = teng_add_relu(&net, "relu6", f);
    int d = teng_add_dropout(&net, "drop6", r, 0.25f);
    int y = teng_add_fc(&net, "fc7", d, 3, 1);
    ck_assert_int_ge(y, 0);
    _gradcheck_h(&net, y, 3, 0, H_KINKY);
}
END_TEST

/* x feeds both the branch and the shortcut: its gradient is the sum of
 * two contributions, one of which aliases the add's output grad; the
 * block output y feeds a second residual the same way. */
static void _residual(int relu, double h)
{
    teng_net net;
    teng_net_init(&net);
    int in = teng_add_input(&net, 3, 4, 4);
    int x = teng_add_conv(&net, "c0", in, 16, 3, 1, 1, 0);
    int a = teng_add_conv(&net, "c1", x, 16, 3, 1, 1, 0);
    int b = teng_add_bn(&net, "bn1", a, 0, 0);
    int y = teng_add_residual(&net, "add", b, x, relu);
    int z = teng_add_conv(&net, "c2", y, 16, 1, 1, 0, 0);
    int w = teng_add_residual(&net, "add2", z, y, relu);
    ck_assert_int_ge(w, 0);
    _gradcheck_h(&net, w, 2, 0, h);
}

START_TEST(residual_fanout)
{
    _residual(0, H); /* smooth: any mismatch is a real error */
}
END_TEST

START_TEST(residual_relu)
{
    _residual(1, H_KINKY);
}
END_TEST

START_TEST(dropout)
{
    teng_net net;
    teng_net_init(&net);
    int x = teng_add_input(&net, 8, 2, 2);
    int y = teng_add_dropout(&net, "do", x, 0.3f);
    ck_assert_int_ge(y, 0);
    _gradcheck(&net, y, 4, 0);
}
END_TEST

static void _xent(float smoothing)
{
    teng_net net;
    int32_t labels[4] = {0, 4, 2, 4};
    char msg[256];
    teng_net_init(&net);
    int x = teng_add_input(&net, 3, 2, 2);
    int z = teng_add_fc(&net, "fc", x, 5, 1);
    ck_assert_int_ge(teng_add_xent(&net, "loss", z, smoothing), 0);
    teng_net_set_input_grad(&net, 1);
    ck_assert_int_eq(teng_net_compile(&net, bk, 4), TENG_OK);
    ck_assert_int_eq(teng_net_set_labels(&net, labels), TENG_OK);
    float xin[4 * 12];
    lh_fill(xin, 48, 5, -2.f, 2.f);
    int bad = lh_gradcheck(&net, -1, xin, 1e-2, 1e-4, 2e-2, SAMPLES, msg,
                           sizeof(msg));
    ck_assert_msg(bad == 0, "%d mismatches; first: %s", bad, msg);
    teng_net_free(&net);
}

START_TEST(xent_plain)
{
    _xent(0.0f);
}
END_TEST

START_TEST(xent_smoothing)
{
    _xent(0.1f);
}
END_TEST

START_TEST(whole_resnet8)
{
    /* Every layer together: ResNet-8 with its projection shortcuts,
     * in-place residuals and gradient fan-in, through the loss. */
    teng_net net;
    char msg[256];
    int32_t labels[4] = {3, 0, 2, 1};
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    s.depth = 8;
    s.image_size = 8;
    s.classes = 4;
    s.label_smoothing = 0.1f;
    teng_net_init(&net);
    ck_assert_int_ge(tmodel_build(&net, &s), 0);
    teng_net_set_input_grad(&net, 1);
    ck_assert_int_eq(teng_net_compile(&net, bk, 4), TENG_OK);
    ck_assert_int_eq(tmodel_init(&net, 4), TENG_OK);
    /* Non-zero gammas everywhere, so that every branch carries signal. */
    for (int p = 0; p < net.np; p++)
        if (net.p[p].kind == TENG_P_GAMMA) {
            float g[64];
            lh_fill(g, net.p[p].count, 50 + p, 0.5f, 1.5f);
            ck_assert_int_eq(teng_param_write(&net, p, 0, g), TENG_OK);
        }
    ck_assert_int_eq(teng_net_set_labels(&net, labels), TENG_OK);
    float x[4 * 64];
    lh_fill(x, 4 * 64, 3, -1.f, 1.f);
    /* atol: a loss of ~1.4 in fp32 differs by ~1e-7 between passes, which
     * a step of 2e-3 turns into ~1e-4 of noise on small gradients. */
    int bad =
        lh_gradcheck(&net, -1, x, H_KINKY, 3e-4, 3e-2, 6, msg, sizeof(msg));
    ck_assert_msg(bad == 0, "%d mismatches; first: %s", bad, msg);
    teng_net_free(&net);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("gradcheck");
    tcase_add_checked_fixture(tc, _setup, _teardown);
    tcase_add_test(tc, conv_bias_stride1);
    tcase_add_test(tc, conv_stride2_blocked);
    tcase_add_test(tc, bn_train);
    tcase_add_test(tc, bn_relu_after_conv);
    tcase_add_test(tc, relu);
    tcase_add_test(tc, maxpool);
    tcase_add_test(tc, avgpool);
    tcase_add_test(tc, gap);
    tcase_add_test(tc, fc_4d_then_2d);
    tcase_add_test(tc, alexnet_tail_blocked);
    tcase_add_test(tc, residual_fanout);
    tcase_add_test(tc, residual_relu);
    tcase_add_test(tc, dropout);
    tcase_add_test(tc, xent_plain);
    tcase_add_test(tc, xent_smoothing);
    tcase_add_test(tc, whole_resnet8);
    suite_add_tcase(s, tc);
    return lh_run(s);
}
