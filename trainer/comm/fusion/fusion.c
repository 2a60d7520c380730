/* fusion/fusion.c: tensor fusion buckets and the communication thread (see
 * tcomm_fusion.h for the contract).
 *
 * The caller's thread only counts: ready() decrements its bucket's pending
 * count (the bucket plan, plan.h, shared with the device fusion) and wakes
 * the communication thread. That thread takes buckets
 * strictly in index order (MPI collectives must be issued in the same
 * order on every rank, and the order fixes the bits of the result), packs
 * the bucket's gradients as one vector (tcomm_allreduce_segs: straight
 * through shared memory where the row shares a node, in place where the
 * gradients themselves are shared, else packed). Which of these, with
 * which algorithm and wire, is each bucket's route, resolved when the
 * buckets are cut (_route, at seal and set_theta): the thread follows
 * it and never asks the cost model. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/torus_error.h"
#include "trainer/comm/algo/algo.h"
#include "trainer/comm/fusion/plan.h"
#include "trainer/comm/fusion/theta.h"
#include "trainer/comm/tcomm_fusion.h"

typedef struct {
    float *grad;
    size_t count;
    char name[48];
} tc_tensor;

struct tcomm_fusion {
    tcomm_t *c;
    tcomm_fusion_options o;
    tc_tensor *t;
    int nt, cap;
    tc_plan plan; /* buckets, ready counts, launch order */
    int sealed;
    int shared;      /* gradients in shared memory on every rank */
    tcomm_seg *segs; /* every tensor as a piece, in bucket order */
    /* Shared with the thread, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int thread_up, quit;
    int done; /* buckets reduced this step */
    int step_active;
    tcomm_rc err;
    char errmsg[1024];
    tcomm_fusion_stats st;
    char theta_why[1280]; /* TCOMM_FUSION_AUTO: what was chosen and why */
    char wire_why[256];   /* hybrid on one node: the wire it picked */
};

tcomm_rc tcomm_fusion_create(tcomm_t *c, const tcomm_fusion_options *o,
                             tcomm_fusion_t **out)
{
    tcomm_fusion_t *f = calloc(1, sizeof *f);
    if (!f)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for fusion");
    f->c = c;
    f->o = *o;
    if (!f->o.bucket_bytes)
        f->o.bucket_bytes = TCOMM_FUSION_DEFAULT_BYTES;
    if ((unsigned)f->o.algo >= TCOMM_ALGO_COUNT ||
        (unsigned)f->o.wire >= TCOMM_WIRE_COUNT) {
        free(f);
        return TORUS_FAIL(TCOMM_ERR_ARG, "fusion: bad algorithm %d or wire %d",
                          (int)o->algo, (int)o->wire);
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    *out = f;
    return TCOMM_OK;
}

tcomm_rc tcomm_fusion_add(tcomm_fusion_t *f, float *grad, size_t count,
                          const char *name, int *index)
{
    if (f->sealed)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "fusion: gradient '%s' added after seal",
                          name ? name : "?");
    if (!grad && count)
        return TORUS_FAIL(TCOMM_ERR_ARG, "fusion: gradient '%s' has no buffer",
                          name ? name : "?");
    if (f->nt == f->cap) {
        int cap = f->cap ? 2 * f->cap : 64;
        tc_tensor *t = realloc(f->t, sizeof *t * (size_t)cap);
        if (!t)
            return TORUS_FAIL(TCOMM_ERR_NOMEM,
                              "fusion: no memory for %d tensors", cap);
        f->t = t;
        f->cap = cap;
    }
    tc_tensor *t = &f->t[f->nt];
    memset(t, 0, sizeof *t);
    t->grad = grad;
    t->count = count;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    tcomm_rc rc = tc_plan_add(&f->plan, grad, count);
    if (rc)
        return rc;
    if (index)
        *index = f->nt;
    f->nt++;
    return TCOMM_OK;
}

