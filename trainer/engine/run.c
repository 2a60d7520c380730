/* run.c: executing a compiled net (forward, backward with gradient fan-in
 * sums and the per-layer gradient hook) and moving data in and out in
 * canonical layouts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainer/engine/internal.h"

#define _NEED_COMPILED(net)                                        \
    do {                                                           \
        if (!(net)->compiled)                                      \
            return TORUS_FAIL(TENG_ESTATE, "net is not compiled"); \
    } while (0)

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Profiling: charge the time since *t0 to slot and restart the clock. */
static void _prof(teng_net *net, int slot, double *t0)
{
    if (!net->prof)
        return;
    net->bk->ops->sync(net->bk);
    double t = _now();
    net->prof[slot] += t - *t0;
    *t0 = t;
}

static int _bkfail(teng_net *net, int rc, const char *what, int layer)
{
    return torus_error_prefix(rc, "%s of layer %d '%s' on %s", what, layer,
                              layer >= 0 ? net->l[layer].name : "-",
                              net->bk->ops->name);
}

void teng_net_set_global_batch(teng_net *net, int global_batch)
{
    net->global_batch = global_batch;
}

void teng_net_set_loss_scale(teng_net *net, double scale)
{
    net->loss_scale = scale;
}

void teng_net_set_loss_scale_dev(teng_net *net, const double *dev)
{
    net->loss_scale_dev = dev;
}

void teng_net_set_grad_hook(teng_net *net, teng_grad_hook fn, void *ctx)
{
    net->grad_hook = fn;
    net->grad_hook_ctx = ctx;
}

void teng_net_set_grads_alloc(teng_net *net, teng_grads_alloc fn, void *ctx)
{
    net->grads_alloc = fn;
    net->grads_alloc_ctx = ctx;
}

void teng_net_set_input_grad(teng_net *net, int on)
{
    net->input_grad = on;
}

void teng_net_set_no_reuse(teng_net *net, int on)
{
    net->no_reuse = on;
}

void teng_net_set_poison(teng_net *net, int on)
{
    net->poison = on;
}

void *teng_net_late_ws(const teng_net *net, int layer)
{
    if (!net->compiled || layer < 0 || layer >= net->nl) {
        TORUS_FAIL(TENG_EINVAL, "no compiled layer %d", layer);
        return NULL;
    }
    const teng_layer *l = &net->l[layer];
    if (!l->ws || !l->ws_late) {
        TORUS_FAIL(TENG_EINVAL,
                   "layer %d '%s': its workspace is read after the backward "
                   "but %s",
                   layer, l->name,
                   l->ws ? "was not declared so (TENG_READS_WS_LATE): the "
                           "plan reuses it"
                         : "it has none");
        return NULL;
    }
    return l->ws;
}

/* Poison mode: the acts buffers whose lifetime ends at step time `at`
 * (forward of layer i: i; its backward: 2 nl - 1 - i) become NaN bytes. */
static int _poison(teng_net *net, int at)
{
    teng_backend *bk = net->bk;
    if (!net->poison || net->capturing)
        return TENG_OK;
    for (int i = 0; i < net->acts_niv; i++) {
        const teng_interval *b = &net->acts_iv[i];
        char *p = (char *)net->acts + b->offset;
        if (b->last != at || !b->bytes)
            continue;
        if (bk->ops->host_memory) {
            memset(p, 0xff, b->bytes);
            continue;
        }
        if (b->bytes > net->poison_cap) {
            void *src = realloc(net->poison_src, b->bytes);
            if (!src)
                return TORUS_FAIL(TENG_ENOMEM, "out of memory");
            memset(src, 0xff, b->bytes);
            net->poison_src = src;
            net->poison_cap = b->bytes;
        }
        int rc = bk->ops->upload(bk, p, net->poison_src, b->bytes);
        if (rc)
            return _bkfail(net, rc, "poison", -1);
    }
    return TENG_OK;
}

int teng_net_forward(teng_net *net, int training)
{
    _NEED_COMPILED(net);
    teng_backend *bk = net->bk;
    double t0 = net->prof ? _now() : 0;
    if (training)
        net->step++; /* new dropout masks for every training step */
    for (int i = 0; i < net->nl; i++) {
        int rc = bk->ops->forward(bk, net, i, training);
        if (rc)
            return _bkfail(net, rc, "forward", i);
        _prof(net, 2 * i, &t0);
        if ((rc = _poison(net, i)))
            return rc;
    }
    return TENG_OK;
}

