/* test_layers_ref.c: oneDNN layers against naive reference loops on
 * random inputs (forward everywhere, backward for conv and batch norm),
 * in blocked layouts (16+ channels) and with stride and padding. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/layer_harness.h"

static teng_backend *bk;

static void _setup(void)
{
    bk = lh_backend();
}

static void _teardown(void)
{
    teng_backend_close(bk);
}

#define IDX(n, c, h, w, C, H, W) \
    ((((size_t)(n) * (C) + (c)) * (H) + (h)) * (W) + (w))

static float *_buf(size_t n)
{
    float *p = calloc(n, sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

static void _close(const float *a, const float *b, size_t n, double tol,
                   const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(a[i] - b[i]) <= tol * (1.0 + fabs(b[i])),
                      "%s[%zu]: %g vs reference %g", what, i, a[i], b[i]);
}

/* Compiles a net, writes random input and params. */
static float *_prepare(teng_net *net, int n, unsigned seed)
{
    ck_assert_msg(teng_net_compile(net, bk, n) == TENG_OK, "%s",
                  torus_error_msg());
    size_t nx = teng_tensor_count(net, net->input);
    float *x = _buf(nx);
    lh_fill(x, nx, seed, -1.f, 1.f);
    ck_assert_int_eq(teng_net_set_input(net, x), TENG_OK);
    for (int p = 0; p < net->np; p++) {
        float *v = _buf(net->p[p].count);
        lh_fill(v, net->p[p].count, seed + 1 + p, -0.5f, 0.5f);
        ck_assert_int_eq(teng_param_write(net, p, 0, v), TENG_OK);
        free(v);
    }
    return x;
}

static float *_param(teng_net *net, int p, int grad)
{
    float *v = _buf(net->p[p].count);
    ck_assert_int_eq(teng_param_read(net, p, grad, v), TENG_OK);
    return v;
}

static float *_tensor(teng_net *net, int t, int grad)
{
    float *v = _buf(teng_tensor_count(net, t));
    ck_assert_int_eq(teng_tensor_read(net, t, grad, v), TENG_OK);
    return v;
}

START_TEST(conv_fwd_bwd)
{
    enum { N = 2, C = 16, HI = 7, K = 32, KS = 3, S = 2, P = 1, HO = 4 };
    teng_net net;
    teng_net_init(&net);
    int in = teng_add_input(&net, C, HI, HI);
    int y = teng_add_conv(&net, "c", in, K, KS, S, P, 1);
    teng_net_set_input_grad(&net, 1);
    float *x = _prepare(&net, N, 5);
    float *w = _param(&net, 0, 0), *b = _param(&net, 1, 0);
    size_t ny = (size_t)N * K * HO * HO, nx = (size_t)N * C * HI * HI;
    float *ref = _buf(ny), *dy = _buf(ny), *dxr = _buf(nx);
    float *dwr = _buf((size_t)K * C * KS * KS), *dbr = _buf(K);
    lh_fill(dy, ny, 77, -1.f, 1.f);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int oh = 0; oh < HO; oh++)
                for (int ow = 0; ow < HO; ow++) {
                    double s = b[k];
                    float g = dy[IDX(n, k, oh, ow, K, HO, HO)];
                    dbr[k] += g;
                    for (int c = 0; c < C; c++)
                        for (int i = 0; i < KS; i++)
                            for (int j = 0; j < KS; j++) {
                                int ih = oh * S - P + i, iw = ow * S - P + j;
                                if (ih < 0 || iw < 0 || ih >= HI || iw >= HI)
                                    continue;
                                size_t xi = IDX(n, c, ih, iw, C, HI, HI);
                                size_t wi = IDX(k, c, i, j, C, KS, KS);
                                s += (double)x[xi] * w[wi];
                                dxr[xi] += g * w[wi];
                                dwr[wi] += g * x[xi];
                            }
                    ref[IDX(n, k, oh, ow, K, HO, HO)] = (float)s;
                }
    ck_assert_int_eq(teng_net_forward(&net, 1), TENG_OK);
    float *out = _tensor(&net, y, 0);
    _close(out, ref, ny, 1e-4, "conv y");
    ck_assert_int_eq(teng_tensor_write(&net, y, 1, dy), TENG_OK);
    ck_assert_int_eq(teng_net_backward(&net), TENG_OK);
    float *dx = _tensor(&net, in, 1), *dw = _param(&net, 0, 1);
    float *db = _param(&net, 1, 1);
    _close(dx, dxr, nx, 1e-4, "conv dx");
    _close(dw, dwr, (size_t)K * C * KS * KS, 1e-4, "conv dw");
    _close(db, dbr, K, 1e-4, "conv db");
    free(x), free(w), free(b), free(ref), free(dy), free(dxr), free(dwr);
    free(dbr), free(out), free(dx), free(dw), free(db);
    teng_net_free(&net);
}
END_TEST

