/* algo/segs.c: tcomm_allreduce_segs, the all-reduce of a fused bucket
 * given as a list of gradient pieces.
 *
 * On a node the cost is memory traffic, not messages: packing a bucket,
 * pre-scaling, casting, reducing, casting back, scanning for inf/nan and
 * unpacking are each a pass over every byte. When the row (torus2d) or the
 * group (hier-rs) shares a node, this path does the work in three passes:
 * gather + scale + cast straight from the pieces into this rank's shared
 * segment; sum of the own chunk (its own fp32 values plus everyone's wire
 * values), with the column all-reduce across nodes in between; decode of
 * all chunks straight back into the pieces, counting inf/nan on the way.
 * Other algorithms pack into one buffer and run tcomm_allreduce. Which
 * of these ways a call takes is its route's path (tc_route_pick, once per
 * fused bucket at seal); tc_segs_run follows it and prices nothing. */
#include <string.h>
#include <time.h>

#include "trainer/comm/algo/algo.h"
#include "trainer/comm/core/wire.h"

typedef struct {
    tcomm_wire w;
    unsigned char *wire; /* wire buffer that position 0 of the range maps to */
    float *f;            /* fp32 buffer that position 0 of the range maps to */
    float scale;
    size_t bad;
} _ctx;

/* piece -> wire, scaled */
static void _enc(float *p, size_t n, size_t at, void *arg)
{
    _ctx *x = arg;
    tc_encode_scaled(x->w, p, x->wire + at * tcomm_wire_bytes(x->w), n,
                     x->scale);
}

/* piece -> fp32 buffer, scaled */
static void _read(float *p, size_t n, size_t at, void *arg)
{
    _ctx *x = arg;
    for (size_t i = 0; i < n; i++)
        x->f[at + i] = p[i] * x->scale;
}

/* wire -> piece, counting inf/nan while the values are hot */
static void _dec(float *p, size_t n, size_t at, void *arg)
{
    _ctx *x = arg;
    x->bad +=
        tc_decode_count(x->w, x->wire + at * tcomm_wire_bytes(x->w), p, n);
}

/* fp32 buffer -> piece */
static void _write(float *p, size_t n, size_t at, void *arg)
{
    _ctx *x = arg;
    memcpy(p, x->f + at, n * 4);
    x->bad += tc_count_nonfinite(p, n);
}

static tcomm_rc _on_node(tcomm_t *c, tc_group *rows, const tc_group *cols,
                         const tcomm_seg *s, int ns, size_t count, tcomm_wire w,
                         float scale, size_t *bad)
{
    size_t wb = tcomm_wire_bytes(w);
    int n = rows->size, me = rows->rank;
    tcomm_rc rc = tc_shm_reserve(c, rows, count * wb);
    if (rc)
        return rc;
    _ctx x = {.w = w, .scale = scale};
    x.wire = rows->shm.seg[me];
    tc_seg_walk(s, ns, 0, count, _enc, &x);
    if ((rc = tc_shm_sync(c, rows)))
        return rc;
    size_t off = tc_chunk_off(count, n, me), len = tc_chunk_len(count, n, me);
    float *acc = tc_buf_get(&c->accum, len * 4);
    if (!acc)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for a %zu-float chunk",
                          len);
    x.f = acc;
    tc_seg_walk(s, ns, off, len, _read, &x);
    /* Block by block, every member's values in member order: the partial
     * sums stay in cache instead of streaming through memory once per
     * member. */
    for (size_t k = 0; k < len; k += 8192) {
        size_t m = len - k < 8192 ? len - k : 8192;
        for (int j = 0; j < n; j++)
            if (j != me)
                tc_decode_add(w, rows->shm.seg[j] + (off + k) * wb, acc + k, m);
    }
    /* Across nodes. With one row the cast below is the only rounding, and
     * everyone, owner included, decodes the cast bits. */
    if (cols->size > 1 &&
        (rc = tc_ring_allreduce(c, &c->scr, cols, acc, len, w)))
        return rc;
    tc_encode(w, acc, rows->shm.seg[me] + off * wb, len);
    if ((rc = tc_shm_sync(c, rows)))
        return rc;
    for (int j = 0; j < n; j++) {
        x.wire = rows->shm.seg[j] + tc_chunk_off(count, n, j) * wb;
        tc_seg_walk(s, ns, tc_chunk_off(count, n, j), tc_chunk_len(count, n, j),
                    _dec, &x);
    }
    *bad = x.bad;
    return tc_shm_sync(c, rows);
}

