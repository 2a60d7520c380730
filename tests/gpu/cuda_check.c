/*
 * cuda_check.c: the cuda engine backend against the oneDNN backend, on a
 * GPU (tests/gpu/run runs it; make check runs it too, and it skips
 * without a GPU). Rows, each PASS or FAIL, then a table:
 *   layers    every layer kind's forward and backward (conv with and
 *             without bias and stride, BN with and without its ReLU and
 *             its running statistics, ReLU, max/avg/global pooling, FC,
 *             residual add with and without ReLU, BN -> add -> ReLU (fused
 *             forward and backward in the FP16 mode, with activations kept
 *             and with the trainer's reuse plan), the gradient fan-in
 *             sum, dropout, softmax cross-entropy with label smoothing) on
 *             random inputs and params, the same on both backends, FP32;
 *             outputs, input gradients, param gradients and BN statistics
 *             compared to the largest reference magnitude (TOL_LAYER);
 *   tiny-cnn  50 steps of momentum SGD with LARS on the BN-free tiny-cnn,
 *             both backends from the same weights and batches: final
 *             weights within rounding (TOL_TRAIN) of each other;
 *   layers    the same on the FP16 mode ("cuda-fp16": fp16 activations and
 *   fp16      weights, fp32 masters, BN and gradients of params), to
 *             TOL_F16, or with at most OUTLIERS_F16 of the elements past
 *             it (ReLU inputs that round across zero);
 *   input     the 8-bit input path (teng_net_stage_input_u8 / use): two
 *             u8 NHWC batches with flips staged ahead in both slots, then
 *             used, on each mode against the engine's host path on dnnl:
 *             FP32 bit for bit, FP16 within its rounding (TOL_IN16);
 *   loss      a small ResNet's gradients at loss scale 1024 (divided
 *   scale     back) against scale 1 on each mode, and an infinite scale
 *             flagged by teng_net_grads_finite;
 *   step      20 steps of a small ResNet (fused BN chains in FP16, LARS)
 *   graphs    with the step recorded once and replayed (engine
 *             teng_net_graph_*) against 20 eager steps, on each mode:
 *             weights and every loss bit for bit, unless a second eager
 *             run already differs (INFO: no bitwise claim); SKIP on a
 *             backend without graphs (--self dnnl);
 *   device    the same 20 steps with the device step (engine
 *   step      teng_net_dstep: inf/nan count, LARS, update and a dynamic
 *             loss scale from 64, growing every 5 clean steps, all on
 *             the device, the lr changing every step): graphs holding the
 *             update (replayed between the host's BEGIN and END) against
 *             eager device steps, weights, losses and the device's
 *             decisions bit for bit (same control); and the eager device
 *             step against the host's step at the same scales, weights
 *             and every step's loss (within TOL_LAYER; bit for bit
 *             reported); SKIP on a backend without
 *             the device step or graphs;
 *   BN Ex     after the FP16 rows above, the backend's fast-path counters
 *             (tcuda_fastpath.h): BN calls ran through cuDNN's Ex API
 *             (bn_ex > 0) and none fell back to the legacy calls
 *             (bn_fallback = 0); SKIP on a backend without them (--self);
 *   resnet50  (with --bench) ResNet-50 v1.5 synthetic training at a batch,
 *             FP32 and FP16: img/s and the device memory in use
 *             (informational).
 * Exit 0 all passed, 1 a failure, 77 no usable GPU ("SKIP: reason").
 *
 * Usage: cuda_check [--bench BATCH | --self NAME | --versions]   (--self:
 * NAME, e.g. dnnl, in place of both cuda modes: checks this program on any
 * machine). --versions: the module's line of versions, then one line
 * "loaded: FILE" per CUDA library this process has loaded (its link map,
 * dl_iterate_phdr: the files in use, not those a search path names).
 */
#include "config.h"

#include <cuda_runtime.h>
#include <link.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/torus_error.h"
#include "trainer/backends/tbackends.h"
#include "trainer/engine/rng.h"
#include "trainer/engine/teng.h"
#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"

#define TOL_LAYER    2e-4
#define TOL_F16      3e-2  /* fp16 activations and weights: 11-bit mantissas */
#define OUTLIERS_F16 0.005 /* fraction of elements past TOL_F16 */
#define TOL_TRAIN    2e-3
#define TOL_IN16     1e-3 /* one fp16 rounding of the normalised input */
#define N            4
#define C            8
#define HW           9

#define _OK(call)                                                              \
    do {                                                                       \
        int _rc = (call);                                                      \
        if (_rc < 0) {                                                         \
            fprintf(stderr, "cuda_check: %s:%d: %s: %s\n", __FILE__, __LINE__, \
                    #call, torus_error_msg());                                 \
            return -1;                                                         \
        }                                                                      \
    } while (0)

static void _fill(float *v, size_t n, uint64_t seed, float lo, float hi)
{
    teng_rng r;
    teng_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * teng_rng_uniform(&r);
}

/* Distinct values that fp16 holds exactly, (j - n/2) / 512 for j a
 * permutation of 0..n-1: no ties for max pooling and no rounding of the
 * input in either mode. */
static void _fill_exact(float *v, size_t n, uint64_t seed)
{
    teng_rng r;
    teng_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        v[i] = ((float)i - (float)(n / 2)) / 512.0f;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(teng_rng_next(&r) % (i + 1));
        float t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* Elements whose error is above _tol times their array's largest
 * reference magnitude, out of _seen, since the last reset: FP16 passes
 * with a few of them (a ReLU whose input rounds across zero passes or
 * stops a whole gradient), FP32 with none. */
static size_t _bad, _seen;
static double _tol;

/* max |a - b| / max(max |b|, tiny): the error against the reference b. */
static double _err(const float *a, const float *b, size_t n)
{
    double d = 0.0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        d = e > d || isnan(e) ? e : d;
        m = fabs(b[i]) > m ? fabs(b[i]) : m;
    }
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        _bad += e > _tol * m || isnan(e);
    }
    _seen += n;
    return d / m;
}

