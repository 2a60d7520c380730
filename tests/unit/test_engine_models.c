/* test_engine_models.c: the model builders and initialisation: parameter
 * counts against the published architectures, spec validation, He and
 * zero-gamma init, and every model running forward and backward on the
 * CPU backend at a small size (loss at init = ln(classes), since the
 * classifier starts near zero). */
#include <check.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "config.h"
#include "tests/unit/layer_harness.h"
#include "trainer/engine/backend.h"
#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"

static size_t _count(tmodel_kind kind, int classes)
{
    teng_net net;
    tmodel_spec s = tmodel_defaults(kind);
    s.classes = classes;
    teng_net_init(&net);
    ck_assert_msg(tmodel_build(&net, &s) >= 0, "%s", torus_error_msg());
    size_t n = teng_net_param_count(&net);
    teng_net_free(&net);
    return n;
}

START_TEST(param_counts)
{
    /* torchvision's resnet50 / resnet18 (weights, biases, BN affine). */
    ck_assert_uint_eq(_count(TMODEL_RESNET50, 1000), 25557032);
    ck_assert_uint_eq(_count(TMODEL_RESNET18, 1000), 11689512);
    /* ResNet-20, 1 input channel, projection shortcuts at the two stage
     * changes: convs 144 + 6*2304 + 4608 + 5*9216 + 18432 + 5*36864,
     * shortcuts 512 + 2048, BN (16*7 + 32*7 + 64*7) * 2, fc 650. */
    size_t r20 = 144 + 6 * 2304 + 4608 + 5 * 9216 + 18432 + 5 * 36864 + 512 +
                 2048 + (16 * 7 + 32 * 7 + 64 * 7) * 2 + 650;
    ck_assert_uint_eq(_count(TMODEL_CIFAR_RESNET, 10), r20);
    /* AlexNet-BN: convs 96*3*121 + 256*96*25 + 384*256*9 + 384*384*9 +
     * 256*384*9; BN 2*(96+256+384+384+256) + 2*256*6*6 after pool5;
     * fc 9216*4096+4096 + 4096*4096+4096 + 4096*1000+1000. */
    size_t alex = 96 * 3 * 121 + 256 * 96 * 25 + 384 * 256 * 9 + 384 * 384 * 9 +
                  256 * 384 * 9 + 2 * (96 + 256 + 384 + 384 + 256) + 2 * 256 +
                  (size_t)9216 * 4096 + 4096 + 4096 * 4096 + 4096 +
                  4096 * 1000 + 1000;
    ck_assert_uint_eq(_count(TMODEL_ALEXNET_BN, 1000), alex);
}
END_TEST

START_TEST(resnet50_v15_stride_and_zero_gamma)
{
    teng_net net;
    tmodel_spec s = tmodel_defaults(TMODEL_RESNET50);
    teng_net_init(&net);
    ck_assert_int_ge(tmodel_build(&net, &s), 0);
    int zero = 0, found = 0;
    for (int i = 0; i < net.nl; i++) {
        const teng_layer *l = &net.l[i];
        zero += l->kind == TENG_L_BN && l->zero_gamma;
        /* v1.5: the first block of layer2 downsamples in its 3x3 conv. */
        if (!strcmp(l->name, "layer2.0.conv2")) {
            ck_assert_int_eq(l->sh, 2);
            found = 1;
        }
        if (!strcmp(l->name, "layer2.0.conv1"))
            ck_assert_int_eq(l->sh, 1);
    }
    ck_assert_int_eq(found, 1);
    ck_assert_int_eq(zero, 16); /* one per bottleneck block */
    teng_net_free(&net);
}
END_TEST

START_TEST(spec_validation)
{
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    tmodel_kind k;
    s.depth = 21;
    ck_assert_int_eq(tmodel_validate(&s), TENG_EINVAL);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "6n+2"));
    s = tmodel_defaults(TMODEL_RESNET50);
    s.image_size = 16;
    ck_assert_int_eq(tmodel_validate(&s), TENG_EINVAL);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "image size 16"));
    s = tmodel_defaults(TMODEL_ALEXNET_BN);
    s.dropout = 1.f;
    ck_assert_int_eq(tmodel_validate(&s), TENG_EINVAL);
    ck_assert_int_eq(tmodel_parse("resnet-50", &k), TENG_EINVAL);
    ck_assert_int_eq(tmodel_parse("alexnet-bn", &k), TENG_OK);
    ck_assert_int_eq(k, TMODEL_ALEXNET_BN);
    ck_assert_str_eq(tmodel_name(TMODEL_CIFAR_RESNET), "cifar-resnet");
}
END_TEST

