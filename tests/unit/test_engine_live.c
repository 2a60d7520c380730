/* test_engine_live.c: every buffer a backend reads stays live until it is
 * read, on the real compile (teng_net_compile and its arena plan).
 *
 * Two checks:
 * - Late reads. A backend that reads a layer's workspace after the whole
 *   backward (the cuda device step reads the loss layer's per-row losses
 *   after the update) declares it (TENG_READS_WS_LATE) and takes the
 *   pointer from teng_net_late_ws. The cuda plan cannot run here (its
 *   sizes come from cuDNN), so a stand-in backend plans with the cuda
 *   plan's sizes (fp16 or fp32 elements, BN and loss workspaces, dropout
 *   masks) and the cuda backend's real read sets (tcuda_bwd_reads, with
 *   its real fusion plan); then no other buffer of the compiled arena may
 *   share memory with a late workspace while it lives (from its forward
 *   to the end of the step). ResNet-50 at batch 256 fp16 and fp32,
 *   tiny-cnn and cifar-resnet-8, the nets where an overlap was found.
 * - Poison. On the dnnl backend, a step with TENG_POISON's mode (every
 *   buffer NaN once its planned lifetime ends) gives bit for bit the
 *   loss, gradients and evaluation logits of a step without it; and a
 *   dnnl backend that under-declares one read (batch norm's input) does
 *   read NaN there, so the mode does catch reads outside the plan. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "config.h"
#include "tests/unit/layer_harness.h"
#include "trainer/backends/cuda/cuda_fuse.h"
#include "trainer/engine/backend.h"
#include "trainer/models/tmodel.h"

#define _ALIGN256(n) (((n) + 255) & ~(size_t)255)

/* ---- the stand-in: the cuda plan's sizes and read sets, host memory ---- */

typedef struct {
    int half;
    unsigned char *deferred; /* tcuda_bn_plan's, per layer */
    unsigned char *mode;     /* each BN's (tcuda_bn_mode) */
} _standin;

static void *_si_alloc(teng_backend *bk, size_t n)
{
    (void)bk;
    return calloc(1, n); /* untouched: ResNet-50 at 256 costs no RSS */
}

static void _si_free(teng_backend *bk, void *p)
{
    (void)bk;
    free(p);
}

static int _si_copy(teng_backend *bk, void *dst, const void *src, size_t n)
{
    (void)bk;
    memcpy(dst, src, n);
    return TENG_OK;
}

static int _si_nop(teng_backend *bk)
{
    (void)bk;
    return TENG_OK;
}

/* cuda_layers.c's _plan_layer and _plan_sizes, less the cuDNN calls; an
 * Ex BN's reserve space (cuDNN's size) is taken as a bit per element. */
static int _si_plan(teng_backend *bk, teng_net *net, int batch)
{
    _standin *s = bk->impl;
    size_t esz = s->half ? 2 : 4;
    int *bn_of = malloc(sizeof(int) * (size_t)net->nl);
    tcuda_switches sw = {.half_nhwc = s->half, .bn_ex = 1, .fuse = 1};
    free(s->deferred);
    free(s->mode);
    s->deferred = malloc((size_t)net->nl);
    s->mode = malloc((size_t)net->nl);
    ck_assert(bn_of && s->deferred && s->mode);
    tcuda_bn_plan(net, &sw, bn_of, s->deferred, s->mode);
    free(bn_of);
    (void)batch;
    for (int i = 0; i < net->nt; i++)
        net->t[i].bytes = esz * teng_tensor_count(net, i);
    for (int i = 0; i < net->np; i++)
        net->p[i].bytes = sizeof(float) * net->p[i].count;
    for (int i = 0; i < net->nl; i++) {
        teng_layer *l = &net->l[i];
        size_t in = l->in[0] >= 0 ? teng_tensor_count(net, l->in[0]) : 0;
        teng_shape sh =
            l->in[0] >= 0 ? net->t[l->in[0]].shape : net->t[l->out].shape;
        l->ws_bytes = 0;
        if (l->kind == TENG_L_BN)
            l->ws_bytes = 2 * _ALIGN256(sizeof(float) * (size_t)sh.c) +
                          (tcuda_bn_is_ex(s->mode[i]) ? _ALIGN256(in / 8 + 1)
                                                      : 0);
        else if (l->kind == TENG_L_DROPOUT)
            l->ws_bytes = _ALIGN256(in);
        else if (l->kind == TENG_L_XENT)
            l->ws_bytes = _ALIGN256(sizeof(double) * (size_t)sh.n);
    }
    net->scratch_bytes = 0;
    return TENG_OK;
}