START_TEST(bn_train_infer_bwd)
{
    enum { N = 3, C = 16, HW = 3, M = N * HW * HW };
    const float eps = 1e-5f;
    teng_net net;
    teng_net_init(&net);
    int in = teng_add_input(&net, C, HW, HW);
    int y = teng_add_bn(&net, "bn", in, 1, 0);
    teng_net_set_input_grad(&net, 1);
    float *x = _prepare(&net, N, 9);
    float *g = _param(&net, 0, 0), *be = _param(&net, 1, 0);
    size_t nx = (size_t)N * C * HW * HW;
    float *ref = _buf(nx), *dy = _buf(nx), *dxr = _buf(nx);
    float mean[C], var[C], dgr[C], dbr[C];
    lh_fill(dy, nx, 31, -1.f, 1.f);
    for (int c = 0; c < C; c++) {
        double s = 0, s2 = 0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW * HW; i++)
                s += x[IDX(n, c, 0, i, C, 1, HW * HW)];
        mean[c] = (float)(s / M);
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW * HW; i++) {
                double d = x[IDX(n, c, 0, i, C, 1, HW * HW)] - mean[c];
                s2 += d * d;
            }
        var[c] = (float)(s2 / M);
        double inv = 1.0 / sqrt(var[c] + eps), sdy = 0, sdyx = 0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW * HW; i++) {
                size_t k = IDX(n, c, 0, i, C, 1, HW * HW);
                double xh = (x[k] - mean[c]) * inv, o = g[c] * xh + be[c];
                ref[k] = o > 0 ? (float)o : 0.f;
                double d = o > 0 ? dy[k] : 0.0; /* through the fused ReLU */
                sdy += d;
                sdyx += d * xh;
            }
        dgr[c] = (float)sdyx;
        dbr[c] = (float)sdy;
        /* dx = gamma/sigma * (dy - mean(dy) - xhat * mean(dy * xhat)) */
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW * HW; i++) {
                size_t k = IDX(n, c, 0, i, C, 1, HW * HW);
                double xh = (x[k] - mean[c]) * inv;
                double o = g[c] * xh + be[c], d = o > 0 ? dy[k] : 0.0;
                dxr[k] = (float)(g[c] * inv * (d - sdy / M - xh * sdyx / M));
            }
    }
    ck_assert_int_eq(teng_net_forward(&net, 1), TENG_OK);
    float *out = _tensor(&net, y, 0);
    _close(out, ref, nx, 1e-4, "bn y");
    /* Running statistics after one step with momentum 0.1. */
    float rm[C], rv[C];
    ck_assert_int_eq(teng_stats_read(&net, 0, rm), TENG_OK);
    ck_assert_int_eq(teng_stats_read(&net, 1, rv), TENG_OK);
    for (int c = 0; c < C; c++) {
        ck_assert_float_eq_tol(rm[c], 0.1f * mean[c], 1e-5f);
        ck_assert_float_eq_tol(rv[c], 0.9f + 0.1f * var[c] * M / (M - 1),
                               1e-5f);
    }
    ck_assert_int_eq(teng_tensor_write(&net, y, 1, dy), TENG_OK);
    ck_assert_int_eq(teng_net_backward(&net), TENG_OK);
    float *dx = _tensor(&net, in, 1), *dg = _param(&net, 0, 1);
    float *db = _param(&net, 1, 1);
    _close(dx, dxr, nx, 1e-3, "bn dx");
    _close(dg, dgr, C, 1e-4, "bn dgamma");
    _close(db, dbr, C, 1e-4, "bn dbeta");
    /* Inference uses the running statistics. */
    for (int c = 0; c < C; c++) {
        rm[c] = 0.25f * (float)(c % 3);
        rv[c] = 0.5f + 0.1f * (float)c;
    }
    ck_assert_int_eq(teng_stats_write(&net, 0, rm), TENG_OK);
    ck_assert_int_eq(teng_stats_write(&net, 1, rv), TENG_OK);
    ck_assert_int_eq(teng_net_forward(&net, 0), TENG_OK);
    ck_assert_int_eq(teng_tensor_read(&net, y, 0, out), TENG_OK);
    for (size_t k = 0; k < nx; k++) {
        int c = (int)((k / (HW * HW)) % C);
        double o = g[c] * (x[k] - rm[c]) / sqrt(rv[c] + eps) + be[c];
        ck_assert_float_eq_tol(out[k], o > 0 ? o : 0.0, 1e-4);
    }
    free(x), free(g), free(be), free(ref), free(dy), free(dxr), free(out);
    free(dx), free(dg), free(db);
    teng_net_free(&net);
}
END_TEST