/* ---- the layer cases: each builds on input x, returns the output
 * tensor (or, with *loss set, the loss layer) ---- */
typedef int (*_build)(teng_net *net, int x, int *loss);

static int _conv3(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_conv(n, "c", x, 6, 3, 1, 1, 1);
}
static int _conv7(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_conv(n, "c", x, 16, 7, 2, 3, 0);
}
static int _conv1(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_conv(n, "c", x, 12, 1, 2, 0, 0);
}
static int _bn(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_bn(n, "b", teng_add_conv(n, "c", x, 8, 3, 1, 1, 0), 0, 0);
}
static int _bnrelu(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_bn(n, "b", teng_add_conv(n, "c", x, 8, 3, 1, 1, 0), 1, 0);
}
static int _relu(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_relu(n, "r", x);
}
static int _maxp(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_maxpool(n, "p", x, 3, 2, 1);
}
static int _avgp(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_avgpool(n, "p", x, 3, 2, 1);
}
static int _gap(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_gap(n, "p", x);
}
static int _fc(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_fc(n, "f", x, 10, 1);
}
static int _add(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_residual(n, "a", teng_add_conv(n, "c", x, C, 3, 1, 1, 0),
                             teng_add_conv(n, "d", x, C, 1, 1, 0, 0), 0);
}
static int _addrelu(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_residual(n, "a", teng_add_conv(n, "c", x, C, 1, 1, 0, 0),
                             teng_add_conv(n, "d", x, C, 3, 1, 1, 0), 1);
}
/* BN -> add -> ReLU: in FP16 mode one fused cuDNN call (cuda_fuse.h). */
static int _bnaddrelu(teng_net *n, int x, int *l)
{
    (void)l;
    int c = teng_add_conv(n, "c", x, C, 3, 1, 1, 0);
    return teng_add_residual(n, "a", teng_add_bn(n, "bn", c, 0, 0),
                             teng_add_conv(n, "d", x, C, 1, 1, 0, 0), 1);
}
static int _drop(teng_net *n, int x, int *l)
{
    (void)l;
    return teng_add_dropout(n, "d", teng_add_relu(n, "r", x), 0.3f);
}
static int _xent(teng_net *n, int x, int *l)
{
    int f = teng_add_fc(n, "f", x, 10, 1);
    *l = teng_add_xent(n, "x", f, 0.1f);
    return f;
}

static const struct {
    const char *name;
    _build fn;
    int reuse; /* the engine reuses activations (the trainer's plan) */
} _cases[] = {
    {"conv 3x3/1 bias", _conv3, 0},
    {"conv 7x7/2", _conv7, 0},
    {"conv 1x1/2", _conv1, 0},
    {"bn", _bn, 0},
    {"bn+relu", _bnrelu, 0},
    {"relu", _relu, 0},
    {"maxpool 3/2", _maxp, 0},
    {"avgpool 3/2", _avgp, 0},
    {"gap", _gap, 0},
    {"fc bias", _fc, 0},
    {"add + fan-in sum", _add, 0},
    {"add+relu", _addrelu, 0},
    {"bn add relu", _bnaddrelu, 0},
    /* Its fused backward reads y where bit 3 of bwd_reads keeps it. */
    {"bn add relu reuse", _bnaddrelu, 1},
    {"dropout", _drop, 0},
    {"xent smoothing", _xent, 0},
};

typedef struct {
    teng_net *net;
    int x, out, loss;
} _side;

static int _make(_side *s, teng_backend *bk, _build fn, int reuse)
{
    s->loss = -1;
    _OK(teng_net_create(&s->net));
    _OK(s->x = teng_add_input(s->net, C, HW, HW));
    _OK(s->out = fn(s->net, s->x, &s->loss));
    teng_net_set_input_grad(s->net, 1);
    teng_net_set_no_reuse(s->net, !reuse);
    teng_net_set_dropout_seed(s->net, 42);
    _OK(teng_net_compile(s->net, bk, N));
    return 0;
}

/* Same params, input, labels and output gradient on both sides. */
static int _feed(_side *s, float *buf)
{
    for (int i = 0; i < teng_net_nparams(s->net); i++) {
        const teng_param *p = teng_net_param(s->net, i);
        int gamma = p->kind == TENG_P_GAMMA;
        _fill(buf, p->count, 100 + i, gamma ? 0.5f : -0.5f,
              gamma ? 1.5f : 0.5f);
        _OK(teng_param_write(s->net, i, 0, buf));
    }
    _fill_exact(buf, teng_tensor_count(s->net, s->x), 7);
    _OK(teng_net_set_input(s->net, buf));
    if (s->loss >= 0) {
        int32_t lab[N] = {3, 0, 9, 3};
        _OK(teng_net_set_labels(s->net, lab));
    }
    _OK(teng_net_forward(s->net, 1));
    if (s->loss < 0) {
        _fill(buf, teng_tensor_count(s->net, s->out), 9, -1.f, 1.f);
        _OK(teng_tensor_write(s->net, s->out, 1, buf));
    }
    _OK(teng_net_backward(s->net));
    _OK(teng_net_sync(s->net));
    return 0;
}