static int _si_bind(teng_backend *bk, teng_net *net)
{
    (void)bk;
    (void)net;
    return TENG_OK;
}

static void _si_release(teng_backend *bk, teng_net *net)
{
    (void)bk;
    (void)net;
}

static unsigned _si_reads(teng_backend *bk, const teng_net *net, int li)
{
    return tcuda_bwd_reads(net, ((_standin *)bk->impl)->deferred, li);
}

static const teng_backend_ops _si_ops = {
    .name = "cuda plan stand-in",
    .host_memory = 1,
    .alloc = _si_alloc,
    .free = _si_free,
    .upload = _si_copy,
    .download = _si_copy,
    .sync = _si_nop,
    .plan = _si_plan,
    .bind = _si_bind,
    .release = _si_release,
    .bwd_reads = _si_reads,
};

/* Layer li's late workspace: handed out by teng_net_late_ws, live to the
 * end of the step, and sharing memory with no buffer of the arena from
 * its forward on. */
static void _check_late(const teng_net *net, int li, const char *what)
{
    const teng_layer *l = &net->l[li];
    ck_assert_msg(teng_net_late_ws(net, li) != NULL, "%s: %s", what,
                  torus_error_msg());
    const teng_interval *w = &net->acts_iv[l->ws_buf];
    for (int j = 0; j < net->acts_niv; j++) {
        const teng_interval *b = &net->acts_iv[j];
        if (j == l->ws_buf || b->offset >= w->offset + w->bytes ||
            w->offset >= b->offset + b->bytes)
            continue;
        ck_assert_msg(b->last < w->first,
                      "%s: layer %d '%s' is read after the backward, but its "
                      "workspace [%zu, +%zu) shares memory with buffer %d "
                      "live at steps %d..%d",
                      what, li, l->name, w->offset, w->bytes, j, b->first,
                      b->last);
    }
    ck_assert_msg(w->last == 2 * net->nl - 1,
                  "%s: layer %d '%s': late workspace ends at step %d", what, li,
                  l->name, w->last);
}

static void _standin_case(tmodel_spec s, int half, int batch)
{
    _standin st = {half, NULL, NULL};
    teng_backend bk = {.ops = &_si_ops, .impl = &st};
    teng_net net;
    char what[96];
    snprintf(what, sizeof what, "%s %s batch %d", tmodel_name(s.kind),
             half ? "fp16" : "fp32", batch);
    teng_net_init(&net);
    ck_assert_msg(tmodel_build(&net, &s) >= 0, "%s", torus_error_msg());
    ck_assert_msg(teng_net_compile(&net, &bk, batch) == 0, "%s: %s", what,
                  torus_error_msg());
    /* The device step's read (cuda_backend.c), and any other declared. */
    _check_late(&net, net.loss_layer, what);
    for (int li = 0; li < net.nl; li++)
        if (net.l[li].ws_bytes &&
            (tcuda_bwd_reads(&net, st.deferred, li) & TENG_READS_WS_LATE))
            _check_late(&net, li, what);
    teng_net_free(&net);
    free(st.deferred);
    free(st.mode);
}

START_TEST(cuda_plan_late_reads)
{
    tmodel_spec s = tmodel_defaults(TMODEL_RESNET50);
    _standin_case(s, 1, 256);
    _standin_case(s, 0, 256);
    s = tmodel_defaults(TMODEL_TINY_CNN);
    _standin_case(s, 1, 64);
    _standin_case(s, 0, 64);
    s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    s.depth = 8;
    _standin_case(s, 1, 128);
    _standin_case(s, 0, 128);
}
END_TEST

#ifdef TORUS_HAVE_DNNL
/* ---- poison on dnnl ---- */

static const teng_backend_ops *_dnnl_ops;
static teng_backend_ops _under_ops;

/* dnnl's read sets less batch norm's input: a read outside the plan. */
static unsigned _under_reads(teng_backend *bk, const teng_net *net, int li)
{
    unsigned r = _dnnl_ops->bwd_reads(bk, net, li);
    return net->l[li].kind == TENG_L_BN ? r & ~1u : r;
}

typedef struct {
    double loss;
    float *grads;  /* every param's gradient, in param order */
    float *logits; /* an evaluation forward's, after the step */
    size_t ngrads, nlogits;
} _result;

static void _fill(float *x, size_t n, int32_t *y, int b, int classes)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 500.f - 1.f;
    for (int i = 0; i < b; i++)
        y[i] = i % classes;
}