int teng_net_backward(teng_net *net)
{
    _NEED_COMPILED(net);
    teng_backend *bk = net->bk;
    double t0 = net->prof ? _now() : 0;
    for (int i = net->nl - 1; i >= 0; i--) {
        teng_layer *l = &net->l[i];
        int rc;
        /* Every consumer of this layer's output has run: gather its
         * gradient contributions before the layer reads them. */
        if (l->out >= 0 && net->t[l->out].ncontrib > 0 &&
            (rc = bk->ops->grad_sum(bk, net, l->out)))
            return _bkfail(net, rc, "gradient sum", i);
        if ((rc = bk->ops->backward(bk, net, i)))
            return _bkfail(net, rc, "backward", i);
        _prof(net, 2 * i + 1, &t0);
        if (l->nparam && net->grad_hook &&
            (rc = net->grad_hook(net->grad_hook_ctx, net, i)))
            return TORUS_FAIL(TENG_EINVAL,
                              "gradient hook failed after layer %d '%s' (%d)",
                              i, l->name, rc);
        if ((rc = _poison(net, 2 * net->nl - 1 - i)))
            return rc;
    }
    return TENG_OK;
}

int teng_net_sync(teng_net *net)
{
    _NEED_COMPILED(net);
    int rc = net->bk->ops->sync(net->bk);
    return rc ? _bkfail(net, rc, "sync", -1) : TENG_OK;
}

double teng_net_loss(const teng_net *net)
{
    if (net->loss_layer < 0 || net->batch <= 0)
        return NAN;
    double sum = net->l[net->loss_layer].loss_sum;
    if (net->bk && net->bk->ops->loss_sum &&
        net->bk->ops->loss_sum(net->bk, net, &sum))
        return NAN;
    return sum / net->batch;
}

/* ---- step graphs (teng.h) ---- */

struct teng_graph {
    void *exec; /* the backend's */
};

int teng_net_graph_supported(const teng_net *net)
{
    return net->bk && teng_backend_graph_supported(net->bk);
}

unsigned teng_net_plan_id(const teng_net *net)
{
    return net->plans;
}

int teng_net_graph_begin(teng_net *net)
{
    _NEED_COMPILED(net);
    if (!teng_net_graph_supported(net))
        return TORUS_FAIL(TENG_EINVAL, "backend %s records no step graphs",
                          net->bk->ops->name);
    if (net->prof) /* it waits after every layer */
        return TORUS_FAIL(TENG_ESTATE, "no step graph while profiling");
    if (net->capturing)
        return TORUS_FAIL(TENG_ESTATE, "a step graph is already recording");
    int rc = net->bk->ops->graph_begin(net->bk);
    if (rc)
        return _bkfail(net, rc, "graph begin", -1);
    net->capturing = 1;
    net->graph_step0 = net->step;
    return TENG_OK;
}

int teng_net_graph_end(teng_net *net, teng_graph **g)
{
    *g = NULL;
    _NEED_COMPILED(net);
    if (!net->capturing)
        return TORUS_FAIL(TENG_ESTATE, "no step graph is recording");
    net->capturing = 0;
    void *exec = NULL;
    int rc = net->bk->ops->graph_end(net->bk, &exec);
    if (!rc && !(*g = calloc(1, sizeof **g))) {
        net->bk->ops->graph_free(net->bk, exec);
        rc = TORUS_FAIL(TENG_ENOMEM, "out of memory");
    }
    /* Nothing recorded ran: a replay advances the step, as a forward
     * does; after a failure the next forward is this one again. */
    net->step = net->graph_step0;
    if (rc)
        return _bkfail(net, rc, "graph end", -1);
    (*g)->exec = exec;
    return TENG_OK;
}

int teng_net_graph_replay(teng_net *net, teng_graph *g)
{
    _NEED_COMPILED(net);
    if (!g || net->capturing)
        return TORUS_FAIL(TENG_ESTATE, "no step graph to replay");
    int rc = net->bk->ops->graph_launch(net->bk, g->exec);
    if (rc)
        return _bkfail(net, rc, "graph launch", -1);
    net->step++; /* as the recorded training forward did */
    return TENG_OK;
}

void teng_net_graph_free(teng_net *net, teng_graph *g)
{
    if (!g)
        return;
    if (g->exec && net->bk)
        net->bk->ops->graph_free(net->bk, g->exec);
    free(g);
}