/* The worst relative error over everything both sides computed. */
static int _compare(_side *g, _side *c, float *a, float *b, double *worst,
                    char *what, size_t wlen)
{
    *worst = 0.0;
#define _TAKE(name, e)                        \
    do {                                      \
        double _e = (e);                      \
        if (_e > *worst || isnan(_e)) {       \
            *worst = _e;                      \
            snprintf(what, wlen, "%s", name); \
        }                                     \
    } while (0)
    size_t n = teng_tensor_count(g->net, g->out);
    _OK(teng_tensor_read(g->net, g->out, 0, a));
    _OK(teng_tensor_read(c->net, c->out, 0, b));
    _TAKE("output", _err(a, b, n));
    n = teng_tensor_count(g->net, g->x);
    _OK(teng_tensor_read(g->net, g->x, 1, a));
    _OK(teng_tensor_read(c->net, c->x, 1, b));
    _TAKE("input gradient", _err(a, b, n));
    for (int i = 0; i < teng_net_nparams(g->net); i++) {
        const teng_param *p = teng_net_param(g->net, i);
        _OK(teng_param_read(g->net, i, 1, a));
        _OK(teng_param_read(c->net, i, 1, b));
        _TAKE(p->name, _err(a, b, p->count));
    }
    for (int i = 0; i < teng_net_nstats(g->net); i++) {
        _OK(teng_stats_read(g->net, i, a));
        _OK(teng_stats_read(c->net, i, b));
        _TAKE(i % 2 ? "running var" : "running mean",
              _err(a, b, teng_stats_count(g->net, i)));
    }
    if (g->loss >= 0) {
        a[0] = (float)teng_net_loss(g->net);
        b[0] = (float)teng_net_loss(c->net);
        _TAKE("loss", _err(a, b, 1));
    }
    return 0;
}

static int _layer_case(int k, teng_backend *gpu, teng_backend *cpu, double tol,
                       double outliers)
{
    _side g = {0}, c = {0};
    float *a = malloc(sizeof(float) * 65536),
          *b = malloc(sizeof(float) * 65536);
    double worst = -1.0;
    char what[64] = "-";
    _tol = tol;
    _bad = _seen = 0;
    int rc = !a || !b || _make(&g, gpu, _cases[k].fn, _cases[k].reuse) ||
             _make(&c, cpu, _cases[k].fn, _cases[k].reuse) || _feed(&g, a) ||
             _feed(&c, a) || _compare(&g, &c, a, b, &worst, what, sizeof(what));
    int pass = !rc && (worst <= tol ||
                       (!isnan(worst) && _bad <= outliers * (double)_seen));
    printf("  %-18s %s  worst %.2e (%s), %zu of %zu above%s\n", _cases[k].name,
           pass ? "ok  " : "FAIL", worst, what, _bad, _seen,
           rc ? ": error above" : "");
    teng_net_destroy(g.net);
    teng_net_destroy(c.net);
    free(a);
    free(b);
    return pass;
}

/* ---- 50 steps of tiny-cnn on both backends ---- */

typedef struct {
    teng_net *net;
    topt_sgd opt;
    int has_opt;
} _trainer;

static int _trainer_open(_trainer *t, teng_backend *bk, const tmodel_spec *s,
                         int batch)
{
    topt_config c;
    _OK(teng_net_create(&t->net));
    _OK(tmodel_build(t->net, s));
    _OK(teng_net_compile(t->net, bk, batch));
    _OK(tmodel_init(t->net, 11));
    topt_config_defaults(&c);
    c.lars = 1; /* the sums of squares run too */
    c.lars_eta = 0.02;
    c.weight_decay = 1e-4;
    _OK(topt_sgd_init(&t->opt, t->net, &c));
    t->has_opt = 1;
    return 0;
}

static void _trainer_close(_trainer *t)
{
    if (t->has_opt)
        topt_sgd_free(&t->opt);
    teng_net_destroy(t->net);
}

static int _step(_trainer *t, const float *x, const int32_t *y, double lr)
{
    _OK(teng_net_set_input(t->net, x));
    _OK(teng_net_set_labels(t->net, y));
    _OK(teng_net_forward(t->net, 1));
    _OK(teng_net_backward(t->net));
    _OK(topt_sgd_step(&t->opt, lr));
    return 0;
}

/* The worst relative weight difference between the two nets. */
static int _weights(_trainer *g, _trainer *c, double *worst)
{
    size_t big = teng_net_largest_buffer(g->net);
    float *a = malloc(sizeof(float) * big), *b = malloc(sizeof(float) * big);
    int rc = !a || !b;
    *worst = 0.0;
    for (int i = 0; !rc && i < teng_net_nparams(g->net); i++) {
        rc = teng_param_read(g->net, i, 0, a) ||
             teng_param_read(c->net, i, 0, b);
        double e = rc ? 0.0 : _err(a, b, teng_net_param(g->net, i)->count);
        *worst = e > *worst || isnan(e) ? e : *worst;
    }
    free(a);
    free(b);
    return rc ? -1 : 0;
}

