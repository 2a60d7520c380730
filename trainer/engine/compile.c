/* compile.c: turns a built graph into a runnable net on a backend: shapes
 * at the batch, backend planning, the arena layout (including the liveness
 * plan for activation gradients), allocation and binding. */
#include <stdlib.h>
#include <string.h>

#include "trainer/engine/arena.h"
#include "trainer/engine/internal.h"

static void _set_batch_shapes(teng_net *net, int batch)
{
    net->batch = batch;
    for (int i = 0; i < net->nt; i++)
        net->t[i].shape.n = batch;
}

/* One time axis for a training step: forward runs layer i at step i,
 * backward runs it at step bt(i) = 2 nl - 1 - i. */
static int _bt(const teng_net *net, int layer)
{
    return 2 * net->nl - 1 - layer;
}

typedef struct {
    teng_interval *iv;
    int n, cap;
} _bufs;

static int _newbuf(_bufs *b, size_t bytes, int first, int last)
{
    if (b->n == b->cap) {
        int ncap = b->cap ? 2 * b->cap : 128;
        teng_interval *p = realloc(b->iv, sizeof(*p) * (size_t)ncap);
        if (!p)
            return -1;
        b->iv = p;
        b->cap = ncap;
    }
    b->iv[b->n] = (teng_interval){bytes, first, last, 0};
    return b->n++;
}

/* _plan_grads, phase 1: a buffer for each consumer's contribution to
 * tensor id's grad, into c[0..*nc) and slot[]; *main is the first fresh
 * (non-aliased) one, -1 if none. */
static int _plan_contribs(teng_net *net, _bufs *b, int *slot, int id, int *c,
                          int *nc, int *main)
{
    int tp = _bt(net, net->t[id].producer);
    for (int li = net->t[id].producer + 1; li < net->nl; li++) {
        teng_layer *l = &net->l[li];
        for (int j = 0; j < l->nin; j++) {
            int buf;
            if (l->in[j] != id)
                continue;
            if (*nc == 4)
                return TORUS_FAIL(TENG_EINVAL,
                                  "tensor %d has more than 4 consumers", id);
            if (l->kind == TENG_L_ADD) {
                /* d(a+b)/da = 1: the residual's output grad (after its
                 * fused ReLU backward) is its inputs' grad too. */
                buf = net->t[l->out].gbuf;
                if (b->iv[buf].last < tp)
                    b->iv[buf].last = tp;
            } else {
                buf = _newbuf(b, net->t[id].bytes, _bt(net, li), tp);
                if (buf < 0)
                    return TORUS_FAIL(TENG_ENOMEM, "out of memory");
                if (*main < 0)
                    *main = buf;
            }
            slot[li * 2 + j] = buf;
            c[(*nc)++] = buf;
        }
    }
    return TENG_OK;
}

/* _plan_grads, phase 2: the buffer tensor t's grad is summed into, from
 * its nc contributions c (main: the first fresh one). */
static int _plan_sum(teng_net *net, _bufs *b, teng_tensor *t, int *c, int nc,
                     int main)
{
    int tp = _bt(net, t->producer);
    /* A residual with a fused ReLU runs its ReLU backward in place on
     * its output grad; if that grad is shared with another residual
     * input, copy it out first (grad_sum with one source). */
    int inplace =
        net->l[t->producer].kind == TENG_L_ADD && net->l[t->producer].relu;
    if (nc == 1 && !(inplace && main < 0)) {
        t->gbuf = c[0];
        return TENG_OK;
    }
    if (nc == 0) {
        /* The net's output: its grad is seeded by the caller after
         * forward, so it lives from the start of backward. */
        t->gbuf = _newbuf(b, t->bytes, net->nl, tp);
    } else if (main < 0) {
        t->gbuf = _newbuf(b, t->bytes, tp, tp);
    } else {
        /* Sum in place into the first fresh contribution. */
        t->gbuf = main;
        for (int k = 0; k < nc; k++)
            if (c[k] == main) {
                c[k] = c[0];
                c[0] = main;
            }
    }
    if (t->gbuf < 0)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    t->ncontrib = nc;
    return TENG_OK;
}

/* Assigns each gradient (tensor grads and per-consumer contributions) a
 * buffer with a lifetime in backward steps; see teng.h for the rules.
 * slot[l*2+j] receives the buffer layer l writes for its input j. */