/* FNV-1a over the layout: tensor sizes, bucket cuts and the settings that
 * change what goes on the wire. Names are left out: they may legitimately
 * differ (rank-local prefixes), sizes and order may not. */
static uint64_t _layout_hash(const tcomm_fusion_t *f)
{
    uint64_t h = 1469598103934665603ull;
    uint64_t v[4] = {(uint64_t)f->nt, (uint64_t)f->plan.nb, (uint64_t)f->o.algo,
                     (uint64_t)f->o.wire | (uint64_t)f->o.flags << 8};
#define MIX(x)                                                     \
    do {                                                           \
        uint64_t _x = (x);                                         \
        for (int _k = 0; _k < 8; _k++)                             \
            h = (h ^ ((_x >> (8 * _k)) & 255)) * 1099511628211ull; \
    } while (0)
    for (int i = 0; i < 4; i++)
        MIX(v[i]);
    for (int i = 0; i < f->nt; i++)
        MIX(f->t[i].count);
    for (int i = 0; i < f->plan.nb; i++)
        MIX((uint64_t)f->plan.b[i].first);
#undef MIX
    return h;
}

/* Whether every gradient lies in this rank's tcomm_shared_alloc block, and
 * a hash of their offsets in it (0 when not). */
static uint64_t _shared_hash(const tcomm_fusion_t *f)
{
    uint64_t h = 1469598103934665603ull;
    if (!tc_shared_holds(f->c, NULL,
                         0)) /* no shared block: none, or plain memory */
        return 0;
    for (int i = 0; i < f->nt; i++) {
        if (!tc_shared_holds(f->c, f->t[i].grad, f->t[i].count))
            return 0;
        h = (h ^ (uint64_t)((unsigned char *)f->t[i].grad - f->c->arena.mine)) *
            1099511628211ull;
    }
    return h ? h : 1;
}

/* Every rank compares its layout with rank 0's and all fail alike. The
 * same gather tells whether all ranks' gradients lie in shared memory at
 * the same offsets: then the buckets are reduced in place. */
static tcomm_rc _check_layout(tcomm_fusion_t *f)
{
    tcomm_t *c = f->c;
    if (c->singleton || c->info.size == 1)
        return TCOMM_OK;
    enum { K = 4 };
    uint64_t mine[K] = {_layout_hash(f), (uint64_t)f->nt, (uint64_t)f->plan.nb,
                        _shared_hash(f)};
    uint64_t *all = malloc(sizeof mine * (size_t)c->info.size);
    if (!all)
        TORUS_FAIL(TCOMM_ERR_NOMEM, "fusion: no memory for the layout check");
    /* Agree first: a rank without the memory must not skip the gather the
     * others wait in. Both with the collectives' deadline. */
    tcomm_rc rc = tc_agree(c, &c->world, all != NULL,
                           "allocate the fusion layout check", TCOMM_ERR_NOMEM);
    MPI_Request r = MPI_REQUEST_NULL;
    if (!rc)
        rc = tc_coll_start(c, &c->world,
                           MPI_Iallgather(mine, K, MPI_UINT64_T, all, K,
                                          MPI_UINT64_T, c->world.comm, &r),
                           &r, "fusion layout check");
    if (rc) {
        free(all);
        return rc;
    }
    f->shared = all[3] != 0;
    for (int r = 1; r < c->info.size; r++)
        if (all[K * r + 3] != all[3])
            f->shared = 0;
    for (int r = 1; r < c->info.size; r++)
        if (all[K * r] != all[0]) {
            rc = TORUS_FAIL(
                TCOMM_ERR_LAYOUT,
                "fusion: rank %d's bucket layout (%llu "
                "tensors, %llu buckets) differs from rank 0's (%llu tensors, "
                "%llu buckets): every rank must register the same gradients, "
                "in the same order, with the same bucket size, algorithm and "
                "wire",
                r, (unsigned long long)all[K * r + 1],
                (unsigned long long)all[K * r + 2], (unsigned long long)all[1],
                (unsigned long long)all[2]);
            break;
        }
    free(all);
    return rc;
}