static int _train_row(teng_backend *gpu, teng_backend *cpu)
{
    enum { B = 32, STEPS = 50 };
    tmodel_spec s = tmodel_defaults(TMODEL_TINY_CNN);
    _trainer g = {0}, c = {0};
    size_t px = (size_t)s.in_channels * s.image_size * s.image_size;
    float *x = malloc(sizeof(float) * B * px);
    int32_t y[B];
    double lg = 0, lc = 0, worst = -1;
    int rc =
        !x || _trainer_open(&g, gpu, &s, B) || _trainer_open(&c, cpu, &s, B);
    for (int st = 0; !rc && st < STEPS; st++) {
        _fill(x, B * px, 1000 + st, -1.f, 1.f);
        for (int i = 0; i < B; i++)
            y[i] = (i * 7 + st) % s.classes;
        rc = _step(&g, x, y, 0.5) || _step(&c, x, y, 0.5);
        lg = teng_net_loss(g.net);
        lc = teng_net_loss(c.net);
    }
    if (!rc)
        rc = _weights(&g, &c, &worst);
    int pass = !rc && worst <= TOL_TRAIN;
    printf("  tiny-cnn 50 steps   %s  weights worst %.2e, loss cuda %.6f "
           "dnnl %.6f\n",
           pass ? "ok  " : "FAIL", worst, lg, lc);
    _trainer_close(&g);
    _trainer_close(&c);
    free(x);
    return pass;
}

/* ---- ResNet-50 synthetic throughput ---- */

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int _bench(teng_backend *gpu, int batch, const char *mode, char *out,
                  size_t len)
{
    enum { WARM = 3, STEPS = 20 };
    tmodel_spec s = tmodel_defaults(TMODEL_RESNET50);
    _trainer g = {0};
    size_t px = (size_t)3 * s.image_size * s.image_size;
    float *x = malloc(sizeof(float) * batch * px);
    int32_t *y = malloc(sizeof(int32_t) * batch);
    int rc = !x || !y || _trainer_open(&g, gpu, &s, batch);
    double t0 = 0;
    if (!rc) {
        _fill(x, batch * px, 5, -1.f, 1.f);
        for (int i = 0; i < batch; i++)
            y[i] = i % s.classes;
    }
    for (int st = 0; !rc && st < WARM + STEPS; st++) {
        if (st == WARM)
            t0 = _now();
        rc = _step(&g, x, y, 0.1) || teng_net_sync(g.net);
    }
    double dt = _now() - t0;
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    if (!rc)
        snprintf(out, len, "%.0f img/s at batch %d %s, %.2f GiB in use",
                 STEPS * batch / dt, batch, mode,
                 (double)(tot - fr) / (1 << 30));
    _trainer_close(&g);
    free(x);
    free(y);
    return rc ? 0 : 1;
}

/* ---- loss scaling on the device ---- */

/* One forward and backward of net at loss scale sc; every param gradient
 * divided by sc into g (concatenated; n floats in all). */
static int _scaled_grads(teng_net *net, const float *x, const int32_t *y,
                         double sc, float *g, size_t *n)
{
    teng_net_set_loss_scale(net, sc);
    _OK(teng_net_set_input(net, x));
    _OK(teng_net_set_labels(net, y));
    _OK(teng_net_forward(net, 1));
    _OK(teng_net_backward(net));
    *n = 0;
    for (int i = 0; i < teng_net_nparams(net); i++) {
        _OK(teng_param_read(net, i, 1, g + *n));
        for (size_t k = 0; k < teng_net_param(net, i)->count; k++)
            g[*n + k] = (float)(g[*n + k] / sc);
        *n += teng_net_param(net, i)->count;
    }
    return 0;
}

/* The row: on bk, a small ResNet's gradients at loss scale 1024, divided
 * by it, are those at scale 1 (within tol), and at an infinite scale
 * teng_net_grads_finite reports the overflow. */
static int _scale_row(teng_backend *bk, double tol, const char *mode, char *row,
                      size_t len)
{
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    s.depth = 8;
    s.image_size = 12;
    size_t px = (size_t)s.in_channels * s.image_size * s.image_size, n = 0;
    float *x = malloc(sizeof(float) * N * px), *g = malloc(4u << 20),
          *g1 = malloc(4u << 20);
    int32_t y[N] = {1, 4, 7, 9};
    int finite = 1, rc = !x || !g || !g1;
    double worst = -1;
    teng_net *net = NULL;
    rc = rc || teng_net_create(&net) || tmodel_build(net, &s) < 0 ||
         teng_net_compile(net, bk, N) || tmodel_init(net, 5) ||
         teng_net_param_count(net) > (1u << 20);
    if (!rc) {
        _fill(x, N * px, 77, -1.f, 1.f);
        rc = _scaled_grads(net, x, y, 1.0, g1, &n) ||
             _scaled_grads(net, x, y, 1024.0, g, &n);
    }
    if (!rc) {
        worst = _err(g, g1, n);
        rc = _scaled_grads(net, x, y, INFINITY, g, &n) ||
             teng_net_grads_finite(net, &finite);
    }
    int ok = !rc && worst <= tol && !finite;
    snprintf(row, len,
             "%-28s %s  scale 1024 vs 1: worst %.1e (limit %.0e); inf: %s",
             mode, ok ? "PASS" : "FAIL", worst, tol,
             finite ? "NOT flagged" : "flagged");
    teng_net_destroy(net);
    free(x);
    free(g);
    free(g1);
    return ok;
}