static int _plan_grads(teng_net *net, _bufs *b, int *slot, int *contrib)
{
    for (int i = 0; i < 2 * net->nl; i++)
        slot[i] = -1;
    /* Descending ids: a residual's output buffer is known before its
     * inputs alias it. */
    for (int id = net->nt - 1; id >= 0; id--) {
        teng_tensor *t = &net->t[id];
        int nc = 0, main = -1, rc;
        t->ncontrib = 0;
        t->gbuf = -1;
        if (!t->needs_grad)
            continue;
        if ((rc = _plan_contribs(net, b, slot, id, &contrib[id * 4], &nc,
                                 &main)) ||
            (rc = _plan_sum(net, b, t, &contrib[id * 4], nc, main)))
            return rc;
    }
    return TENG_OK;
}

/* Which tensors of a layer its backward reads (bit j: in[j], bit 2: out);
 * the backend knows, and without an answer everything is kept. */
static unsigned _reads(const teng_net *net, int layer)
{
    const teng_backend_ops *ops = net->bk->ops;
    return ops->bwd_reads ? ops->bwd_reads(net->bk, net, layer) : 7u;
}

/* Activations and workspaces: a tensor lives from its producer's forward
 * to its last reader, forward or backward; a residual writes in place
 * over its first input when nothing else needs that input (as
 * torchvision's `out += identity`). Tensors nobody consumes are outputs
 * and live to the end. Appends one buffer per storage and per workspace;
 * store[t] is the buffer of tensor t, wsbuf[l] of layer l's workspace. */
static int _plan_acts(teng_net *net, _bufs *b, int *store, int *wsbuf)
{
    int end = 2 * net->nl - 1;
    for (int id = 0; id < net->nt; id++) {
        const teng_tensor *t = &net->t[id];
        const teng_layer *pl = &net->l[t->producer];
        int first = id == net->input ? 0 : t->producer, last = t->producer;
        if (t->nconsumers == 0 || net->no_reuse)
            last = end;
        for (int li = t->producer + 1; li < net->nl; li++) {
            const teng_layer *l = &net->l[li];
            for (int j = 0; j < l->nin; j++) {
                if (l->in[j] != id)
                    continue;
                last = li > last ? li : last;
                if ((_reads(net, li) >> j) & 1u)
                    last = _bt(net, li) > last ? _bt(net, li) : last;
            }
        }
        if ((_reads(net, t->producer) & 4u) && _bt(net, t->producer) > last)
            last = _bt(net, t->producer);
        if (pl->kind == TENG_L_ADD && !net->no_reuse) {
            const teng_tensor *a = &net->t[pl->in[0]];
            unsigned pr = _reads(net, a->producer);
            if (pl->in[0] != net->input && a->nconsumers == 1 &&
                (!(pr & 4u) || (pr & 8u)) && a->bytes >= t->bytes) {
                store[id] = store[pl->in[0]];
                if (b->iv[store[id]].last < last)
                    b->iv[store[id]].last = last;
                continue;
            }
        }
        if ((store[id] = _newbuf(b, t->bytes, first, last)) < 0)
            return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    }
    for (int i = 0; i < net->nl; i++) {
        /* A workspace the backend reads after the whole backward (the
         * device step's per-row losses) lives to the end of the step:
         * ending it at the layer's own backward would hand its memory to
         * gradients written later, under the reader. */
        teng_layer *l = &net->l[i];
        l->ws_late = (_reads(net, i) & TENG_READS_WS_LATE) != 0;
        wsbuf[i] = -1;
        if (l->ws_bytes &&
            (wsbuf[i] = _newbuf(b, l->ws_bytes, i,
                                l->ws_late ? end : _bt(net, i))) < 0)
            return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    }
    return TENG_OK;
}

static int _alloc(teng_net *net, void **p, size_t bytes, const char *what)
{
    *p = NULL;
    if (!bytes)
        return TENG_OK;
    *p = net->bk->ops->alloc(net->bk, bytes);
    if (!*p)
        return TORUS_FAIL(TENG_ENOMEM, "cannot allocate %zu bytes for %s",
                          bytes, what);
    net->alloc_bytes += bytes;
    return TENG_OK;
}