#ifdef TORUS_HAVE_DNNL
/* Builds, compiles, initialises and runs one training step's forward and
 * backward at batch n; returns the loss. */
static double _run(tmodel_spec s, int n)
{
    teng_backend *bk = lh_backend();
    teng_net net;
    teng_net_init(&net);
    ck_assert_msg(tmodel_build(&net, &s) >= 0, "%s", torus_error_msg());
    ck_assert_msg(teng_net_compile(&net, bk, n) == 0, "%s",
                  torus_error_msg());
    ck_assert_int_eq(tmodel_init(&net, 1), TENG_OK);
    size_t nx = teng_tensor_count(&net, net.input);
    float *x = malloc(nx * sizeof(float));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)n);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 500.f - 1.f;
    for (int i = 0; i < n; i++)
        y[i] = i % s.classes;
    ck_assert_int_eq(teng_net_set_input(&net, x), 0);
    ck_assert_int_eq(teng_net_set_labels(&net, y), 0);
    ck_assert_msg(teng_net_forward(&net, 1) == 0, "%s", torus_error_msg());
    ck_assert_msg(teng_net_backward(&net) == 0, "%s", torus_error_msg());
    double loss = teng_net_loss(&net);
    /* Every gradient is finite and the classifier's is not all zero. */
    float *g = malloc(net.p[net.np - 2].count * sizeof(float));
    ck_assert_int_eq(teng_param_read(&net, net.np - 2, 1, g), 0);
    double s2 = 0;
    for (size_t i = 0; i < net.p[net.np - 2].count; i++)
        s2 += (double)g[i] * g[i];
    ck_assert(isfinite(s2) && s2 > 0);
    free(g);
    free(x);
    free(y);
    teng_net_free(&net);
    teng_backend_close(bk);
    return loss;
}

START_TEST(models_run_small)
{
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    ck_assert_double_eq_tol(_run(s, 4), log(10.0), 0.02);
    /* At 32 px the last stage is 1x1 and BN over a batch of 2 makes
     * every feature +-1: the logits spread a little more, hence the
     * looser bound. */
    s = tmodel_defaults(TMODEL_RESNET18);
    s.image_size = 32;
    s.classes = 7;
    ck_assert_double_eq_tol(_run(s, 2), log(7.0), 0.3);
    s = tmodel_defaults(TMODEL_RESNET50);
    s.image_size = 32;
    s.classes = 5;
    ck_assert_double_eq_tol(_run(s, 2), log(5.0), 0.3);
    s = tmodel_defaults(TMODEL_ALEXNET_BN);
    s.image_size = 63;
    s.classes = 6;
    s.label_smoothing = 0.1f;
    ck_assert_double_eq_tol(_run(s, 2), log(6.0), 0.3);
}
END_TEST

/* One training step of ResNet-8 with and without activation memory reuse
 * (in-place residuals, lifetimes, gradients over dead activations) must
 * give bitwise the same loss and weight gradients, and reuse must save
 * memory. */
typedef struct {
    void *mem;    /* what _give hands out (NULL: refuse) */
    size_t asked; /* bytes asked for */
    void *got;    /* the compiled net's grads arena */
    int external;
} _grads_ctx;

static void *_give(void *ctx, size_t bytes)
{
    _grads_ctx *g = ctx;
    g->asked = bytes;
    return g->mem;
}

static double _step_with(int no_reuse, float *grads, size_t *acts_bytes,
                         _grads_ctx *gc)
{
    teng_backend *bk = lh_backend();
    teng_net net;
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    s.depth = 8;
    s.image_size = 12;
    teng_net_init(&net);
    teng_net_set_no_reuse(&net, no_reuse);
    if (gc)
        teng_net_set_grads_alloc(&net, _give, gc);
    ck_assert_int_ge(tmodel_build(&net, &s), 0);
    ck_assert_int_eq(teng_net_compile(&net, bk, 4), 0);
    ck_assert_int_eq(tmodel_init(&net, 5), 0);
    float x[4 * 144];
    int32_t y[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4 * 144; i++)
        x[i] = sinf((float)i);
    ck_assert_int_eq(teng_net_set_input(&net, x), 0);
    ck_assert_int_eq(teng_net_set_labels(&net, y), 0);
    ck_assert_int_eq(teng_net_forward(&net, 1), 0);
    ck_assert_int_eq(teng_net_backward(&net), 0);
    size_t off = 0;
    for (int p = 0; p < net.np; p++) {
        ck_assert_int_eq(teng_param_read(&net, p, 1, grads + off), 0);
        off += net.p[p].count;
    }
    double loss = teng_net_loss(&net);
    *acts_bytes = net.acts_bytes;
    if (gc) {
        gc->got = net.grads;
        gc->external = net.grads_external;
    }
    teng_net_free(&net);
    teng_backend_close(bk);
    return loss;
}