/* ---- step graphs: replayed steps against eager ones ---- */

/* One step's forward and backward (and, with update, the device step's
 * device part) as calls, or from the graph *g: recorded first when
 * record, as torus-train does. */
static int _fwd_bwd_graph(_trainer *t, int record, int update, teng_graph **g)
{
    if (record) {
        _OK(teng_net_graph_begin(t->net));
        int bad = teng_net_forward(t->net, 1) || teng_net_backward(t->net) ||
                  (update && topt_sgd_dstep(&t->opt, 0, TENG_DSTEP_QUEUE));
        _OK(teng_net_graph_end(t->net, g) || bad);
    }
    if (*g)
        return teng_net_graph_replay(t->net, *g) ? -1 : 0;
    _OK(teng_net_forward(t->net, 1));
    _OK(teng_net_backward(t->net));
    if (update)
        _OK(topt_sgd_dstep(&t->opt, 0, TENG_DSTEP_QUEUE));
    return 0;
}

/* STEPS training steps of t on the same batches: eager, or (graph) the
 * first eager, the second recorded then replayed, the rest replayed, as
 * torus-train does (train/ttrain_step_graph.h). loss[st]: each step's loss. */
static int _graph_steps(_trainer *t, int graph, const float *x, size_t px,
                        const int32_t *y, int steps, double *loss)
{
    teng_graph *g = NULL;
    for (int st = 0; st < steps; st++) {
        _OK(teng_net_set_input(t->net, x + (size_t)(st % 3) * N * px));
        _OK(teng_net_set_labels(t->net, y + (st % 3) * N));
        _OK(_fwd_bwd_graph(t, graph && st == 1, 0, &g));
        _OK(topt_sgd_step(&t->opt, 0.1));
        loss[st] = teng_net_loss(t->net);
    }
    _OK(teng_net_sync(t->net));
    teng_net_graph_free(t->net, g);
    return 0;
}

/* Largest difference between two nets' master weights (0: bit for bit). */
static int _weights_bits(_trainer *a, _trainer *b, double *worst, int *same)
{
    *same = 1;
    size_t big = teng_net_largest_buffer(a->net);
    float *u = malloc(sizeof(float) * big), *v = malloc(sizeof(float) * big);
    int rc = !u || !v;
    *worst = 0;
    for (int i = 0; !rc && i < teng_net_nparams(a->net); i++) {
        size_t n = teng_net_param(a->net, i)->count;
        rc = teng_param_read(a->net, i, 0, u) ||
             teng_param_read(b->net, i, 0, v);
        if (rc)
            break;
        *same &= !memcmp(u, v, n * sizeof(float));
        double e = _err(u, v, n);
        *worst = e > *worst || isnan(e) ? e : *worst;
    }
    free(u);
    free(v);
    return rc ? -1 : 0;
}

/* The small ResNet of the step rows (depth 8, 12x12); *px: floats per
 * image. */
static tmodel_spec _small_resnet(size_t *px)
{
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    s.depth = 8;
    s.image_size = 12;
    *px = (size_t)s.in_channels * s.image_size * s.image_size;
    return s;
}

/* The row: 20 steps of a small ResNet (BN + add + ReLU chains, LARS) with
 * step graphs against 20 without, bit for bit (weights and every loss).
 * A second eager run is the control: cuDNN may pick an algorithm that is
 * not reproducible run to run, and then no bitwise claim is made. */
static int _graph_row(teng_backend *bk, const char *mode, char *row, size_t len)
{
    enum { STEPS = 20 };
    size_t px;
    tmodel_spec s = _small_resnet(&px);
    _trainer t[3] = {{0}};
    float *x = malloc(sizeof(float) * 3 * N * px);
    int32_t y[3 * N];
    double l[3][STEPS], werr = -1, ctrl = -1;
    int same = 0, csame = 0, lsame = 0;
    if (!teng_backend_graph_supported(bk)) {
        snprintf(row, len, "%-28s SKIP  backend %s records no graphs", mode,
                 teng_backend_name(bk));
        free(x);
        return 1;
    }
    int rc = !x;
    for (int k = 0; !rc && k < 3; k++)
        rc = _trainer_open(&t[k], bk, &s, N);
    if (!rc) {
        _fill(x, 3 * N * px, 31, -1.f, 1.f);
        for (int i = 0; i < 3 * N; i++)
            y[i] = (i * 3 + 1) % s.classes;
        rc = _graph_steps(&t[0], 0, x, px, y, STEPS, l[0]) ||
             _graph_steps(&t[1], 0, x, px, y, STEPS, l[1]) ||
             _graph_steps(&t[2], 1, x, px, y, STEPS, l[2]) ||
             _weights_bits(&t[0], &t[1], &ctrl, &csame) ||
             _weights_bits(&t[0], &t[2], &werr, &same);
        lsame = !rc && !memcmp(l[0], l[2], sizeof l[0]);
    }
    int ok = !rc && (!csame || (same && lsame));
    snprintf(row, len,
             "%-28s %s  %d steps, graph vs eager: weights %s (worst %.1e), "
             "losses %s%s",
             mode,
             rc       ? "FAIL"
             : !csame ? "INFO"
             : ok     ? "PASS"
                      : "FAIL",
             STEPS, same ? "bit for bit" : "differ", werr,
             lsame ? "bit for bit" : "differ",
             rc      ? "; error above"
             : csame ? ""
                     : "; two eager runs differ too, no bitwise claim");
    for (int k = 0; k < 3; k++)
        _trainer_close(&t[k]);
    free(x);
    return ok;
}