static int _alloc_grads(teng_net *net)
{
    if (!net->grads_alloc || !net->bk->ops->host_memory || !net->params_bytes)
        return _alloc(net, &net->grads, net->params_bytes, "grads");
    net->grads = net->grads_alloc(net->grads_alloc_ctx, net->params_bytes);
    if (!net->grads) /* the caller said why; the backend's memory works too */
        return _alloc(net, &net->grads, net->params_bytes, "grads");
    net->grads_external = 1;
    return TENG_OK;
}

static int _init_stats(teng_net *net)
{
    /* Running mean 0 and variance 1, as a fresh BN layer has. */
    for (int s = 0; s < net->nstats; s++) {
        int n = net->stat_len[s];
        float *v = malloc(sizeof(float) * (size_t)n);
        if (!v)
            return TORUS_FAIL(TENG_ENOMEM, "out of memory");
        for (int i = 0; i < n; i++)
            v[i] = (s % 2) ? 1.0f : 0.0f;
        int rc = teng_stats_write(net, s, v);
        free(v);
        if (rc)
            return rc;
    }
    return TENG_OK;
}

/* Bytes of param p's working copy in its own arena: none when it is the
 * master (fp32); else 2-byte elements in the master's layout. */
static size_t _work_bytes(const teng_param *p)
{
    return p->dtype == TENG_F32 ? 0 : p->bytes / sizeof(float) * 2;
}

/* The working-copies arena: laid out in param order from offset 0, so its
 * base is the first param's working copy that is not its master. */
static void *_work_arena(const teng_net *net)
{
    for (int i = 0; i < net->np; i++)
        if (net->p[i].dtype != TENG_F32)
            return net->p[i].work;
    return NULL;
}

/* Every param's working dtype is one the engine places, and a backend
 * that plans other than fp32 can refresh them (refresh_work). */
static int _check_dtypes(const teng_net *net, size_t *wbytes)
{
    *wbytes = 0;
    for (int i = 0; i < net->np; i++) {
        const teng_param *p = &net->p[i];
        if (p->dtype != TENG_F32 && p->dtype != TENG_F16 &&
            p->dtype != TENG_BF16)
            return TORUS_FAIL(TENG_EINVAL,
                              "param '%s': unknown working dtype "
                              "%d",
                              p->name, (int)p->dtype);
        if (p->dtype != TENG_F32 && !net->bk->ops->refresh_work)
            return TORUS_FAIL(TENG_EINVAL,
                              "param '%s': the backend planned a working copy "
                              "that is not fp32 but cannot refresh it "
                              "(no refresh_work)",
                              p->name);
        *wbytes += _teng_align(_work_bytes(p));
    }
    return TENG_OK;
}

/* Points every param at its master, working copy and gradient. Working
 * copies in another dtype than the master (f16/bf16, planned by a GPU
 * backend) get one arena of their own, param order, 64-byte aligned; the
 * backend fills them from the masters (refresh_work) when these are
 * written. */
static int _place_params(teng_net *net)
{
    size_t wbytes, off = 0;
    char *work = NULL;
    int rc = _check_dtypes(net, &wbytes);
    if (rc ||
        (rc = _alloc(net, (void **)&work, wbytes, "param working copies")))
        return rc;
    for (int i = 0; i < net->np; i++) {
        teng_param *p = &net->p[i];
        p->master = (float *)((char *)net->params + p->offset);
        p->work = p->master;
        if (p->dtype != TENG_F32) {
            p->work = work + off;
            off += _teng_align(_work_bytes(p));
        }
        p->grad = (float *)((char *)net->grads + p->offset);
    }
    net->host_sumsq = calloc((size_t)net->np + 1, sizeof(float));
    return net->host_sumsq ? TENG_OK : TORUS_FAIL(TENG_ENOMEM, "out of memory");
}

/* Params and grads: forward order, same offsets in both arenas; then the
 * size of the BN statistics arena. */
static void _layout_params(teng_net *net)
{
    size_t off = 0;
    for (int i = 0; i < net->np; i++) {
        net->p[i].offset = off;
        off += _teng_align(net->p[i].bytes);
    }
    net->params_bytes = off;
    net->stats_bytes =
        net->nstats
            ? net->stat_off[net->nstats - 1] +
                  _teng_align(sizeof(float) * net->stat_len[net->nstats - 1])
            : 0;
}

