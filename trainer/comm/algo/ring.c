/* algo/ring.c: the ring reduce-scatter and all-gather every other
 * algorithm is built from, and the plain `ring` all-reduce over world.
 *
 * Precision: partial sums live in fp32 in the caller's buffer; only what
 * travels is cast to the wire format, and each received chunk is widened
 * and added in fp32. After the reduce-scatter each owner rounds its chunk
 * to the wire once and the all-gather moves those wire values verbatim, so
 * every rank decodes identical bits. The order of additions is fixed by the
 * ring, so repeated runs are bitwise equal.
 *
 * Streaming: a step's chunk moves in segments (TCOMM_SEG_KB), and what a
 * rank receives in step s is what it sends in step s+1. So each segment is
 * forwarded (after its add, in the reduce-scatter) as soon as it lands,
 * while the rest of its chunk is still arriving, and the next step's
 * receives are posted before this step's are done. The link never waits
 * for a whole step to finish on every rank; on a 1 Gbit/s link the gaps
 * between steps were a tenth of the time.
 *
 * Transport: the streamed point-to-point of transport/transport.h
 * (tc_isend/tc_irecv per segment: the streaming needs the requests
 * themselves; tc_wait_req for each, with its deadline and lost-rank
 * naming). No MPI call here. */
#include "trainer/comm/algo/algo.h"
#include "trainer/comm/core/wire.h"

/* Ring steps move in segments: about seg bytes (TCOMM_SEG_KB; 0: whole
 * steps), grown so that a message has at most MAXSEG of them, in whole
 * elements of eb bytes. A function of the message's length alone, so that
 * sender and receiver cut it alike (every rank has the same seg). */
enum { MAXSEG = 64 };
static inline size_t _seg_size(size_t bytes, size_t seg, size_t eb)
{
    size_t least = (bytes + MAXSEG - 1) / MAXSEG;
    if (seg == 0 || seg > bytes)
        seg = bytes;
    if (seg < least)
        seg = least;
    seg = (seg + eb - 1) / eb * eb;
    return seg ? seg : eb;
}

/* The requests of one step's segments. */
typedef struct {
    tc_req r[MAXSEG];
    int n;
} _step;

/* One ring pass over g (a reduce-scatter or an all-gather) of x, count
 * floats, on wire w: its neighbours and the two steps in flight (step t
 * uses side t & 1: its receives rs and the sends ss that forward them). */
typedef struct {
    tcomm_t *c;
    const tc_group *g;
    float *x;
    size_t count, wb, maxc;
    tcomm_wire w;
    int n, i, next, prev;
    _step rs[2], ss[2];
} _ring;

static void _ring_init(_ring *r, tcomm_t *c, const tc_group *g, float *x,
                       size_t count, tcomm_wire w)
{
    *r = (_ring){.c = c, .g = g, .x = x, .count = count, .w = w};
    r->n = g->size;
    r->i = g->rank;
    r->next = (r->i + 1) % r->n;
    r->prev = (r->i + r->n - 1) % r->n;
    r->wb = tcomm_wire_bytes(w);
    r->maxc = tc_chunk_len(count, r->n, 0);
}

static int _nseg(size_t bytes, size_t seg)
{
    return bytes ? (int)((bytes + seg - 1) / seg) : 0;
}

/* The segment size of a step of bytes (the same on every rank). */
static size_t _seg_of(const _ring *r, size_t bytes)
{
    return _seg_size(bytes, r->c->seg_bytes, r->wb);
}

/* Which chunk step t sends: the reduce-scatter's step t sends chunk
 * i-t-1, the all-gather's chunk i-t (its own first). */
static int _chunk_at(const _ring *r, int t)
{
    return ((r->i - t) % r->n + r->n) % r->n;
}

static size_t _chunk_bytes(const _ring *r, int k)
{
    return tc_chunk_len(r->count, r->n, k) * r->wb;
}

/* A step's receives (is_send 0) or a whole chunk's sends at once (the
 * first step), cut into segments of _seg_of(bytes). */
static tcomm_rc _post_all(_ring *r, unsigned char *buf, size_t bytes,
                          int is_send, _step *st)
{
    size_t seg = _seg_of(r, bytes);
    int n = _nseg(bytes, seg);
    for (st->n = 0; st->n < n; st->n++) {
        size_t o = (size_t)st->n * seg, l = bytes - o < seg ? bytes - o : seg;
        tcomm_rc rc =
            is_send
                ? tc_isend(r->c, r->g, buf + o, l, r->next, &st->r[st->n])
                : tc_irecv(r->c, r->g, buf + o, l, r->prev, &st->r[st->n]);
        if (rc)
            return rc;
    }
    return TCOMM_OK;
}