/* The packed way: the pieces into one buffer, the algorithm, and back. */
static tcomm_rc _packed(tcomm_t *c, const tcomm_seg *segs, int nsegs,
                        size_t count, const tc_route *r, unsigned flags,
                        float scale, size_t *bad)
{
    float *buf = tc_buf_get(&c->pack, count * 4);
    if (!buf)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory to pack %zu floats",
                          count);
    _ctx x = {.f = buf, .scale = scale};
    tc_seg_walk(segs, nsegs, 0, count, _read, &x);
    tcomm_rc rc =
        tc_allreduce_run(c, buf, count, r, flags & ~TCOMM_AVERAGE, NULL);
    if (!rc)
        tc_seg_walk(segs, nsegs, 0, count, _write, &x);
    *bad = x.bad;
    return rc;
}

tcomm_rc tc_segs_run(tcomm_t *c, const tcomm_seg *segs, int nsegs, size_t count,
                     const tc_route *r, unsigned flags, tcomm_result *res)
{
    double t0 = tcomm_wtime();
    c->started = 1; /* ends start-up's deadline (bootstrap/watchdog.c) */
    if (r->path == TC_PATH_SENT) /* one piece: reduce it where it is */
        return tc_allreduce_run(c, segs[0].p, count, r, flags & ~TCOMM_SHARED,
                                res);
    float scale = (flags & TCOMM_AVERAGE) && c->info.size > 1
                      ? 1.0f / (float)c->info.size
                      : 1.0f;
    tc_group *rows = TC_ALGO_ROWS(c, r->algo);
    const tc_group *cols = r->algo == TCOMM_ALGO_TORUS2D ? &c->col : &c->peers;
    tcomm_rc rc;
    size_t bad = 0;
    if (r->path == TC_PATH_IN_PLACE) {
        if (!tc_shared_covers(c, rows, segs, nsegs))
            return TORUS_FAIL(
                TCOMM_ERR_ARG,
                "tcomm_allreduce_segs: rank %d: TCOMM_SHARED "
                "but a piece lies outside tcomm_shared_alloc memory",
                c->info.rank);
        rc = tc_shared_allreduce(c, rows, cols, segs, nsegs, count, r->wire,
                                 r->pieces, scale, &bad);
    } else if (r->path == TC_PATH_ON_NODE) {
        rc = _on_node(c, rows, cols, segs, nsegs, count, r->wire, scale, &bad);
    } else {
        rc = _packed(c, segs, nsegs, count, r, flags, scale, &bad);
    }
    if (rc)
        return rc;
    if (res) {
        res->nonfinite = bad;
        res->algo_used = r->algo;
        res->wire_used = r->wire;
        res->seconds = tcomm_wtime() - t0;
        res->in_place = r->path == TC_PATH_IN_PLACE;
    }
    return TCOMM_OK;
}

tcomm_rc tcomm_allreduce_segs(tcomm_t *c, const tcomm_seg *segs, int nsegs,
                              tcomm_algo algo, tcomm_wire wire, unsigned flags,
                              tcomm_result *res)
{
    size_t count = 0;
    for (int i = 0; i < nsegs; i++)
        count += segs[i].count;
    if ((unsigned)algo >= TCOMM_ALGO_COUNT ||
        (unsigned)wire >= TCOMM_WIRE_COUNT || nsegs < 0)
        return TORUS_FAIL(
            TCOMM_ERR_ARG,
            "tcomm_allreduce_segs: bad algorithm %d, wire %d or %d "
            "pieces",
            (int)algo, (int)wire, nsegs);
    tc_route r;
    tc_route_pick(c, count, nsegs, algo, wire, flags, TC_ROUTE_SEGS, &r);
    return tc_segs_run(c, segs, nsegs, count, &r, flags, res);
}
