/* algo/hier.c: Tencent's hierarchical all-reduce: reduce inside each group
 * (a node, or the TORUS_GROUP / --group-size group) to its leader, ring
 * all-reduce among the leaders, broadcast back inside the group. Only the
 * leaders use the slow links, which suits groups much faster inside than
 * between. The reduce is a reduce-scatter plus a gather to the leader, and
 * the broadcast a scatter plus an all-gather, so the in-group traffic stays
 * bandwidth-optimal for large buckets. A group on one node does all of it
 * in its shared segments, with no message at all: the gather is each
 * member's chunk sum written where the leader reads it, the broadcast the
 * leader's result written once for all members to read. Groups on one
 * node run large messages in pieces (pipeline.c): the leaders' ring of one
 * piece overlaps the in-group stages of the others. */
#include "trainer/comm/algo/algo.h"
#include "trainer/comm/core/wire.h"

typedef struct {
    tc_group *g;
    float *x;
    size_t count;
    tcomm_wire w;
    int K;
    unsigned char *
        all; /* the message in wire format for gather/scatter; NULL on a node */
    tc_fold *f;
} _hier;

/* The gather through shared memory. After the reduce-scatter nobody
 * reads the part of a member's segment that holds its own chunk (members
 * sum their own chunk from their fp32 values), so each writes its chunk's
 * sum there; after a barrier the leader decodes every chunk, its own
 * included, so that all of x is rounded to the wire alike. */
static tcomm_rc _gather_shm(tcomm_t *c, tc_group *g, float *x, size_t count,
                            tcomm_wire w, size_t at)
{
    int n = g->size, me = g->rank;
    size_t wb = tcomm_wire_bytes(w);
    size_t o = tc_chunk_off(count, n, me), l = tc_chunk_len(count, n, me);
    tc_encode(w, x + o, g->shm.seg[me] + (at + o) * wb, l);
    tcomm_rc rc = tc_shm_sync(c, g);
    if (rc || me != 0)
        return rc;
    for (int j = 0; j < n; j++) {
        size_t oj = tc_chunk_off(count, n, j);
        tc_decode(w, g->shm.seg[j] + (at + oj) * wb, x + oj,
                  tc_chunk_len(count, n, j));
    }
    return TCOMM_OK;
}

/* Reduce x[0..count) (at elements into the message) to the leader: after
 * it, the leader's x holds the group's sum, rounded to the wire. On a
 * node the pre-scale folds into the cast (tc_fold); elsewhere it is done. */
static tcomm_rc _reduce(tcomm_t *c, tc_group *g, float *x, size_t count,
                        tcomm_wire w, unsigned char *all, size_t at,
                        float scale)
{
    int n = g->size, me = g->rank;
    size_t wb = tcomm_wire_bytes(w);
    tcomm_rc rc = g->on_node
                      ? tc_shm_reduce_scatter_at(c, g, x, count, w, at, scale)
                      : tc_ring_reduce_scatter(c, &c->scr, g, x, count, w);
    if (rc)
        return rc;
    if (g->on_node)
        return _gather_shm(c, g, x, count, w, at);
    size_t o = tc_chunk_off(count, n, me), l = tc_chunk_len(count, n, me);
    tc_encode(w, x + o, all + o * wb, l);
    if (me != 0)
        return tc_send(c, g, all + o * wb, l * wb, 0);
    for (int j = 1; j < n; j++)
        if ((rc = tc_recv(c, g, all + tc_chunk_off(count, n, j) * wb,
                          tc_chunk_len(count, n, j) * wb, j)))
            return rc;
    tc_decode(w, all, x, count);
    return TCOMM_OK;
}

/* Broadcast the leader's (already wire-exact) x: scatter, then all-gather;
 * on one node the leader writes it to its segment once and every member
 * reads all of it (the barrier after the gather has ended every read of
 * the leader's segment there), counting inf/nan into *bad on the way
 * (tc_fold; NULL: none, and always none off a node). */