/* ---- the device step: graphs with the update, and the host's step ---- */

static double _dlr(int st)
{
    return 0.1 * (1.0 + st / 20.0); /* a new lr every step: the ring */
}

/* STEPS device steps (graph: the second recorded with the update, the
 * rest replayed) or, with host, the host's scaled step at the scale the
 * device would use (known here: no overflow, growth every 5 steps). */
static int _dstep_steps(_trainer *t, int graph, int host, const float *x,
                        size_t px, const int32_t *y, int steps, double *loss,
                        teng_dstep_state *out)
{
    teng_dstep_config c = {1.0, 16777216.0, 2.0, 0.5, 5, 1, 0, 0};
    teng_dstep_state s0 = {.scale = 64.0, .used = 64.0};
    teng_graph *g = NULL;
    if (!host)
        _OK(topt_sgd_dstep_open(&t->opt, &c, &s0));
    for (int st = 0; st < steps; st++) {
        double sc = ldexp(64.0, st / 5);
        _OK(teng_net_set_input(t->net, x + (size_t)(st % 3) * N * px));
        _OK(teng_net_set_labels(t->net, y + (st % 3) * N));
        if (host) {
            teng_net_set_loss_scale(t->net, sc);
            _OK(teng_net_forward(t->net, 1));
            _OK(teng_net_backward(t->net));
            _OK(topt_sgd_step_scaled(&t->opt, _dlr(st), sc));
            loss[st] = teng_net_loss(t->net);
            continue;
        }
        _OK(topt_sgd_dstep(&t->opt, _dlr(st), TENG_DSTEP_BEGIN));
        _OK(_fwd_bwd_graph(t, graph && st == 1, 1, &g));
        _OK(topt_sgd_dstep(&t->opt, 0, TENG_DSTEP_END));
        loss[st] = teng_net_loss(t->net);
    }
    _OK(teng_net_sync(t->net));
    if (!host)
        _OK(teng_net_dstep_read(t->net, out, 0));
    teng_net_graph_free(t->net, g);
    return 0;
}

/* The two rows (see the head): into row (graphs) and hrow (host). */
static int _dstep_row(teng_backend *bk, const char *mode, const char *hmode,
                      char *row, char *hrow, size_t len)
{
    enum { STEPS = 20 };
    size_t px;
    tmodel_spec s = _small_resnet(&px);
    _trainer t[4] = {{0}};
    float *x = malloc(sizeof(float) * 3 * N * px);
    int32_t y[3 * N];
    double l[4][STEPS], werr = -1, ctrl = -1, herr = -1;
    teng_dstep_state d[3] = {{0}};
    int same = 0, csame = 0, lsame = 0, dsame = 0, hsame = 0;
    int rc = !x;
    for (int k = 0; !rc && k < 4; k++)
        rc = _trainer_open(&t[k], bk, &s, N);
    if (rc || !teng_backend_graph_supported(bk) ||
        !teng_net_dstep_supported(t[0].net)) {
        snprintf(row, len, "%-28s %s  %s", mode, rc ? "FAIL" : "SKIP",
                 rc ? "error above" : "no device step or no graphs here");
        snprintf(hrow, len, "%-28s %s  %s", hmode, rc ? "FAIL" : "SKIP",
                 rc ? "error above" : "no device step or no graphs here");
        for (int k = 0; k < 4; k++)
            _trainer_close(&t[k]);
        free(x);
        return !rc;
    }
    _fill(x, 3 * N * px, 31, -1.f, 1.f);
    for (int i = 0; i < 3 * N; i++)
        y[i] = (i * 3 + 1) % s.classes;
    rc = _dstep_steps(&t[0], 0, 0, x, px, y, STEPS, l[0], &d[0]) ||
         _dstep_steps(&t[1], 0, 0, x, px, y, STEPS, l[1], &d[1]) ||
         _dstep_steps(&t[2], 1, 0, x, px, y, STEPS, l[2], &d[2]) ||
         _dstep_steps(&t[3], 0, 1, x, px, y, STEPS, l[3], NULL) ||
         _weights_bits(&t[0], &t[1], &ctrl, &csame) ||
         _weights_bits(&t[0], &t[2], &werr, &same) ||
         _weights_bits(&t[0], &t[3], &herr, &hsame);
    lsame = !rc && !memcmp(l[0], l[2], sizeof l[0]);
    dsame = !rc && !memcmp(&d[0], &d[2], sizeof d[0]) && d[0].scale == 1024.0;
    int ok = !rc && (!csame || (same && lsame && dsame));
    snprintf(row, len,
             "%-28s %s  %d steps, graph+update vs eager: weights %s (worst "
             "%.1e), losses %s, decisions %s%s",
             mode,
             rc       ? "FAIL"
             : !csame ? "INFO"
             : ok     ? "PASS"
                      : "FAIL",
             STEPS, same ? "bit for bit" : "differ", werr,
             lsame ? "bit for bit" : "differ", dsame ? "equal" : "differ",
             csame ? "" : "; two eager runs differ too, no bitwise claim");
    /* Every step's loss too: the device step computes it from rows the
     * engine must keep alive until the device reads them. */
    double lerr = rc ? INFINITY : 0;
    for (int i = 0; !rc && i < STEPS; i++) {
        double e = fabs(l[0][i] - l[3][i]) / fmax(1.0, fabs(l[3][i]));
        lerr = e > lerr || isnan(e) ? e : lerr;
    }
    int hok = !rc && herr <= TOL_LAYER && lerr <= TOL_LAYER;
    snprintf(hrow, len,
             "%-28s %s  device vs host step: weights worst %.1e (%s), "
             "losses worst %.1e",
             hmode, hok ? "PASS" : "FAIL", herr,
             hsame ? "bit for bit" : "not bit for bit", lerr);
    for (int k = 0; k < 4; k++)
        _trainer_close(&t[k]);
    free(x);
    return ok && hok;
}