static unsigned _flags(const tcomm_fusion_t *f)
{
    return f->o.flags | (f->shared ? TCOMM_SHARED : 0);
}

static tcomm_rc _reduce_bucket(tcomm_fusion_t *f, int bi)
{
    const tc_pbucket *b = &f->plan.b[bi];
    tcomm_result r = {0};
    double t0 = tcomm_wtime();
    tcomm_rc rc = tc_segs_run(f->c, f->segs + b->first, b->n, b->count,
                              &b->route, _flags(f), &r);
    if (rc)
        return rc;
    f->st.nonfinite += r.nonfinite;
    f->st.buckets++;
    f->st.in_place += r.in_place != 0;
    double t1 = tcomm_wtime();
    f->st.comm_s += t1 - t0;
    if (f->o.on_bucket)
        f->o.on_bucket(f->o.on_bucket_ctx,
                       &(tcomm_fusion_span){bi, b->n, b->count, r.algo_used,
                                            r.wire_used, r.in_place != 0, t0,
                                            t1, b->route.predict_s});
    return TCOMM_OK;
}

static void *_thread(void *arg)
{
    tcomm_fusion_t *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        int bi = -1;
        while (!f->quit &&
               !(f->step_active && (bi = tc_plan_next(&f->plan)) >= 0))
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->quit)
            break;
        pthread_mutex_unlock(&f->mu);
        tcomm_rc rc = f->err ? f->err : _reduce_bucket(f, bi);
        pthread_mutex_lock(&f->mu);
        if (rc && !f->err) {
            f->err = rc;
            snprintf(f->errmsg, sizeof f->errmsg, "%s", torus_error_msg());
        }
        f->done++;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* Every bucket's route (the plan, fusion/plan.h), and what the banner
 * says of hybrid's wire on one node, from those routes. */
static void _route(tcomm_fusion_t *f)
{
    tc_plan_route(&f->plan, f->c, f->o.algo, f->o.wire, _flags(f),
                  TC_ROUTE_SEGS);
    f->wire_why[0] = 0;
    if (f->o.algo != TCOMM_ALGO_HYBRID || f->o.wire == TCOMM_WIRE_FP32 ||
        f->c->info.nnodes != 1 || f->c->info.size < 2)
        return;
    int n32 = 0;
    for (int b = 0; b < f->plan.nb; b++)
        n32 += f->plan.b[b].route.wire == TCOMM_WIRE_FP32;
    snprintf(f->wire_why, sizeof f->wire_why,
             "%d of %d buckets on fp32, %d on %s: on one node the cost "
             "model prices the %s wire's casts (%.2f GB/s) against the "
             "bytes it saves (node link %.2f GB/s, memory %.2f GB/s)",
             n32, f->plan.nb, f->plan.nb - n32, tcomm_wire_name(f->o.wire),
             tcomm_wire_name(f->o.wire), f->c->model.convert_Bps / 1e9,
             f->c->model.link[TORUS_LINK_NODE].bw_Bps / 1e9,
             f->c->model.reduce_Bps / 1e9);
}

/* TCOMM_FUSION_AUTO at seal. The layout is checked (and f->shared found)
 * at the default size first, on every path, so that ranks whose tensors
 * differ fail alike before any of them probes. Where every size cuts the
 * same buckets nothing is probed or timed (the default is kept: it cuts
 * them too); else the links are probed, the trial keeps a size, and the
 * layout is checked again at it. */