static _result _step(tmodel_spec s, int batch, int poison, int under)
{
    teng_backend *bk = lh_backend();
    _result r = {0};
    teng_net net;
    _dnnl_ops = bk->ops;
    if (under) {
        _under_ops = *bk->ops;
        _under_ops.bwd_reads = _under_reads;
        bk->ops = &_under_ops;
    }
    teng_net_init(&net);
    ck_assert_msg(tmodel_build(&net, &s) >= 0, "%s", torus_error_msg());
    teng_net_set_poison(&net, poison);
    ck_assert_msg(teng_net_compile(&net, bk, batch) == 0, "%s",
                  torus_error_msg());
    ck_assert_int_eq(tmodel_init(&net, 3), TENG_OK);
    size_t nx = teng_tensor_count(&net, net.input);
    float *x = malloc(nx * sizeof(float));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)batch);
    _fill(x, nx, y, batch, s.classes);
    ck_assert_int_eq(teng_net_set_input(&net, x), 0);
    ck_assert_int_eq(teng_net_set_labels(&net, y), 0);
    ck_assert_msg(teng_net_forward(&net, 1) == 0, "%s", torus_error_msg());
    ck_assert_msg(teng_net_backward(&net) == 0, "%s", torus_error_msg());
    r.loss = teng_net_loss(&net);
    for (int i = 0; i < net.np; i++)
        r.ngrads += net.p[i].count;
    r.grads = malloc(sizeof(float) * r.ngrads);
    for (int i = 0, off = 0; i < net.np; off += (int)net.p[i].count, i++)
        ck_assert_int_eq(teng_param_read(&net, i, 1, r.grads + off), 0);
    /* The step consumed the input (its buffer ends at conv1's backward). */
    ck_assert_int_eq(teng_net_set_input(&net, x), 0);
    ck_assert_msg(teng_net_forward(&net, 0) == 0, "%s", torus_error_msg());
    int lid = net.l[net.loss_layer].in[0];
    r.nlogits = teng_tensor_count(&net, lid);
    r.logits = malloc(sizeof(float) * r.nlogits);
    ck_assert_int_eq(teng_tensor_read(&net, lid, 0, r.logits), 0);
    free(x);
    free(y);
    teng_net_free(&net);
    bk->ops = _dnnl_ops;
    teng_backend_close(bk);
    return r;
}

static int _same(const _result *a, const _result *b)
{
    return memcmp(&a->loss, &b->loss, sizeof(double)) == 0 &&
           a->ngrads == b->ngrads && a->nlogits == b->nlogits &&
           !memcmp(a->grads, b->grads, sizeof(float) * a->ngrads) &&
           !memcmp(a->logits, b->logits, sizeof(float) * a->nlogits);
}

static void _drop(_result *r)
{
    free(r->grads);
    free(r->logits);
}

static void _poison_case(tmodel_spec s, int batch)
{
    _result plain = _step(s, batch, 0, 0), poisoned = _step(s, batch, 1, 0);
    ck_assert_msg(isfinite(plain.loss), "%s: loss %g", tmodel_name(s.kind),
                  plain.loss);
    ck_assert_msg(_same(&plain, &poisoned),
                  "%s: a step reads a buffer outside its planned lifetime "
                  "(poisoned loss %.17g, plain %.17g)",
                  tmodel_name(s.kind), poisoned.loss, plain.loss);
    _drop(&plain);
    _drop(&poisoned);
}

START_TEST(dnnl_poison_same_step)
{
    tmodel_spec s = tmodel_defaults(TMODEL_TINY_CNN);
    _poison_case(s, 8);
    s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    s.depth = 8;
    _poison_case(s, 4);
    s = tmodel_defaults(TMODEL_RESNET50);
    s.image_size = 32;
    s.classes = 5;
    _poison_case(s, 2);
}
END_TEST

START_TEST(dnnl_poison_catches_undeclared_read)
{
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    s.depth = 8;
    _result plain = _step(s, 4, 0, 1), poisoned = _step(s, 4, 1, 1);
    int nan = 0;
    for (size_t i = 0; i < poisoned.ngrads; i++)
        nan += isnan(poisoned.grads[i]);
    ck_assert_msg(!_same(&plain, &poisoned) && nan > 0,
                  "batch norm's input, read but not declared, was not "
                  "poisoned (%d NaN gradients)",
                  nan);
    _drop(&plain);
    _drop(&poisoned);
}
END_TEST
#endif

static Suite *_suite(void)
{
    Suite *s = suite_create("engine_live");
    TCase *tc = tcase_create("live");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cuda_plan_late_reads);
#ifdef TORUS_HAVE_DNNL
    tcase_add_test(tc, dnnl_poison_same_step);
    tcase_add_test(tc, dnnl_poison_catches_undeclared_read);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
