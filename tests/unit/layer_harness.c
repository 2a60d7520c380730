/* layer_harness.c: backend, fills and the finite-difference gradient check
 * shared by the layer tests. */
#include "tests/unit/layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/backends/tbackends.h"
#include "trainer/engine/rng.h"

teng_backend *lh_backend(void)
{
    /* One thread: the shapes are tiny, and spinning OpenMP workers on a
     * busy 2-core machine cost far more than they bring. */
    teng_backend_opts o = {.threads = 1};
    teng_backend *bk = NULL;
    if (tbackends_open("dnnl", &o, &bk)) {
        fprintf(stderr, "backend: %s\n", torus_error_msg());
        abort();
    }
    return bk;
}

int lh_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void lh_fill(float *v, size_t n, unsigned seed, float lo, float hi)
{
    teng_rng r;
    teng_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * teng_rng_uniform(&r);
}

void lh_fill_spaced(float *v, size_t n, unsigned seed)
{
    teng_rng r;
    teng_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        v[i] = ((float)i - (float)(n / 2) + 0.5f) * 0.05f;
    for (size_t i = n; i > 1; i--) {
        size_t j = teng_rng_next(&r) % i;
        float t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* Forward in training mode with a fixed dropout step; returns sum(y*r),
 * or the net's own loss when out < 0. */
static double _loss(teng_net *net, int out, const float *r, float *y)
{
    net->step = 0;
    if (teng_net_forward(net, 1) ||
        (out >= 0 && teng_tensor_read(net, out, 0, y))) {
        fprintf(stderr, "forward: %s\n", torus_error_msg());
        abort();
    }
    if (out < 0)
        return teng_net_loss(net);
    double s = 0.0;
    size_t n = teng_tensor_count(net, out);
    for (size_t i = 0; i < n; i++)
        s += (double)y[i] * r[i];
    return s;
}

typedef int (*_io)(teng_net *, int, int, float *);

static int _rd_param(teng_net *n, int id, int g, float *d)
{
    return teng_param_read(n, id, g, d);
}
static int _wr_param(teng_net *n, int id, int g, float *d)
{
    return teng_param_write(n, id, g, d);
}
static int _rd_tensor(teng_net *n, int id, int g, float *d)
{
    return teng_tensor_read(n, id, g, d);
}
static int _wr_tensor(teng_net *n, int id, int g, float *d)
{
    return teng_tensor_write(n, id, g, d);
}

/* Checks one buffer (param or input): value v (len n) and analytic g. */
static int _check(teng_net *net, int out, const float *r, float *y, int id,
                  size_t n, const float *v0, const float *g0, _io rd, _io wr,
                  const char *what, double h, double atol, double rtol,
                  int samples, char *msg, size_t msglen, int *bad, int *total,
                  int *kinks)
{
    float *v = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
    if (!v || !g || (!v0 && rd(net, id, 0, v)) || (!g0 && rd(net, id, 1, g)))
        abort();
    if (v0)
        memcpy(v, v0, n * sizeof(float));
    if (g0)
        memcpy(g, g0, n * sizeof(float));
    size_t stride = n > (size_t)samples ? n / (size_t)samples : 1;
    for (size_t i = 0; i < n; i += stride) {
        /* Central differences at h and h/2: where they disagree the loss
         * is not smooth around this point (a ReLU or max-pool kink lies
         * within h), so the sample says nothing and is skipped. */
        double fd[2];
        float keep = v[i];
        for (int k = 0; k < 2; k++) {
            float hk = (float)(k ? h / 2 : h);
            v[i] = keep + hk;
            wr(net, id, 0, v);
            double lp = _loss(net, out, r, y);
            v[i] = keep - hk;
            wr(net, id, 0, v);
            double lm = _loss(net, out, r, y);
            fd[k] = (lp - lm) / (2.0 * hk);
        }
        v[i] = keep;
        wr(net, id, 0, v);
        double an = g[i];
        (*total)++;
        if (fabs(fd[0] - fd[1]) > atol + rtol * fabs(fd[1])) {
            (*kinks)++;
            continue;
        }
        if (fabs(fd[1] - an) > atol + rtol * fabs(an)) {
            if (!(*bad)++)
                snprintf(msg, msglen,
                         "%s %d element %zu: analytic %.6g, "
                         "finite difference %.6g",
                         what, id, i, an, fd[1]);
        }
    }
    free(v);
    free(g);
    return 0;
}

int lh_gradcheck(teng_net *net, int out, const float *input, double h,
                 double atol, double rtol, int samples, char *msg,
                 size_t msglen)
{
    size_t ny = out >= 0 ? teng_tensor_count(net, out) : 1;
    float *r = malloc(ny * sizeof(float)), *y = malloc(ny * sizeof(float));
    int bad = 0, total = 0, kinks = 0;
    if (!r || !y)
        abort();
    lh_fill(r, ny, 99, -1.f, 1.f);
    msg[0] = '\0';
    if (teng_net_set_input(net, input))
        abort();
    _loss(net, out, r, y);
    if ((out >= 0 && teng_tensor_write(net, out, 1, r)) ||
        teng_net_backward(net)) {
        fprintf(stderr, "backward: %s\n", torus_error_msg());
        abort();
    }
    /* The input and its gradient live in the activation arena, which
     * backward and the perturbed forward passes reuse: take the input
     * from the caller and copy its gradient out now. Params and their
     * gradients have arenas of their own and are read by each check. */
    size_t nin = teng_tensor_count(net, net->input);
    float *gin = malloc(nin * sizeof(float));
    if (!gin || (net->input_grad && teng_tensor_read(net, net->input, 1, gin)))
        abort();
    for (int p = 0; p < net->np; p++)
        _check(net, out, r, y, p, net->p[p].count, NULL, NULL, _rd_param,
               _wr_param, net->p[p].name, h, atol, rtol, samples, msg, msglen,
               &bad, &total, &kinks);
    if (net->input_grad)
        _check(net, out, r, y, net->input, nin, input, gin, _rd_tensor,
               _wr_tensor, "input", h, atol, rtol, samples, msg, msglen, &bad,
               &total, &kinks);
    free(r);
    free(y);
    free(gin);
    /* A few kinks are expected with ReLU and max pooling; many mean the
     * check tested nothing. */
    if (kinks * 4 > total) {
        if (!bad)
            snprintf(msg, msglen, "%d of %d samples not smooth", kinks, total);
        bad++;
    }
    return bad;
}
