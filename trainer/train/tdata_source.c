/* tdata_source.c: training batches and test-set evaluation from a
 * torus-pack dataset through libtdata (see ttrain_tdata_source.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "data/tdata.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_tdata_source.h"
#include "trainer/train/ttrain_test_hooks.h"

typedef struct {
    tdata_dataset *train, *test;
    tdata_loader *loader; /* training stream at batch `batch` */
    int batch, gbatch; /* local and global batch of the stream */
    long epoch, step; /* position of the next batch the loader hands out */
    int rank, world, size;
    uint64_t seed;
    teng_backend *u8; /* 8-bit training batches in its host memory */
    int decode;       /* decode threads of the training stream (>= 1) */
} _tsrc;

static void *_host_alloc(size_t bytes, void *bk)
{
    return teng_backend_host_alloc(bk, bytes);
}

static void _host_free(void *ptr, void *bk)
{
    teng_backend_host_free(bk, ptr);
}

/* Loader options shared by both splits: torus-train's (libtdata's
 * tdata_loader_opts_trainer: NCHW f32 normalised, a mild crop, one I/O and
 * one decode thread, since the 2 cores belong to the compute threads). */
static void _opts(const _tsrc *p, tdata_loader_opts *o, int mode, int batch)
{
    tdata_loader_opts_trainer(o, mode, batch, p->size);
    o->rank = p->rank;
    o->world = p->world;
    o->seed = p->seed;
    if (mode == TDATA_TRAIN) /* the order that survives a resize */
        o->global_batch = p->gbatch;
    if (mode == TDATA_TRAIN && p->decode > 1)
        o->decode_threads = p->decode;
    if (p->u8 && mode == TDATA_TRAIN) {
        /* The backend normalises and mirrors (its copy is 4x smaller). */
        o->order = TDATA_NHWC;
        o->dtype = TDATA_U8;
        o->defer_flip = 1;
        o->alloc = _host_alloc;
        o->free = _host_free;
        o->alloc_ctx = p->u8;
    }
}

static int _restart(ttrain_source *s, int epoch, long step, int n)
{
    _tsrc *p = s->impl;
    tdata_loader_opts o;
    if (p->loader)
        tdata_loader_destroy(p->loader);
    p->loader = NULL;
    p->gbatch = s->global_batch;
    _opts(p, &o, TDATA_TRAIN, n);
    if (tdata_loader_create(p->train, &o, &p->loader) ||
        tdata_loader_start(p->loader, (uint64_t)epoch,
                           (uint64_t)step * (uint64_t)n))
        return torus_error_prefix(-1, "rank %d", p->rank);
    p->batch = n;
    p->epoch = epoch;
    p->step = step;
    return 0;
}

static int _start(ttrain_source *s, int epoch, long step, int n)
{
    _tsrc *p = s->impl;
    /* The loader rolls over into the next epoch by itself; only a new
     * batch size or a jump (resume) needs a fresh stream. */
    if (p->loader && p->batch == n && p->gbatch == s->global_batch &&
        p->epoch == epoch && p->step == step)
        return 0;
    return _restart(s, epoch, step, n);
}

static int _next(ttrain_source *s, int n, ttrain_batch *out)
{
    _tsrc *p = s->impl;
    if ((!p->loader || n != p->batch || p->gbatch != s->global_batch) &&
        _restart(s, (int)p->epoch, p->step, n))
        return -1;
    int err = 0;
    const tdata_batch *b = tdata_loader_next(p->loader, &err);
    if (!b)
        return torus_error_prefix(-1, "rank %d", p->rank);
    ttrain_test_served(p->rank, b->epoch, b->step, b->ids, b->n);
    *out = (ttrain_batch){.y = b->labels, .n = b->n, .wait_s = b->wait_s};
    if (p->u8) {
        out->px = b->data;
        out->flips = b->flips;
        tdata_loader_norm(p->loader, out->scale, out->bias);
    } else {
        out->x = b->data;
    }
    s->samples += (uint64_t)p->gbatch;
    p->step++;
    if ((uint64_t)p->step == tdata_loader_steps_per_epoch(p->loader)) {
        p->step = 0;
        p->epoch++;
    }
    return 0;
}