static double _step(int no_reuse, float *grads, size_t *acts_bytes)
{
    return _step_with(no_reuse, grads, acts_bytes, NULL);
}

/* The grads arena from the caller (node-shared memory in torus-train): the
 * net uses exactly that memory, asks for params_bytes, never frees it
 * (a double free would abort this test), and computes the same bits; a
 * caller that gives nothing leaves the backend's own arena. */
START_TEST(grads_from_caller)
{
    static float g0[100000], g1[100000], g2[100000];
    size_t b;
    double l0 = _step(0, g0, &b);
    _grads_ctx gc = {.mem = aligned_alloc(64, 1 << 20)};
    ck_assert_ptr_nonnull(gc.mem);
    memset(gc.mem, 0, 1 << 20);
    double l1 = _step_with(0, g1, &b, &gc);
    ck_assert_ptr_eq(gc.got, gc.mem);
    ck_assert_int_eq(gc.external, 1);
    ck_assert_uint_gt(gc.asked, 1000);
    ck_assert_uint_le(gc.asked, 1 << 20);
    ck_assert(memcmp(&l0, &l1, sizeof l0) == 0);
    ck_assert(memcmp(g0, g1, sizeof g0) == 0);
    int nonzero = 0;
    for (size_t i = 0; i < gc.asked / 4; i++)
        nonzero += ((float *)gc.mem)[i] != 0.0f;
    ck_assert_int_gt(nonzero, 100); /* backward wrote into it */
    free(gc.mem);
    _grads_ctx none = {0};
    double l2 = _step_with(0, g2, &b, &none);
    ck_assert_ptr_nonnull(none.got);
    ck_assert_int_eq(none.external, 0);
    ck_assert(memcmp(&l0, &l2, sizeof l0) == 0);
    ck_assert(memcmp(g0, g2, sizeof g0) == 0);
}
END_TEST

START_TEST(reuse_is_invisible)
{
    static float g1[100000], g2[100000];
    size_t b1, b2;
    double l1 = _step(0, g1, &b1), l2 = _step(1, g2, &b2);
    ck_assert(l1 == l2);
    ck_assert_int_eq(memcmp(g1, g2, sizeof(g1)), 0);
    ck_assert_uint_lt(b1, b2 * 3 / 4);
}
END_TEST

/* Batch-size control: a net compiled for batch 8 and switched to 4 (and
 * back) computes what a net compiled for 4 computes, on the same arenas. */
START_TEST(set_batch_matches_fresh_compile)
{
    teng_backend *bk = lh_backend();
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    s.depth = 8;
    s.image_size = 12;
    float x[8 * 144];
    int32_t y[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int i = 0; i < 8 * 144; i++)
        x[i] = cosf((float)i * 0.3f);
    double loss[2];
    for (int k = 0; k < 2; k++) {
        teng_net net;
        teng_net_init(&net);
        ck_assert_int_ge(tmodel_build(&net, &s), 0);
        ck_assert_int_eq(teng_net_compile(&net, bk, k ? 4 : 8), 0);
        ck_assert_int_eq(tmodel_init(&net, 9), 0);
        void *acts = net.acts;
        if (!k) {
            ck_assert_int_eq(teng_net_set_batch(&net, 4), 0);
            ck_assert_int_eq(teng_net_set_batch(&net, 8), 0);
            ck_assert_int_eq(teng_net_set_batch(&net, 4), 0);
            ck_assert_int_eq(teng_net_set_batch(&net, 9), TENG_EINVAL);
            ck_assert_ptr_eq(net.acts, acts);
        }
        teng_net_set_global_batch(&net, 4);
        ck_assert_int_eq(teng_net_set_input(&net, x), 0);
        ck_assert_int_eq(teng_net_set_labels(&net, y), 0);
        ck_assert_int_eq(teng_net_forward(&net, 1), 0);
        ck_assert_int_eq(teng_net_backward(&net), 0);
        loss[k] = teng_net_loss(&net);
        teng_net_free(&net);
    }
    ck_assert_double_eq_tol(loss[0], loss[1], 1e-6);
    teng_backend_close(bk);
}
END_TEST