/* Naive pooling: max, or average over the window inside the image. */
static void _pool_ref(const float *x, float *y, int N, int C, int HI, int HO,
                      int k, int s, int p, int is_max)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int oh = 0; oh < HO; oh++)
                for (int ow = 0; ow < HO; ow++) {
                    double acc = is_max ? -INFINITY : 0.0;
                    int cnt = 0;
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++) {
                            int ih = oh * s - p + i, iw = ow * s - p + j;
                            if (ih < 0 || iw < 0 || ih >= HI || iw >= HI)
                                continue;
                            float v = x[IDX(n, c, ih, iw, C, HI, HI)];
                            acc = is_max ? fmax(acc, v) : acc + v;
                            cnt++;
                        }
                    y[IDX(n, c, oh, ow, C, HO, HO)] =
                        (float)(is_max ? acc : acc / cnt);
                }
}

static void _pool_case(int kind)
{
    enum { N = 2, C = 16, HI = 9 };
    teng_net net;
    teng_net_init(&net);
    int in = teng_add_input(&net, C, HI, HI), y, HO, k, s, p;
    if (kind == 2) {
        y = teng_add_gap(&net, "gap", in);
        HO = 1, k = HI, s = HI, p = 0;
    } else {
        k = 3, s = 2, p = 1;
        y = kind ? teng_add_maxpool(&net, "mp", in, k, s, p)
                 : teng_add_avgpool(&net, "ap", in, k, s, p);
        HO = 5;
    }
    ck_assert_int_ge(y, 0);
    ck_assert_int_eq(net.t[y].shape.h, HO);
    float *x = _prepare(&net, N, 21 + kind);
    size_t ny = (size_t)N * C * HO * HO;
    float *ref = _buf(ny);
    _pool_ref(x, ref, N, C, HI, HO, k, s, p, kind == 1);
    ck_assert_int_eq(teng_net_forward(&net, 1), TENG_OK);
    float *out = _tensor(&net, y, 0);
    _close(out, ref, ny, 1e-5, kind == 1 ? "maxpool" : "avgpool");
    free(x), free(ref), free(out);
    teng_net_free(&net);
}

START_TEST(avgpool_ref)
{
    _pool_case(0);
}
END_TEST

START_TEST(maxpool_ref)
{
    _pool_case(1);
}
END_TEST

START_TEST(gap_ref)
{
    _pool_case(2);
}
END_TEST