static tcomm_rc _wait_step(_ring *r, _step *st, int peer)
{
    for (int j = 0; j < st->n; j++) {
        tcomm_rc rc = tc_wait_req(r->c, r->g, &st->r[j], peer);
        if (rc)
            return rc;
    }
    st->n = 0;
    return TCOMM_OK;
}

/* Before step t's segments are forwarded on side nxt: step t-1's sends
 * there must be done; then step t+1's receives (nl bytes into buf) go up,
 * and step t+1 will send the rl bytes arriving now, cut as they arrive. */
static tcomm_rc _prepare_next(_ring *r, int nxt, unsigned char *buf, size_t nl,
                              size_t rl)
{
    tcomm_rc rc = _wait_step(r, &r->ss[nxt], r->next);
    if (!rc)
        rc = _post_all(r, buf, nl, 0, &r->rs[nxt]);
    r->ss[nxt].n = _nseg(rl, _seg_of(r, rl));
    return rc;
}

static tcomm_rc _wait_sends(_ring *r)
{
    tcomm_rc rc = TCOMM_OK;
    for (int k = 0; !rc && k < 2; k++)
        rc = _wait_step(r, &r->ss[k], r->next);
    return rc;
}

/* Chunk lengths differ by at most one element: the largest step in bytes
 * must fit in one int (MPI counts). */
static tcomm_rc _check_size(size_t chunk_bytes)
{
    if (chunk_bytes > (size_t)0x7fffffff)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "ring: a step of %zu bytes exceeds 2 GiB",
                          chunk_bytes);
    return TCOMM_OK;
}

/* ------------------------------------------------------ reduce-scatter */

/* rb: two step buffers of received wire values; sb: two of encoded
 * partial sums to send (NULL on an fp32 wire: sent from x itself). Step s
 * fills one while step s+1 starts in the other. */
typedef struct {
    _ring r;
    unsigned char *rb, *sb;
} _rs;

static unsigned char *_rs_side(const _rs *s, unsigned char *b, int side)
{
    return b + (size_t)side * s->r.maxc * s->r.wb;
}

/* Step 0: this rank's own values of chunk i-1 go out whole; step 0's
 * receives (chunk i-2) go up first. */
static tcomm_rc _rs_first(_rs *s)
{
    _ring *r = &s->r;
    int k = _chunk_at(r, 1);
    size_t o = tc_chunk_off(r->count, r->n, k), l = _chunk_bytes(r, k);
    unsigned char *src = (unsigned char *)(r->x + o);
    if (s->sb) {
        tc_encode(r->w, r->x + o, s->sb, l / r->wb);
        src = s->sb;
    }
    tcomm_rc rc = _post_all(r, s->rb, _chunk_bytes(r, _chunk_at(r, 2)), 0,
                            &r->rs[0]);
    return rc ? rc : _post_all(r, src, l, 1, &r->ss[0]);
}

/* Step t: every segment of chunk i-t-2 is added to x as it lands and,
 * but in the last step, forwarded at once: step t+1 sends this chunk, the
 * same bytes cut the same way. */
static tcomm_rc _rs_step(_rs *s, int t)
{
    _ring *r = &s->r;
    int cur = t & 1, nxt = cur ^ 1, last = t == r->n - 2;
    int k = _chunk_at(r, t + 2); /* the chunk arriving now */
    float *acc = r->x + tc_chunk_off(r->count, r->n, k);
    size_t rl = _chunk_bytes(r, k), seg = _seg_of(r, rl), wb = r->wb;
    unsigned char *rbuf = _rs_side(s, s->rb, cur);
    tcomm_rc rc = TCOMM_OK;
    if (!last)
        rc = _prepare_next(r, nxt, _rs_side(s, s->rb, nxt),
                           _chunk_bytes(r, _chunk_at(r, t + 3)), rl);
    for (int j = 0; !rc && j < r->rs[cur].n; j++) {
        size_t o = (size_t)j * seg, l = rl - o < seg ? rl - o : seg;
        if ((rc = tc_wait_req(r->c, r->g, &r->rs[cur].r[j], r->prev)))
            break;
        tc_decode_add(r->w, rbuf + o, acc + o / wb, l / wb);
        if (last)
            continue;
        const unsigned char *src = (const unsigned char *)acc + o / wb * 4;
        if (s->sb) {
            unsigned char *e = _rs_side(s, s->sb, nxt) + o;
            tc_encode(r->w, acc + o / wb, e, l / wb);
            src = e;
        }
        rc = tc_isend(r->c, r->g, src, l, r->next, &r->ss[nxt].r[j]);
    }
    r->rs[cur].n = 0;
    return rc;
}