/* A ResNet-8 of size x size images compiled at batch, initialised, and
 * its SGD with the defaults (but c->lars as given). */
static void _resnet8_sgd(teng_net *net, teng_backend *bk, int size, int batch,
                         topt_sgd *o, topt_config *c)
{
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    int lars = c->lars;
    s.depth = 8;
    s.image_size = size;
    teng_net_init(net);
    ck_assert_int_ge(tmodel_build(net, &s), 0);
    ck_assert_int_eq(teng_net_compile(net, bk, batch), 0);
    ck_assert_int_eq(tmodel_init(net, 2), 0);
    topt_config_defaults(c);
    c->lars = lars;
    ck_assert_int_eq(topt_sgd_init(o, net, c), 0);
}

/* Evaluation of n images in batches of b (the last one short), as
 * torus-train's test pass does it: out = {top-1, top-5, summed loss}. */
static void _eval_in_batches(teng_net *net, const float *x, const int32_t *y,
                             int n, int b, double out[3])
{
    out[0] = out[1] = out[2] = 0;
    for (int i = 0; i < n; i += b) {
        int m = n - i < b ? n - i : b, t1, t5;
        ck_assert_int_eq(teng_net_set_batch(net, m), 0);
        size_t per = teng_tensor_count(net, net->input) / (size_t)m;
        ck_assert_int_eq(teng_net_set_input(net, x + (size_t)i * per), 0);
        ck_assert_int_eq(teng_net_set_labels(net, y + i), 0);
        ck_assert_msg(teng_net_forward(net, 0) == 0, "%s", torus_error_msg());
        ck_assert_int_eq(teng_net_topk(net, &t1, &t5), 0);
        out[0] += t1;
        out[1] += t5;
        out[2] += teng_net_loss(net) * m;
    }
}

/* Evaluation does not depend on the batch size: 13 images scored in
 * batches of 1..13 (so last batches of 1, 2, 3 ...) give the same top-1,
 * top-5 and loss as one batch of 13, after a few training steps have moved
 * the weights and BN running statistics away from their init. (A batch of
 * one once scored differently: oneDNN re-planned its inner product with
 * another weights layout than the params arena held.) */
START_TEST(eval_is_batch_invariant)
{
    enum { N = 13 };
    teng_backend *bk = lh_backend();
    teng_net net;
    topt_sgd o;
    topt_config c;
    c.lars = 0;
    _resnet8_sgd(&net, bk, 12, N, &o, &c);
    static float x[N * 144];
    int32_t y[N];
    lh_fill(x, N * 144, 11, -1.f, 1.f);
    for (int i = 0; i < N; i++)
        y[i] = (i * 7) % 10;
    for (int step = 0; step < 6; step++) {
        ck_assert_int_eq(teng_net_set_input(&net, x), 0);
        ck_assert_int_eq(teng_net_set_labels(&net, y), 0);
        ck_assert_int_eq(teng_net_forward(&net, 1), 0);
        ck_assert_int_eq(teng_net_backward(&net), 0);
        ck_assert_int_eq(topt_sgd_step(&o, 0.2), 0);
    }
    double want[3], got[3];
    _eval_in_batches(&net, x, y, N, N, want);
    /* The weights must have left the init (logits not all tied). */
    ck_assert_double_lt(want[2] / N, 2.2);
    for (int b = 1; b < N; b++) {
        _eval_in_batches(&net, x, y, N, b, got);
        ck_assert_msg(got[0] == want[0] && got[1] == want[1],
                      "batch %d: top-1 %g top-5 %g, batch %d: %g %g", b, got[0],
                      got[1], N, want[0], want[1]);
        ck_assert_msg(fabs(got[2] - want[2]) < 1e-4 * N,
                      "batch %d: loss %.6f, batch %d: %.6f", b, got[2] / N, N,
                      want[2] / N);
    }
    topt_sgd_free(&o);
    teng_net_free(&net);
    teng_backend_close(bk);
}
END_TEST

/* Counts allocations of 4 KiB or more while _watch is set. Defining malloc
 * here interposes it for every library in the process (glibc's free takes
 * __libc_malloc's blocks). */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
static volatile int _watch;
static volatile long _big;