size_t teng_tensor_count(const teng_net *net, int id)
{
    teng_shape s = net->t[id].shape;
    return (size_t)s.n * (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

int teng_tensor_write(teng_net *net, int id, int grad, const float *src)
{
    _NEED_COMPILED(net);
    if (id < 0 || id >= net->nt || (grad && !net->t[id].grad))
        return TORUS_FAIL(TENG_EINVAL, "no tensor%s %d",
                          grad ? " gradient" : "", id);
    int rc = net->bk->ops->tensor_io(net->bk, net, id, grad, (float *)src, 1);
    return rc ? _bkfail(net, rc, "tensor write", net->t[id].producer) : 0;
}

int teng_tensor_read(teng_net *net, int id, int grad, float *dst)
{
    _NEED_COMPILED(net);
    if (id < 0 || id >= net->nt || (grad && !net->t[id].grad))
        return TORUS_FAIL(TENG_EINVAL, "no tensor%s %d",
                          grad ? " gradient" : "", id);
    int rc = net->bk->ops->tensor_io(net->bk, net, id, grad, dst, 0);
    return rc ? _bkfail(net, rc, "tensor read", net->t[id].producer) : 0;
}

static int _param_io(teng_net *net, int id, void *dev, float *host,
                     int to_device, const char *what)
{
    _NEED_COMPILED(net);
    if (id < 0 || id >= net->np)
        return TORUS_FAIL(TENG_EINVAL, "no param %d", id);
    if (!dev)
        return TORUS_FAIL(TENG_EINVAL, "%s: no buffer", what);
    int rc = net->bk->ops->param_io(net->bk, net, id, dev, host, to_device);
    return rc ? _bkfail(net, rc, what, net->p[id].layer) : 0;
}

int teng_param_write(teng_net *net, int id, int grad, const float *src)
{
    void *dev = id >= 0 && id < net->np ? (grad ? (void *)net->p[id].grad
                                                : (void *)net->p[id].master)
                                        : NULL;
    int rc = _param_io(net, id, dev, (float *)src, 1, "param write");
    /* The master changed: a working copy of its own must follow. */
    if (!rc && !grad && net->bk->ops->refresh_work &&
        (rc = net->bk->ops->refresh_work(net->bk, net)))
        return _bkfail(net, rc, "working copy refresh", net->p[id].layer);
    return rc;
}

int teng_param_read(teng_net *net, int id, int grad, float *dst)
{
    void *dev = id >= 0 && id < net->np ? (grad ? (void *)net->p[id].grad
                                                : (void *)net->p[id].master)
                                        : NULL;
    return _param_io(net, id, dev, dst, 0, "param read");
}

/* A param's slice of optimizer state lies at the param's offset. */
static void *_state_slice(const teng_net *net, const void *state, int id)
{
    return id >= 0 && id < net->np ? (char *)state + net->p[id].offset : NULL;
}

int teng_optstate_write(teng_net *net, void *state, int id, const float *src)
{
    return _param_io(net, id, _state_slice(net, state, id), (float *)src, 1,
                     "optimizer state write");
}

int teng_optstate_read(teng_net *net, const void *state, int id, float *dst)
{
    return _param_io(net, id, _state_slice(net, state, id), dst, 0,
                     "optimizer state read");
}

int teng_stats_write(teng_net *net, int id, const float *src)
{
    _NEED_COMPILED(net);
    if (id < 0 || id >= net->nstats)
        return TORUS_FAIL(TENG_EINVAL, "no BN statistics vector %d", id);
    int rc =
        net->bk->ops->upload(net->bk, (char *)net->stats + net->stat_off[id],
                             src, sizeof(float) * (size_t)net->stat_len[id]);
    return rc ? _bkfail(net, rc, "statistics write", -1) : 0;
}

int teng_stats_read(teng_net *net, int id, float *dst)
{
    _NEED_COMPILED(net);
    if (id < 0 || id >= net->nstats)
        return TORUS_FAIL(TENG_EINVAL, "no BN statistics vector %d", id);
    int rc = net->bk->ops->download(net->bk, dst,
                                    (char *)net->stats + net->stat_off[id],
                                    sizeof(float) * (size_t)net->stat_len[id]);
    return rc ? _bkfail(net, rc, "statistics read", -1) : 0;
}

int teng_net_set_input(teng_net *net, const float *nchw)
{
    return teng_tensor_write(net, net->input, 0, nchw);
}

int teng_net_set_labels(teng_net *net, const int32_t *labels)
{
    _NEED_COMPILED(net);
    if (net->loss_layer < 0)
        return TORUS_FAIL(TENG_EINVAL, "net has no loss layer");
    int k = net->t[net->l[net->loss_layer].in[0]].shape.c;
    for (int i = 0; i < net->batch; i++)
        if (labels[i] < 0 || labels[i] >= k)
            return TORUS_FAIL(TENG_EINVAL,
                              "label %d of sample %d is outside 0..%d",
                              labels[i], i, k - 1);
    memcpy(net->host_labels, labels, sizeof(int32_t) * (size_t)net->batch);
    int rc = net->bk->ops->upload_labels
                 ? net->bk->ops->upload_labels(net->bk, net, labels, net->batch)
                 : net->bk->ops->upload(net->bk, net->labels, labels,
                                        sizeof(int32_t) * (size_t)net->batch);
    return rc ? _bkfail(net, rc, "label upload", -1) : TENG_OK;
}

int teng_net_topk(teng_net *net, int *top1, int *top5)
{
    _NEED_COMPILED(net);
    if (net->loss_layer < 0)
        return TORUS_FAIL(TENG_EINVAL, "net has no loss layer");
    int id = net->l[net->loss_layer].in[0], rc;
    int k = net->t[id].shape.c;
    if ((rc = teng_tensor_read(net, id, 0, net->host_logits)))
        return rc;
    *top1 = *top5 = 0;
    for (int i = 0; i < net->batch; i++) {
        const float *z = net->host_logits + (size_t)i * k;
        int y = net->host_labels[i], better = 0;
        /* Rank of the true class = number of strictly larger logits. */
        for (int j = 0; j < k; j++)
            better += z[j] > z[y];
        *top1 += better < 1;
        *top5 += better < 5;
    }
    return TENG_OK;
}