tcomm_rc tc_ring_reduce_scatter(tcomm_t *c, tc_scratch *sc, const tc_group *g,
                                float *x, size_t count, tcomm_wire w)
{
    if (g->size <= 1)
        return TCOMM_OK;
    _rs s;
    _ring *r = &s.r;
    _ring_init(r, c, g, x, count, w);
    size_t side = r->maxc * r->wb;
    tcomm_rc rc = _check_size(side);
    if (rc)
        return rc;
    s.rb = tc_buf_get(&sc->b, 2 * side);
    s.sb = w == TCOMM_WIRE_FP32 ? NULL : tc_buf_get(&sc->a, 2 * side);
    if (!s.rb || (w != TCOMM_WIRE_FP32 && !s.sb))
        return TORUS_FAIL(TCOMM_ERR_NOMEM,
                          "ring: no memory for %zu-element chunks", r->maxc);
    /* After n-1 steps rank i holds the sum of chunk i. */
    rc = _rs_first(&s);
    for (int t = 0; !rc && t < r->n - 1; t++)
        rc = _rs_step(&s, t);
    return rc ? rc : _wait_sends(r);
}

/* ---------------------------------------------------------- all-gather */

/* Step t forwards chunk i-t (its own first) and receives chunk i-t-1 in
 * place in all (the message in wire format), which step t+1 forwards
 * segment by segment as it lands. */
static tcomm_rc _ag_steps(_ring *r, unsigned char *all)
{
    size_t wb = r->wb;
    int k0 = _chunk_at(r, 0), k1 = _chunk_at(r, 1);
    tcomm_rc rc = _post_all(r, all + tc_chunk_off(r->count, r->n, k1) * wb,
                            _chunk_bytes(r, k1), 0, &r->rs[0]);
    if (!rc)
        rc = _post_all(r, all + tc_chunk_off(r->count, r->n, k0) * wb,
                       _chunk_bytes(r, k0), 1, &r->ss[0]);
    for (int t = 0; !rc && t < r->n - 1; t++) {
        int cur = t & 1, nxt = cur ^ 1, last = t == r->n - 2;
        int k = _chunk_at(r, t + 1), kn = _chunk_at(r, t + 2);
        unsigned char *in = all + tc_chunk_off(r->count, r->n, k) * wb;
        size_t rl = _chunk_bytes(r, k), seg = _seg_of(r, rl);
        if (!last)
            rc = _prepare_next(r, nxt,
                               all + tc_chunk_off(r->count, r->n, kn) * wb,
                               _chunk_bytes(r, kn), rl);
        for (int j = 0; !rc && j < r->rs[cur].n; j++) {
            size_t o = (size_t)j * seg, l = rl - o < seg ? rl - o : seg;
            rc = tc_wait_req(r->c, r->g, &r->rs[cur].r[j], r->prev);
            if (!rc && !last)
                rc = tc_isend(r->c, r->g, in + o, l, r->next, &r->ss[nxt].r[j]);
        }
        r->rs[cur].n = 0;
    }
    return rc ? rc : _wait_sends(r);
}

/* One member alone: its values rounded to the wire, as a gather would. */
static tcomm_rc _ag_alone(tc_scratch *s, float *x, size_t count, tcomm_wire w)
{
    if (w == TCOMM_WIRE_FP32)
        return TCOMM_OK;
    void *t = tc_buf_get(&s->c, count * 2);
    if (!t)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %zu elements", count);
    tc_round_to_wire(w, x, count, t);
    return TCOMM_OK;
}

tcomm_rc tc_ring_allgather(tcomm_t *c, tc_scratch *s, const tc_group *g,
                           float *x, size_t count, tcomm_wire w)
{
    if (g->size <= 1)
        return _ag_alone(s, x, count, w);
    _ring r;
    _ring_init(&r, c, g, x, count, w);
    tcomm_rc rc = _check_size(r.maxc * r.wb);
    if (rc)
        return rc;
    unsigned char *all = (unsigned char *)x;
    if (w != TCOMM_WIRE_FP32) {
        all = tc_buf_get(&s->c, count * r.wb);
        if (!all)
            return TORUS_FAIL(TCOMM_ERR_NOMEM,
                              "ring: no memory for %zu elements", count);
        size_t o = tc_chunk_off(count, r.n, r.i);
        tc_encode(w, x + o, all + o * r.wb, tc_chunk_len(count, r.n, r.i));
    }
    if ((rc = _ag_steps(&r, all)))
        return rc;
    if (w != TCOMM_WIRE_FP32)
        tc_decode(w, all, x, count);
    return TCOMM_OK;
}

tcomm_rc tc_ring_allreduce(tcomm_t *c, tc_scratch *s, const tc_group *g,
                           float *x, size_t count, tcomm_wire w)
{
    tcomm_rc rc = tc_ring_reduce_scatter(c, s, g, x, count, w);
    return rc ? rc : tc_ring_allgather(c, s, g, x, count, w);
}
