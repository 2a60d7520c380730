/* test_engine_f16.c: the engine places working copies that are not fp32
 * (trainer/engine/compile.c): a backend that plans f16/bf16 working
 * copies gets them in an arena of their own, each 64-byte aligned, in
 * param order, two bytes an element, apart from the masters and from
 * each other; fp32 params keep master == work; a param write refreshes
 * them; the arena is freed with the net; a backend that cannot refresh
 * them is refused at compile. The backend here is a minimal host-memory
 * one written for the test: the engine's side is what is checked, and no
 * GPU is needed. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/layer_harness.h"
#include "trainer/engine/backend.h"
#include "trainer/engine/teng.h"
#include "trainer/engine/graph.h"

static int _live, _refreshes;

static void *_alloc(teng_backend *bk, size_t n)
{
    (void)bk;
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1))
        return NULL;
    memset(p, 0, n);
    _live++;
    return p;
}

static void _free(teng_backend *bk, void *p)
{
    (void)bk;
    _live--;
    free(p);
}

static int _copy(teng_backend *bk, void *d, const void *s, size_t n)
{
    (void)bk;
    memcpy(d, s, n);
    return 0;
}

static int _sync(teng_backend *bk)
{
    (void)bk;
    return 0;
}

/* Weights (and gammas) get f16 or bf16 working copies, biases stay fp32. */
static int _plan(teng_backend *bk, teng_net *net, int batch)
{
    (void)batch;
    for (int i = 0; i < net->nt; i++)
        net->t[i].bytes = sizeof(float) * teng_tensor_count(net, i);
    for (int i = 0; i < net->np; i++) {
        teng_param *p = &net->p[i];
        p->bytes = sizeof(float) * p->count;
        p->dtype = p->kind == TENG_P_BIAS ? TENG_F32
                   : bk->opts.device      ? TENG_BF16
                                          : TENG_F16;
    }
    net->bkstate = net; /* anything non-NULL: release is called */
    return 0;
}

static int _bind(teng_backend *bk, teng_net *net)
{
    (void)bk;
    (void)net;
    return 0;
}

static void _release(teng_backend *bk, teng_net *net)
{
    (void)bk;
    net->bkstate = NULL;
}

static int _io(teng_backend *bk, teng_net *net, int id, int grad, float *h,
               int to_dev)
{
    (void)bk;
    void *d = grad ? net->t[id].grad : net->t[id].data;
    size_t n = sizeof(float) * teng_tensor_count(net, id);
    memcpy(to_dev ? d : (void *)h, to_dev ? (void *)h : d, n);
    return 0;
}

static int _pio(teng_backend *bk, teng_net *net, int id, void *dev, float *h,
                int to_dev)
{
    (void)bk;
    size_t n = sizeof(float) * net->p[id].count;
    memcpy(to_dev ? dev : (void *)h, to_dev ? (void *)h : dev, n);
    return 0;
}

/* The top 16 bits of each master: enough to see which copy went where. */
static int _refresh(teng_backend *bk, teng_net *net)
{
    (void)bk;
    _refreshes++;
    for (int i = 0; i < net->np; i++) {
        teng_param *p = &net->p[i];
        if (p->dtype == TENG_F32)
            continue;
        for (size_t k = 0; k < p->count; k++) {
            uint32_t u;
            memcpy(&u, &p->master[k], 4);
            ((uint16_t *)p->work)[k] = (uint16_t)(u >> 16);
        }
    }
    return 0;
}

static void _destroy(teng_backend *bk)
{
    free(bk);
}

static teng_backend_ops _ops = {
    .name = "f16-test",
    .destroy = _destroy,
    .alloc = _alloc,
    .free = _free,
    .upload = _copy,
    .download = _copy,
    .sync = _sync,
    .plan = _plan,
    .bind = _bind,
    .release = _release,
    .tensor_io = _io,
    .param_io = _pio,
    .refresh_work = _refresh,
};

static teng_backend *_backend(int bf16)
{
    teng_backend *bk = calloc(1, sizeof(*bk));
    ck_assert_ptr_nonnull(bk);
    bk->ops = &_ops;
    bk->opts.device = bf16;
    return bk;
}

static void _build(teng_net *net)
{
    ck_assert_int_eq(teng_net_init(net), 0);
    int x = teng_add_input(net, 3, 8, 8);
    int c = teng_add_conv(net, "conv", x, 5, 3, 1, 1, 1);
    ck_assert_int_ge(teng_add_fc(net, "fc", c, 7, 1), 0);
}

static int _inside(const void *p, size_t n, const void *base, size_t len)
{
    const char *a = p, *b = base;
    return a >= b && a + n <= b + len;
}

START_TEST(places_working_copies)
{
    teng_backend *bk = _backend(_i);
    teng_net net;
    _build(&net);
    ck_assert_int_eq(teng_net_compile(&net, bk, 2), 0);
    ck_assert_int_eq(net.np, 4);
    const char *prev_end = NULL;
    for (int i = 0; i < net.np; i++) {
        teng_param *p = &net.p[i];
        if (p->kind == TENG_P_BIAS) {
            ck_assert_ptr_eq(p->work, p->master);
            continue;
        }
        ck_assert_int_eq(p->dtype, _i ? TENG_BF16 : TENG_F16);
        ck_assert_ptr_ne(p->work, p->master);
        ck_assert_uint_eq((uintptr_t)p->work % 64, 0);
        /* Not in any other arena, after the previous copy. */
        ck_assert(
            !_inside(p->work, 2 * p->count, net.params, net.params_bytes));
        ck_assert(!_inside(p->work, 2 * p->count, net.grads, net.params_bytes));
        ck_assert(!_inside(p->work, 2 * p->count, net.acts, net.acts_bytes));
        ck_assert((const char *)p->work >= prev_end);
        prev_end = (const char *)p->work + 2 * p->count;
    }
    /* A param write refreshes the working copies from the masters. */
    float w[5 * 3 * 3 * 3];
    for (int k = 0; k < 135; k++)
        w[k] = (float)k + 0.5f;
    int before = _refreshes;
    ck_assert_int_eq(teng_param_write(&net, 0, 0, w), 0);
    ck_assert_int_gt(_refreshes, before);
    for (int k = 0; k < 135; k++) {
        uint32_t u;
        memcpy(&u, &w[k], 4);
        ck_assert_uint_eq(((uint16_t *)net.p[0].work)[k], u >> 16);
    }
    /* The working-copies arena goes with the net. */
    teng_net_free(&net);
    ck_assert_int_eq(_live, 0);
    teng_backend_close(bk);
}
END_TEST

START_TEST(refuses_without_refresh)
{
    teng_backend *bk = _backend(0);
    teng_backend_ops ops = _ops;
    ops.refresh_work = NULL;
    bk->ops = &ops;
    teng_net net;
    _build(&net);
    ck_assert_int_eq(teng_net_compile(&net, bk, 2), TENG_EINVAL);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "refresh_work"));
    teng_net_free(&net);
    ck_assert_int_eq(_live, 0);
    teng_backend_close(bk);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine_f16");
    TCase *tc = tcase_create("engine_f16");
    tcase_add_loop_test(tc, places_working_copies, 0, 2);
    tcase_add_test(tc, refuses_without_refresh);
    suite_add_tcase(s, tc);
    return lh_run(s);
}