static tcomm_rc _theta_auto(tcomm_fusion_t *f)
{
    int same = 0;
    tcomm_rc rc = tc_theta_uniform(&f->plan, &same);
    if (!rc)
        rc = tc_plan_cut(&f->plan, TCOMM_FUSION_DEFAULT_BYTES);
    if (!rc)
        rc = _check_layout(f);
    if (!rc && same) {
        size_t total = 0;
        for (int i = 0; i < f->nt; i++)
            total += f->t[i].count;
        f->o.bucket_bytes = TCOMM_FUSION_DEFAULT_BYTES;
        snprintf(f->theta_why, sizeof f->theta_why,
                 "%zu KiB, %d buckets: every power of two from %zu to %zu "
                 "KiB cuts these %zu KiB of gradients into the same "
                 "buckets, so nothing was probed or timed",
                 f->o.bucket_bytes >> 10, f->plan.nb, TC_THETA_MIN >> 10,
                 TC_THETA_MAX >> 10, total * sizeof(float) >> 10);
        return TCOMM_OK;
    }
    if (!rc)
        rc = tcomm_probe_links(f->c);
    if (!rc)
        rc = tc_fusion_theta(f->c, &f->plan, f->segs, f->o.algo, f->o.wire,
                             _flags(f), &f->o.bucket_bytes, f->theta_why,
                             sizeof f->theta_why);
    return rc ? rc : _check_layout(f);
}

tcomm_rc tcomm_fusion_seal(tcomm_fusion_t *f)
{
    if (f->sealed)
        return TCOMM_OK;
    f->segs = calloc((size_t)(f->nt ? f->nt : 1), sizeof *f->segs);
    if (!f->segs)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "fusion: no memory for %d tensors",
                          f->nt);
    for (int i = 0; i < f->nt; i++)
        f->segs[i] = (tcomm_seg){f->t[i].grad, f->t[i].count};
    tcomm_rc rc;
    if (f->o.bucket_bytes == TCOMM_FUSION_AUTO)
        rc = _theta_auto(f);
    else if (!(rc = tc_plan_cut(&f->plan, f->o.bucket_bytes)))
        rc = _check_layout(f);
    if (rc)
        return rc;
    _route(f);
    if (!f->o.synchronous) {
        if (pthread_create(&f->thread, NULL, _thread, f) != 0)
            return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                              "fusion: cannot start the communication thread");
        f->thread_up = 1;
    }
    f->sealed = 1;
    return TCOMM_OK;
}

tcomm_rc tcomm_fusion_set_theta(tcomm_fusion_t *f, size_t bytes)
{
    if (!f->sealed || !bytes || bytes == TCOMM_FUSION_AUTO)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "fusion: set_theta(%zu bytes)%s: a size, after seal",
                          bytes, f->sealed ? "" : " before seal");
    pthread_mutex_lock(&f->mu);
    int active = f->step_active;
    /* The thread reads the plan only in a step (under mu): it waits now. */
    tcomm_rc rc = active ? TCOMM_ERR_ARG : tc_plan_cut(&f->plan, bytes);
    pthread_mutex_unlock(&f->mu);
    if (active)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "fusion: set_theta during a step (after a ready, "
                          "before finish)");
    if (!rc)
        rc = _check_layout(f);
    if (rc)
        return rc;
    f->o.bucket_bytes = bytes;
    _route(f);
    return TCOMM_OK;
}

size_t tcomm_fusion_bucket_count(const tcomm_fusion_t *f)
{
    return (size_t)f->plan.nb;
}

size_t tcomm_fusion_theta(const tcomm_fusion_t *f)
{
    return f->o.bucket_bytes;
}

const char *tcomm_fusion_theta_why(const tcomm_fusion_t *f)
{
    return f->theta_why;
}

int tcomm_fusion_plan_text(const tcomm_fusion_t *f, char *buf, size_t n)
{
    if (!f->sealed) {
        if (n)
            buf[0] = 0;
        return 0;
    }
    return tc_plan_text(&f->plan, buf, n);
}

const char *tcomm_fusion_wire_why(const tcomm_fusion_t *f)
{
    return f->wire_why;
}