/* ---- the 8-bit input path ---- */

/* The input tensor (canonical NCHW) after staging batches a and b in
 * slots 0 and 1 ahead of their use: into got[0] and got[1]. */
static int _input_side(teng_backend *bk, const uint8_t *px[2],
                       const uint8_t *flips[2], float *got[2])
{
    const float scale[3] = {1 / (255 * 0.229f), 1 / (255 * 0.224f),
                            1 / (255 * 0.225f)},
                bias[3] = {-0.485f / 0.229f, -0.456f / 0.224f,
                           -0.406f / 0.225f};
    teng_net *net;
    int x;
    _OK(teng_net_create(&net));
    _OK(x = teng_add_input(net, 3, HW, HW + 2));
    _OK(teng_add_relu(net, "relu", x));
    teng_net_set_no_reuse(net, 1);
    _OK(teng_net_compile(net, bk, N));
    for (int k = 0; k < 2; k++)
        _OK(teng_net_stage_input_u8(net, k, px[k], flips[k], N));
    for (int k = 0; k < 2; k++) {
        _OK(teng_net_use_input_u8(net, k, scale, bias));
        _OK(teng_tensor_read(net, x, 0, got[k]));
    }
    teng_net_destroy(net);
    return 0;
}

/* The row: gpu's input tensors against the host path's (on cpu). */
static int _input_row(teng_backend *gpu, teng_backend *cpu, double tol,
                      const char *mode, char *row, size_t len)
{
    size_t n = (size_t)N * 3 * HW * (HW + 2);
    uint8_t *px = malloc(2 * n), flips[2][N] = {{1, 0, 0, 1}, {0, 1, 1, 0}};
    float *v = malloc(4 * n * sizeof(float));
    double worst = 0;
    int ok = px && v;
    for (size_t i = 0; ok && i < 2 * n; i++)
        px[i] = (uint8_t)(teng_hash64(i * 7919 + 5) >> 56);
    const uint8_t *p2[2] = {px, px + n}, *f2[2] = {flips[0], flips[1]};
    float *g[2] = {v, v + n}, *c[2] = {v + 2 * n, v + 3 * n};
    ok = ok && !_input_side(gpu, p2, f2, g) && !_input_side(cpu, p2, f2, c);
    for (int k = 0; ok && k < 2; k++) {
        double e = tol == 0 ? (memcmp(g[k], c[k], n * sizeof(float)) != 0)
                            : _err(g[k], c[k], n);
        worst = e > worst ? e : worst;
    }
    ok = ok && worst <= tol;
    snprintf(row, len, "%-28s %s  two staged batches, worst %.1e (limit %.0e)",
             mode, ok ? "PASS" : "FAIL", worst, tol);
    free(px);
    free(v);
    return ok;
}

/* Every layer case on gpu against cpu; the row's line. */
static int _layers_row(teng_backend *gpu, teng_backend *cpu, double tol,
                       double outliers, const char *mode, char *row, size_t len)
{
    int ncase = (int)(sizeof(_cases) / sizeof(_cases[0])), nok = 0;
    printf("every layer, %s against dnnl (tolerance %.0e):\n", mode, tol);
    for (int k = 0; k < ncase; k++)
        nok += _layer_case(k, gpu, cpu, tol, outliers);
    snprintf(row, len, "%-28s %s  %d of %d layer cases within %.0e", mode,
             nok == ncase ? "PASS" : "FAIL", nok, ncase, tol);
    return nok == ncase;
}

/* dl_iterate_phdr: prints each loaded object that is a CUDA library
 * (the driver, the runtime, cuBLAS, cuDNN and its sub-libraries, NCCL,
 * NVRTC, nvJitLink). */
static int _loaded_one(struct dl_phdr_info *info, size_t size, void *ctx)
{
    static const char *const libs[] = {
        "libcuda.", "libcudart.", "libcublas", "libcudnn",
        "libnccl.", "libnvrtc",   "libnvJitLink"};
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    (void)size;
    (void)ctx;
    if (!base)
        return 0;
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        if (!strncmp(base + 1, libs[i], strlen(libs[i]))) {
            printf("loaded: %s\n", info->dlpi_name);
            break;
        }
    return 0;
}