static tcomm_rc _bcast(tcomm_t *c, tc_group *g, float *x, size_t count,
                       tcomm_wire w, unsigned char *all, size_t at, size_t *bad)
{
    int n = g->size, me = g->rank;
    size_t wb = tcomm_wire_bytes(w);
    size_t o = tc_chunk_off(count, n, me), l = tc_chunk_len(count, n, me);
    tcomm_rc rc;
    if (g->on_node) {
        unsigned char *src = g->shm.seg[0] + at * wb;
        if (me == 0 && bad)
            *bad += tc_encode_count(w, x, src, count);
        else if (me == 0)
            tc_encode(w, x, src, count);
        if ((rc = tc_shm_sync(c, g)))
            return rc;
        if (me != 0 && bad)
            *bad += tc_decode_count(w, src, x, count);
        else if (me != 0)
            tc_decode(w, src, x, count);
        /* Nobody may overwrite the leader's segment until all have read it. */
        return tc_shm_sync(c, g);
    }
    if (me == 0) {
        tc_encode(w, x, all, count);
        for (int j = 1; j < n; j++)
            if ((rc = tc_send(c, g, all + tc_chunk_off(count, n, j) * wb,
                              tc_chunk_len(count, n, j) * wb, j)))
                return rc;
    } else {
        if ((rc = tc_recv(c, g, all + o * wb, l * wb, 0)))
            return rc;
        tc_decode(w, all + o * wb, x + o, l);
    }
    return tc_ring_allgather(c, &c->scr, g, x, count, w);
}

/* Where piece element o sits in the wire buffer (groups that message). */
static unsigned char *_all_at(const _hier *h, size_t o)
{
    return h->all ? h->all + o * tcomm_wire_bytes(h->w) : NULL;
}

static tcomm_rc _stage_reduce(tcomm_t *c, void *ctx, int i)
{
    _hier *h = ctx;
    size_t o, l;
    tc_chunk(h->count, h->K, i, &o, &l);
    return _reduce(c, h->g, h->x + o, l, h->w, _all_at(h, o), o, h->f->scale);
}

static tcomm_rc _stage_leaders(tcomm_t *c, void *ctx, int i)
{
    _hier *h = ctx;
    size_t o, l;
    tc_chunk(h->count, h->K, i, &o, &l);
    if (h->g->rank != 0) /* members wait for the broadcast instead */
        return TCOMM_OK;
    return tc_ring_allreduce(c, &c->scr_pipe, &c->leaders, h->x + o, l, h->w);
}

static tcomm_rc _stage_bcast(tcomm_t *c, void *ctx, int i)
{
    _hier *h = ctx;
    size_t o, l;
    tc_chunk(h->count, h->K, i, &o, &l);
    return _bcast(c, h->g, h->x + o, l, h->w, _all_at(h, o), o, h->f->bad);
}

static tcomm_rc _hier_run(tcomm_t *c, float *x, size_t count, tcomm_wire w,
                          int K, tc_fold *f)
{
    tc_group *g = &c->group; /* on one node: shared memory (transport/shm.c) */
    int n = g->size, me = g->rank;
    size_t wb = tcomm_wire_bytes(w);
    tcomm_rc rc;
    /* Groups on one node gather and broadcast in shared memory. */
    unsigned char *all = NULL;
    if (!g->on_node && !(all = tc_buf_get(&c->scr.c, count * wb)))
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "hier: no memory for %zu elements",
                          count);
    /* The choice must be the same on every rank (K depends on the count,
     * the number of groups and the job-wide TCOMM_PIPELINE only), or the
     * leaders' rings and the in-group messages would not match: groups of
     * one and groups off a single node run the same pieces, only without
     * shared memory (tc_route_pick cuts over the number of groups). */
    if (K > 1 && c->info.ngroups > 1) {
        /* All of the segments and of `all` exist before the pieces run:
         * reserving is collective, and nothing may move under a reader. */
        if (g->on_node && (rc = tc_shm_reserve(c, g, count * wb)))
            return rc;
        _hier h = {g, x, count, w, K, all, f};
        return tc_pipeline_run(c, K, _stage_reduce, _stage_leaders,
                               _stage_bcast, &h);
    }
    if (n <= 1) /* every rank its own leader */
        return c->leaders.size > 1
                   ? tc_ring_allreduce(c, &c->scr, &c->leaders, x, count, w)
                   : tc_ring_allgather(c, &c->scr, g, x, count, w);
    if ((rc = _reduce(c, g, x, count, w, all, 0, f->scale)))
        return rc;
    if (me == 0 && c->leaders.size > 1 &&
        (rc = tc_ring_allreduce(c, &c->scr, &c->leaders, x, count, w)))
        return rc;
    return _bcast(c, g, x, count, w, all, 0, f->bad);
}

/* Groups on one node fold f's passes into their casts (_reduce, _bcast);
 * groups of one or across nodes do them on their own. */
tcomm_rc tc_hier_allreduce(tcomm_t *c, float *x, size_t count, tcomm_wire w,
                           int K, tc_fold *f)
{
    int fold = c->group.on_node;
    if (!fold)
        tc_fold_before(f, x, count);
    tcomm_rc rc = _hier_run(c, x, count, w, K, f);
    if (!rc && !fold)
        tc_fold_after(f, x, count);
    return rc;
}