int tcomm_fusion_shared(const tcomm_fusion_t *f)
{
    return f->shared;
}

tcomm_rc tcomm_fusion_bucket(const tcomm_fusion_t *f, size_t b, int *first,
                             int *ntensors, size_t *count)
{
    if (!f->sealed || b >= (size_t)f->plan.nb)
        return TORUS_FAIL(TCOMM_ERR_ARG, "fusion: no bucket %zu (%d buckets%s)",
                          b, f->plan.nb, f->sealed ? "" : ", not sealed");
    *first = f->plan.b[b].first;
    *ntensors = f->plan.b[b].n;
    *count = f->plan.b[b].count;
    return TCOMM_OK;
}

/* Synchronous mode: reduce every complete bucket at the head, in order. */
static tcomm_rc _drain_sync(tcomm_fusion_t *f)
{
    for (int bi; (bi = tc_plan_next(&f->plan)) >= 0;) {
        tcomm_rc rc = _reduce_bucket(f, bi);
        if (rc)
            return rc;
        f->done++;
    }
    return TCOMM_OK;
}

tcomm_rc tcomm_fusion_ready(tcomm_fusion_t *f, int index)
{
    if (!f->sealed || index < 0 || index >= f->nt)
        return TORUS_FAIL(TCOMM_ERR_ARG, "fusion: ready(%d) with %d tensors%s",
                          index, f->nt, f->sealed ? "" : " before seal");
    pthread_mutex_lock(&f->mu);
    int twice = f->plan.ready[index];
    if (!twice) {
        tc_plan_ready(&f->plan, index);
        f->step_active = 1;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    if (twice)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "fusion: gradient %d ('%s') marked ready twice "
                          "in one step",
                          index, f->t[index].name);
    return f->o.synchronous ? _drain_sync(f) : TCOMM_OK;
}

int tcomm_fusion_wait(tcomm_fusion_t *f, int n)
{
    pthread_mutex_lock(&f->mu);
    if (n > f->plan.nb)
        n = f->plan.nb;
    while (f->thread_up && !f->quit && f->done < n)
        pthread_cond_wait(&f->cv, &f->mu);
    int done = f->done;
    pthread_mutex_unlock(&f->mu);
    return done;
}

tcomm_rc tcomm_fusion_finish(tcomm_fusion_t *f, tcomm_fusion_stats *st)
{
    if (!f->sealed)
        return TORUS_FAIL(TCOMM_ERR_ARG, "fusion: finish before seal");
    double t0 = tcomm_wtime();
    tcomm_rc rc = TCOMM_OK;
    pthread_mutex_lock(&f->mu);
    /* Backward is over: whatever was not marked (unused parameters) goes
     * now, so every rank reduces every bucket. */
    tc_plan_flush(&f->plan);
    f->step_active = 1;
    pthread_cond_broadcast(&f->cv);
    if (f->thread_up)
        while (f->done < f->plan.nb)
            pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
    if (!f->thread_up)
        rc = _drain_sync(f);
    pthread_mutex_lock(&f->mu);
    if (!rc && f->err) {
        rc = TORUS_FAIL(f->err, "fusion: %s", f->errmsg);
    }
    f->st.wait_s = tcomm_wtime() - t0;
    if (st)
        *st = f->st;
    /* Reset for the next step. */
    memset(&f->st, 0, sizeof f->st);
    tc_plan_reset(&f->plan);
    f->done = 0;
    f->step_active = 0;
    f->err = TCOMM_OK;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

void tcomm_fusion_destroy(tcomm_fusion_t *f)
{
    if (!f)
        return;
    if (f->thread_up) {
        pthread_mutex_lock(&f->mu);
        f->quit = 1;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->thread, NULL);
    }
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f->segs);
    tc_plan_free(&f->plan);
    free(f->t);
    free(f);
}