/* Every arena, once, and the host buffers the steps use. */
static int _alloc_arenas(teng_net *net)
{
    int rc;
    if ((rc = _alloc(net, &net->params, net->params_bytes, "params")) ||
        (rc = _alloc_grads(net)) ||
        (rc = _alloc(net, &net->stats, net->stats_bytes, "BN statistics")) ||
        (rc = _alloc(net, &net->acts, net->acts_bytes, "activations")) ||
        (rc = _alloc(net, &net->scratch, net->scratch_cap, "scratchpad")))
        return rc;
    net->host_labels = calloc((size_t)net->max_batch, sizeof(int32_t));
    if (net->loss_layer >= 0) {
        const teng_tensor *lt = &net->t[net->l[net->loss_layer].in[0]];
        net->host_logits = malloc(sizeof(float) * (size_t)net->max_batch *
                                  (size_t)lt->shape.c);
    }
    if (!net->host_labels || (net->loss_layer >= 0 && !net->host_logits))
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    return TENG_OK;
}

/* The activations plan's buffers (ids from _plan_acts and _plan_grads)
 * become pointers into the acts arena. */
typedef struct {
    _bufs b;
    int *slot, *contrib, *store, *wsbuf;
    size_t labels_off;
} _acts_plan;

static void _place_acts(teng_net *net, const _acts_plan *ap)
{
    char *a = net->acts;
    const teng_interval *iv = ap->b.iv;
    for (int i = 0; i < net->nt; i++) {
        teng_tensor *t = &net->t[i];
        t->data = a + iv[ap->store[i]].offset;
        t->grad = t->gbuf >= 0 ? a + iv[t->gbuf].offset : NULL;
        for (int k = 0; k < t->ncontrib; k++)
            t->contrib[k] = a + iv[ap->contrib[i * 4 + k]].offset;
    }
    for (int i = 0; i < net->nl; i++) {
        teng_layer *l = &net->l[i];
        l->ws = ap->wsbuf[i] >= 0 ? a + iv[ap->wsbuf[i]].offset : NULL;
        l->ws_buf = ap->wsbuf[i];
        for (int j = 0; j < 2; j++) {
            int s = ap->slot[i * 2 + j];
            l->in_grad[j] = s >= 0 ? a + iv[s].offset : NULL;
        }
    }
    net->labels = (int32_t *)(a + ap->labels_off);
}

/* Activations, workspaces and activation gradients share one arena,
 * placed by lifetime over the step (see _plan_acts, _plan_grads). */
static int _plan_acts_arena(teng_net *net, _acts_plan *ap)
{
    int rc;
    ap->slot = malloc(sizeof(int) * 2 * (size_t)net->nl);
    ap->contrib = malloc(sizeof(int) * 4 * (size_t)net->nt);
    ap->store = malloc(sizeof(int) * (size_t)net->nt);
    ap->wsbuf = malloc(sizeof(int) * (size_t)net->nl);
    if (!ap->slot || !ap->contrib || !ap->store || !ap->wsbuf)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    if ((rc = _plan_acts(net, &ap->b, ap->store, ap->wsbuf)) ||
        (rc = _plan_grads(net, &ap->b, ap->slot, ap->contrib)))
        return rc;
    ap->labels_off = teng_arena_plan(ap->b.iv, ap->b.n, TENG_ALIGN);
    net->acts_bytes =
        ap->labels_off + _teng_align(sizeof(int32_t) * net->max_batch);
    return TENG_OK;
}

int teng_net_compile(teng_net *net, teng_backend *bk, int max_batch)
{
    int rc;
    if (net->compiled)
        return TORUS_FAIL(TENG_ESTATE, "net already compiled");
    if (net->input < 0)
        return TORUS_FAIL(TENG_EINVAL, "net has no input");
    if (max_batch <= 0)
        return TORUS_FAIL(TENG_EINVAL, "batch %d must be > 0", max_batch);
    net->bk = bk;
    net->max_batch = max_batch;
    const char *poison = getenv("TENG_POISON");
    if (poison && !strcmp(poison, "1"))
        net->poison = 1;
    net->t[net->input].needs_grad = net->input_grad;
    if (!net->global_batch)
        net->global_batch = max_batch;
    _set_batch_shapes(net, max_batch);
    net->plans++;
    if ((rc = bk->ops->plan(bk, net, max_batch)))
        return torus_error_prefix(rc, "backend %s", bk->ops->name);
    for (int i = 0; i < net->nt; i++)
        net->t[i].cap = net->t[i].bytes;
    for (int i = 0; i < net->nl; i++)
        net->l[i].ws_cap = net->l[i].ws_bytes;
    _layout_params(net);
    _acts_plan ap = {0};
    if ((rc = _plan_acts_arena(net, &ap)))
        goto out;
    net->scratch_cap = net->scratch_bytes;
    if ((rc = _alloc_arenas(net)) || (rc = _place_params(net)))
        goto out;
    _place_acts(net, &ap);
    if ((rc = bk->ops->bind(bk, net))) {
        rc = torus_error_prefix(rc, "backend %s", bk->ops->name);
        goto out;
    }
    net->compiled = 1;
    net->acts_iv = ap.b.iv; /* the net keeps its plan (graph.h) */
    net->acts_niv = ap.b.n;
    ap.b.iv = NULL;
    rc = _init_stats(net);
out:
    free(ap.b.iv);
    free(ap.slot);
    free(ap.contrib);
    free(ap.store);
    free(ap.wsbuf);
    return rc;
}