START_TEST(fc_relu_add_ref)
{
    /* fc on a 4-D input (implicit flatten), then relu, then a residual
     * of the fc output with itself through relu. */
    enum { N = 3, C = 4, HW = 2, K = 6, F = C * HW * HW };
    teng_net net;
    teng_net_init(&net);
    int in = teng_add_input(&net, C, HW, HW);
    int f = teng_add_fc(&net, "fc", in, K, 1);
    int r = teng_add_relu(&net, "relu", f);
    int a = teng_add_residual(&net, "add", f, r, 1);
    ck_assert_int_ge(a, 0);
    teng_net_set_no_reuse(&net, 1); /* we read intermediate tensors */
    float *x = _prepare(&net, N, 41);
    float *w = _param(&net, 0, 0), *b = _param(&net, 1, 0);
    ck_assert_int_eq(teng_net_forward(&net, 1), TENG_OK);
    float *fo = _tensor(&net, f, 0), *ro = _tensor(&net, r, 0);
    float *ao = _tensor(&net, a, 0);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double s = b[k];
            for (int i = 0; i < F; i++)
                s += (double)x[n * F + i] * w[k * F + i];
            float rr = s > 0 ? (float)s : 0.f, sum = (float)s + rr;
            ck_assert_float_eq_tol(fo[n * K + k], s, 1e-5);
            ck_assert_float_eq_tol(ro[n * K + k], rr, 1e-5);
            ck_assert_float_eq_tol(ao[n * K + k], sum > 0 ? sum : 0.f, 1e-5);
        }
    free(x), free(w), free(b), free(fo), free(ro), free(ao);
    teng_net_free(&net);
}
END_TEST

START_TEST(xent_and_dropout_ref)
{
    enum { N = 4, K = 5 };
    int32_t labels[N] = {1, 0, 4, 2};
    teng_net net;
    teng_net_init(&net);
    int in = teng_add_input(&net, 3, 1, 1);
    int z = teng_add_fc(&net, "fc", in, K, 1);
    int d = teng_add_dropout(&net, "drop", z, 0.5f);
    ck_assert_int_ge(teng_add_xent(&net, "loss", d, 0.1f), 0);
    teng_net_set_no_reuse(&net, 1);
    float *x = _prepare(&net, N, 51);
    ck_assert_int_eq(teng_net_set_labels(&net, labels), TENG_OK);
    /* Inference: dropout is the identity and the loss is the smoothed
     * cross-entropy of the fc output. */
    ck_assert_int_eq(teng_net_forward(&net, 0), TENG_OK);
    float *zo = _tensor(&net, z, 0), *dout = _tensor(&net, d, 0);
    _close(dout, zo, N * K, 0, "dropout (inference)");
    double ref = 0;
    for (int n = 0; n < N; n++) {
        double m = -INFINITY, s = 0;
        for (int k = 0; k < K; k++)
            m = fmax(m, zo[n * K + k]);
        for (int k = 0; k < K; k++)
            s += exp(zo[n * K + k] - m);
        for (int k = 0; k < K; k++) {
            double t = 0.1 / K + (k == labels[n] ? 0.9 : 0.0);
            ref -= t * (zo[n * K + k] - m - log(s));
        }
    }
    ck_assert_double_eq_tol(teng_net_loss(&net), ref / N, 1e-5);
    int top1, top5;
    ck_assert_int_eq(teng_net_topk(&net, &top1, &top5), TENG_OK);
    ck_assert_int_eq(top5, N); /* 5 classes: always in the top 5 */
    /* Training: each output is 0 or doubled. */
    ck_assert_int_eq(teng_net_forward(&net, 1), TENG_OK);
    ck_assert_int_eq(teng_tensor_read(&net, d, 0, dout), TENG_OK);
    for (int i = 0; i < N * K; i++)
        ck_assert(dout[i] == 0.f || fabsf(dout[i] - 2.f * zo[i]) < 1e-6f);
    free(x), free(zo), free(dout);
    teng_net_free(&net);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layers_ref");
    TCase *tc = tcase_create("reference");
    tcase_add_checked_fixture(tc, _setup, _teardown);
    tcase_add_test(tc, conv_fwd_bwd);
    tcase_add_test(tc, bn_train_infer_bwd);
    tcase_add_test(tc, avgpool_ref);
    tcase_add_test(tc, maxpool_ref);
    tcase_add_test(tc, gap_ref);
    tcase_add_test(tc, fc_relu_add_ref);
    tcase_add_test(tc, xent_and_dropout_ref);
    suite_add_tcase(s, tc);
    return lh_run(s);
}