void ttrain_tdata_use_u8(ttrain_source *s, teng_backend *bk)
{
    _tsrc *p = s->impl;
    p->u8 = bk;
    if (p->loader) /* made for float batches: the next start remakes it */
        tdata_loader_destroy(p->loader);
    p->loader = NULL;
}

void ttrain_tdata_set_decode_threads(ttrain_source *s, int n)
{
    _tsrc *p = s->impl;
    p->decode = n < 1 ? 1 : n;
    if (p->loader)
        tdata_loader_destroy(p->loader);
    p->loader = NULL;
}

static void _close(ttrain_source *s)
{
    _tsrc *p = s->impl;
    if (p) {
        if (p->loader)
            tdata_loader_destroy(p->loader);
        if (p->train)
            tdata_dataset_close(p->train);
        if (p->test)
            tdata_dataset_close(p->test);
    }
    free(p);
    s->impl = NULL;
}

static int _open_split(const char *dir, const char *split, tdata_dataset **ds)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s-index.txt", dir, split);
    int rc = tdata_dataset_open(path, ds);
    return rc ? torus_error_prefix(-1, "%s", path) : 0;
}

int ttrain_tdata_open(ttrain_source *s, const char *dir, const tmodel_spec *m,
                      int rank, int world, uint64_t seed, long *train_size)
{
    memset(s, 0, sizeof(*s));
    _tsrc *p = calloc(1, sizeof(*p));
    if (!p)
        return TORUS_FAIL(TTRAIN_ENOMEM, "out of memory");
    s->impl = p;
    s->next = _next;
    s->seek = ttrain_source_seek_counter;
    s->start = _start;
    s->close = _close;
    p->rank = rank;
    p->world = world;
    p->seed = seed;
    p->size = m->image_size;
    if (_open_split(dir, "train", &p->train) ||
        _open_split(dir, "test", &p->test))
        goto fail;
    const tdata_dataset_info *tr = tdata_dataset_get_info(p->train),
                             *te = tdata_dataset_get_info(p->test);
    if (tr->channels != m->in_channels && tr->layout == TDATA_LAYOUT_DENSE) {
        TORUS_FAIL(TTRAIN_EDATA,
                   "%s: images have %d channels, the model takes %d "
                   "(--channels)",
                   dir, tr->channels, m->in_channels);
        goto fail;
    }
    if (tr->num_classes > m->classes || te->num_classes > m->classes) {
        TORUS_FAIL(TTRAIN_EDATA, "%s: %d classes, the model has %d (--classes)",
                   dir, tr->num_classes, m->classes);
        goto fail;
    }
    *train_size = (long)tr->num_images;
    return 0;
fail:
    _close(s);
    return -1;
}

int ttrain_tdata_eval(ttrain_source *s, teng_net *net, int batch,
                      double counts[4])
{
    _tsrc *p = s->impl;
    tdata_loader_opts o;
    tdata_loader *l = NULL;
    int keep = teng_net_batch(net), rc = -1, err = 0, cur = keep;
    _opts(p, &o, TDATA_EVAL, batch);
    o.drop_remainder = 0;
    if (tdata_loader_create(p->test, &o, &l) || tdata_loader_start(l, 0, 0)) {
        torus_error_prefix(-1, "rank %d: test split", p->rank);
        goto out;
    }
    const tdata_batch *b;
    while ((b = tdata_loader_next(l, &err))) {
        int top1 = 0, top5 = 0;
        if (b->n != cur && teng_net_set_batch(net, cur = b->n))
            goto engine;
        if (teng_net_set_input(net, b->data) ||
            teng_net_set_labels(net, b->labels) || teng_net_forward(net, 0) ||
            teng_net_topk(net, &top1, &top5))
            goto engine;
        counts[0] += top1;
        counts[1] += top5;
        counts[2] += b->n;
        counts[3] += teng_net_loss(net) * b->n;
    }
    if (err) {
        torus_error_prefix(-1, "rank %d: test split", p->rank);
        goto out;
    }
    rc = 0;
    goto out;
engine:
    torus_error_prefix(-1, "evaluation");
out:
    if (cur != keep && teng_net_set_batch(net, keep) && rc == 0)
        rc = torus_error_prefix(-1, "evaluation");
    if (l)
        tdata_loader_destroy(l);
    return rc;
}