/* The row: the FP16 rows ran BN through the Ex calls, none fell back. */
static int _bn_ex_row(teng_backend *bk, const char *mode, char *row,
                      size_t len)
{
    tcuda_fastpath c;
    if (tbackends_fastpath(bk, &c)) {
        snprintf(row, len, "%-28s SKIP  backend %s counts no fast paths", mode,
                 teng_backend_name(bk));
        return 1;
    }
    int ok = c.bn_ex > 0 && c.bn_fallback == 0;
    snprintf(row, len, "%-28s %s  bn_ex=%lu bn_fallback=%lu", mode,
             ok ? "PASS" : "FAIL", c.bn_ex, c.bn_fallback);
    return ok;
}

int main(int argc, char **argv)
{
    int ndev = 0, bench = 0;
    const char *b32n = "cuda", *b16n = "cuda-fp16";
    if (argc == 3 && !strcmp(argv[1], "--bench"))
        bench = atoi(argv[2]);
    else if (argc == 3 && !strcmp(argv[1], "--self"))
        b32n = b16n = argv[2]; /* the harness itself, on any backend */
    else if (argc == 2 && !strcmp(argv[1], "--versions"))
        bench = -1;
    else if (argc != 1) {
        fprintf(stderr, "usage: cuda_check [--bench BATCH | --self NAME | "
                        "--versions]\n");
        return 2;
    }
    /* The backend is linked in here: the same code as torus_cuda.so. */
    tbackends_use_module(&tcuda_module_entry);
    if (bench < 0) {
        const char *v = tbackends_module_versions();
        printf("%s\n", v ? v : tbackends_module_error());
        if (v)
            dl_iterate_phdr(_loaded_one, NULL);
        return v ? 0 : 1;
    }
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (strcmp(b32n, "cuda") == 0 && (e != cudaSuccess || ndev < 1)) {
        printf("SKIP: no usable GPU (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "no device");
        return 77;
    }
    teng_backend *gpu = NULL, *g16 = NULL, *cpu = NULL;
    teng_backend_opts o = {0};
    if (tbackends_open(b32n, &o, &gpu) || tbackends_open(b16n, &o, &g16) ||
        tbackends_open("dnnl", &o, &cpu)) {
        fprintf(stderr, "cuda_check: cannot open the backends\n");
        return 1;
    }
    char r32[160], r16[160], b32[128] = "not run (--bench BATCH)",
                             b16[128] = "not run (--bench BATCH)";
    int ok = _layers_row(gpu, cpu, TOL_LAYER, 0.0, "layers cuda (FP32)", r32,
                         sizeof(r32));
    ok &= _layers_row(g16, cpu, TOL_F16, OUTLIERS_F16, "layers cuda-fp16", r16,
                      sizeof(r16));
    char i32[160], i16[160];
    ok &=
        _input_row(gpu, cpu, 0.0, "8-bit input cuda (FP32)", i32, sizeof(i32));
    ok &= _input_row(g16, cpu, TOL_IN16, "8-bit input cuda-fp16", i16,
                     sizeof(i16));
    char s32[160], s16[160];
    ok &=
        _scale_row(gpu, TOL_LAYER, "loss scale cuda (FP32)", s32, sizeof(s32));
    ok &= _scale_row(g16, TOL_F16, "loss scale cuda-fp16", s16, sizeof(s16));
    char g32[200], g16r[200];
    ok &= _graph_row(gpu, "step graphs cuda (FP32)", g32, sizeof(g32));
    ok &= _graph_row(g16, "step graphs cuda-fp16", g16r, sizeof(g16r));
    char d32[320], d32h[320], d16[320], d16h[320];
    ok &= _dstep_row(gpu, "device step cuda (FP32)",
                     "device vs host cuda (FP32)", d32, d32h, sizeof(d32h));
    ok &= _dstep_row(g16, "device step cuda-fp16", "device vs host cuda-fp16",
                     d16, d16h, sizeof(d16h));
    char bnx[160];
    ok &= _bn_ex_row(g16, "BN Ex calls cuda-fp16", bnx, sizeof(bnx));
    int train = _train_row(gpu, cpu);
    int bok32 = bench ? _bench(gpu, bench, "FP32", b32, sizeof(b32)) : 1;
    int bok16 = bench ? _bench(g16, bench, "FP16", b16, sizeof(b16)) : 1;
    printf("%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n", r32, r16, i32, i16, s32, s16,
           g32, g16r);
    printf("%s\n%s\n%s\n%s\n%s\n", d32, d32h, d16, d16h, bnx);
    printf("%-28s %s  final weights within %.0e\n", "tiny-cnn 50 steps FP32",
           train ? "PASS" : "FAIL", TOL_TRAIN);
    printf("%-28s %s  %s\n", "resnet50 synthetic cuda",
           !bench  ? "SKIP"
           : bok32 ? "INFO"
                   : "FAIL",
           b32);
    printf("%-28s %s  %s\n", "resnet50 synthetic cuda-fp16",
           !bench  ? "SKIP"
           : bok16 ? "INFO"
                   : "FAIL",
           b16);
    teng_backend_close(gpu);
    teng_backend_close(g16);
    teng_backend_close(cpu);
    return ok && train && bok32 && bok16 ? 0 : 1;
}