void *malloc(size_t n)
{
    if (_watch && n >= 4096)
        __atomic_add_fetch(&_big, 1, __ATOMIC_RELAXED);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    if (_watch && n * m >= 4096)
        __atomic_add_fetch(&_big, 1, __ATOMIC_RELAXED);
    return __libc_calloc(n, m);
}

/* Working memory is allocated at compile time only: after a warm-up step,
 * training steps (forward, backward, SGD) allocate no block of 4 KiB or
 * more, and leave the heap's bytes in use and its mmapped blocks as they
 * were. (oneDNN's execute makes a few small bookkeeping allocations per
 * call inside the library; they come and go within the call.) */
START_TEST(steps_allocate_nothing)
{
    teng_backend *bk = lh_backend();
    teng_net net;
    topt_sgd o;
    topt_config c = {.lars = 1};
    _resnet8_sgd(&net, bk, 28, 16, &o, &c);
    static float x[16 * 28 * 28];
    int32_t y[16];
    for (int i = 0; i < 16; i++)
        y[i] = i % 10;
    struct mallinfo2 before = {0}, after;
    for (int step = 0; step < 4; step++) {
        if (step == 1) {
            before = mallinfo2();
            _watch = 1;
        }
        ck_assert_int_eq(teng_net_set_input(&net, x), 0);
        ck_assert_int_eq(teng_net_set_labels(&net, y), 0);
        ck_assert_int_eq(teng_net_forward(&net, 1), 0);
        ck_assert_int_eq(teng_net_backward(&net), 0);
        ck_assert_int_eq(topt_sgd_step(&o, 0.1), 0);
    }
    _watch = 0;
    after = mallinfo2();
    ck_assert_int_eq(_big, 0);
    ck_assert_uint_eq(after.hblks, before.hblks);
    ck_assert_uint_eq(after.hblkhd, before.hblkhd);
    ck_assert_uint_eq(after.uordblks, before.uordblks);
    topt_sgd_free(&o);
    teng_net_free(&net);
    teng_backend_close(bk);
}
END_TEST

START_TEST(init_statistics)
{
    teng_backend *bk = lh_backend();
    teng_net net;
    tmodel_spec s = tmodel_defaults(TMODEL_CIFAR_RESNET);
    teng_net_init(&net);
    ck_assert_int_ge(tmodel_build(&net, &s), 0);
    ck_assert_int_eq(teng_net_compile(&net, bk, 2), 0);
    ck_assert_int_eq(tmodel_init(&net, 7), 0);
    float *v = malloc(64 * 64 * 9 * sizeof(float));
    for (int i = 0; i < net.np; i++) {
        const teng_param *p = &net.p[i];
        const teng_layer *l = &net.l[p->layer];
        ck_assert_int_eq(teng_param_read(&net, i, 0, v), 0);
        double m = 0, m2 = 0;
        for (size_t j = 0; j < p->count; j++) {
            m += v[j];
            m2 += (double)v[j] * v[j];
        }
        m /= p->count;
        m2 /= p->count;
        if (p->kind == TENG_P_GAMMA)
            ck_assert_double_eq(m, l->zero_gamma ? 0.0 : 1.0);
        else if (p->kind == TENG_P_WEIGHT && l->kind == TENG_L_CONV &&
                 p->count >= 9216) {
            double want = 2.0 / (p->dims[0] * p->dims[2] * p->dims[3]);
            ck_assert_double_eq_tol(m2, want, 0.1 * want);
        }
    }
    /* Same seed, same weights: read the first conv twice over. */
    float a[144], b[144];
    ck_assert_int_eq(teng_param_read(&net, 0, 0, a), 0);
    ck_assert_int_eq(tmodel_init(&net, 7), 0);
    ck_assert_int_eq(teng_param_read(&net, 0, 0, b), 0);
    ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
    free(v);
    teng_net_free(&net);
    teng_backend_close(bk);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("models");
    TCase *tc = tcase_create("models");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, param_counts);
    tcase_add_test(tc, resnet50_v15_stride_and_zero_gamma);
    tcase_add_test(tc, spec_validation);
#ifdef TORUS_HAVE_DNNL
    tcase_add_test(tc, models_run_small);
    tcase_add_test(tc, init_statistics);
    tcase_add_test(tc, reuse_is_invisible);
    tcase_add_test(tc, grads_from_caller);
    tcase_add_test(tc, set_batch_matches_fresh_compile);
    tcase_add_test(tc, eval_is_batch_invariant);
    tcase_add_test(tc, steps_allocate_nothing);
#endif
    suite_add_tcase(s, tc);
    return lh_run(s);
}