int teng_net_set_batch(teng_net *net, int batch)
{
    int rc;
    if (!net->compiled)
        return TORUS_FAIL(TENG_ESTATE, "set_batch before compile");
    if (batch <= 0 || batch > net->max_batch)
        return TORUS_FAIL(TENG_EINVAL,
                          "batch %d is outside 1..%d (the compiled maximum)",
                          batch, net->max_batch);
    if (batch == net->batch)
        return TENG_OK;
    teng_backend *bk = net->bk;
    /* The device step's state lives in the plan: through the host. */
    teng_dstep_state ds;
    if (net->dstep_on && (rc = teng_net_dstep_read(net, &ds, 0)))
        return rc;
    bk->ops->release(bk, net);
    net->loss_scale_dev = NULL;
    _set_batch_shapes(net, batch);
    net->plans++; /* step graphs of the old plan are stale */
    if ((rc = bk->ops->plan(bk, net, batch)))
        return torus_error_prefix(rc, "backend %s", bk->ops->name);
    for (int i = 0; i < net->nt; i++)
        if (net->t[i].bytes > net->t[i].cap)
            return TORUS_FAIL(TENG_EINVAL,
                              "batch %d needs more memory for tensor %d than "
                              "the compiled batch %d",
                              batch, i, net->max_batch);
    for (int i = 0; i < net->nl; i++)
        if (net->l[i].ws_bytes > net->l[i].ws_cap)
            return TORUS_FAIL(TENG_EINVAL,
                              "batch %d needs more workspace in layer '%s' "
                              "than the compiled batch %d",
                              batch, net->l[i].name, net->max_batch);
    if (net->scratch_bytes > net->scratch_cap) {
        /* A batch change is a schedule event, not a step: growing the
         * scratchpad here keeps the per-step path allocation-free. */
        bk->ops->free(bk, net->scratch);
        net->alloc_bytes -= net->scratch ? net->scratch_cap : 0;
        net->scratch_cap = net->scratch_bytes;
        if ((rc = _alloc(net, &net->scratch, net->scratch_cap, "scratchpad")))
            return rc;
    }
    if ((rc = bk->ops->bind(bk, net)))
        return torus_error_prefix(rc, "backend %s", bk->ops->name);
    if (net->dstep_on &&
        (rc = teng_net_dstep_open(net, net->dstep_h, &net->dstep_c, &ds)))
        return rc;
    return TENG_OK;
}

void teng_net_free(teng_net *net)
{
    teng_backend *bk = net->bk;
    if (bk && net->bkstate) /* also after a compile that failed midway */
        bk->ops->release(bk, net);
    if (bk) {
        void *arenas[] = {net->params,  net->grads_external ? NULL : net->grads,
                          net->stats,   net->acts,
                          net->scratch, _work_arena(net)};
        for (size_t i = 0; i < sizeof(arenas) / sizeof(arenas[0]); i++)
            if (arenas[i])
                bk->ops->free(bk, arenas[i]);
    }
    free(net->bkfixed);
    free(net->dstep_h);
    free(net->acts_iv);
    free(net->poison_src);
    free(net->t);
    free(net->l);
    free(net->p);
    free(net->stat_off);
    free(net->stat_len);
    free(net->host_labels);
    free(net->host_logits);
    free(net->host_sumsq);
    free(net->in_px[0]);
    free(net->in_px[1]);
    free(net->in_f32);
    memset(net, 0, sizeof(*net));
}
