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
 * Transport: MPI, spoken here directly (MPI_Isend/MPI_Irecv per segment:
 * the streaming needs the requests themselves); each wait goes through
 * transport/mpi.c's tc_wait_req for its deadline and lost-rank naming. */
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

enum { _TAG = 73 };

/* The requests of one step's segments. */
typedef struct {
    MPI_Request r[MAXSEG];
    int n;
} _step;

static int _nseg(size_t bytes, size_t seg)
{
    return bytes ? (int)((bytes + seg - 1) / seg) : 0;
}

static void _post_recvs(const tc_group *g, unsigned char *buf, size_t bytes,
                        size_t seg, int src, _step *st)
{
    st->n = _nseg(bytes, seg);
    for (int j = 0; j < st->n; j++) {
        size_t o = (size_t)j * seg, l = bytes - o < seg ? bytes - o : seg;
        MPI_Irecv(buf + o, (int)l, MPI_BYTE, src, _TAG, g->comm, &st->r[j]);
    }
}

static void _post_send(const tc_group *g, const unsigned char *buf, size_t l,
                       int dst, MPI_Request *r)
{
    MPI_Isend(buf, (int)l, MPI_BYTE, dst, _TAG, g->comm, r);
}

/* A whole chunk at once, cut as _post_recvs cuts it (the first step). */
static void _post_sends(const tc_group *g, const unsigned char *buf,
                        size_t bytes, size_t seg, int dst, _step *st)
{
    st->n = _nseg(bytes, seg);
    for (int j = 0; j < st->n; j++) {
        size_t o = (size_t)j * seg;
        _post_send(g, buf + o, bytes - o < seg ? bytes - o : seg, dst,
                   &st->r[j]);
    }
}

static tcomm_rc _wait_step(tcomm_t *c, const tc_group *g, _step *st, int peer)
{
    for (int j = 0; j < st->n; j++) {
        tcomm_rc rc = tc_wait_req(c, g, &st->r[j], peer);
        if (rc)
            return rc;
    }
    st->n = 0;
    return TCOMM_OK;
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

tcomm_rc tc_ring_reduce_scatter(tcomm_t *c, tc_scratch *s, const tc_group *g,
                                float *x, size_t count, tcomm_wire w)
{
    int n = g->size, i = g->rank;
    if (n <= 1)
        return TCOMM_OK;
    size_t wb = tcomm_wire_bytes(w), maxc = tc_chunk_len(count, n, 0);
    tcomm_rc rc = _check_size(maxc * wb);
    if (rc)
        return rc;
    /* Two of each: step s fills one while step s+1 starts in the other. */
    unsigned char *rb = tc_buf_get(&s->b, 2 * maxc * wb);
    unsigned char *sb =
        w == TCOMM_WIRE_FP32 ? NULL : tc_buf_get(&s->a, 2 * maxc * wb);
    if (!rb || (w != TCOMM_WIRE_FP32 && !sb))
        return TORUS_FAIL(TCOMM_ERR_NOMEM,
                          "ring: no memory for %zu-element chunks", maxc);
    int next = (i + 1) % n, prev = (i + n - 1) % n;
    /* Step t sends chunk i-t-1 and receives chunk i-t-2, which it adds and
     * sends on in step t+1; after n-1 steps rank i holds the sum of chunk i. */
#define SC(t) ((((i) - (t)-1) % n + n) % n)
    _step rs[2] = {{.n = 0}, {.n = 0}}, ss[2] = {{.n = 0}, {.n = 0}};
    {
        size_t o = tc_chunk_off(count, n, SC(0)),
               l = tc_chunk_len(count, n, SC(0)) * wb;
        size_t seg = _seg_size(l, c->seg_bytes, wb);
        const unsigned char *src = (const unsigned char *)(x + o);
        if (sb) {
            tc_encode(w, x + o, sb, l / wb);
            src = sb;
        }
        size_t rl = tc_chunk_len(count, n, SC(1)) * wb;
        _post_recvs(g, rb, rl, _seg_size(rl, c->seg_bytes, wb), prev, &rs[0]);
        _post_sends(g, src, l, seg, next, &ss[0]);
    }
    for (int t = 0; t < n - 1; t++) {
        int cur = t & 1, nxt = cur ^ 1, last = t == n - 2;
        int rc_ = SC(t + 1); /* the chunk arriving now */
        float *acc = x + tc_chunk_off(count, n, rc_);
        size_t rl = tc_chunk_len(count, n, rc_) * wb,
               seg = _seg_size(rl, c->seg_bytes, wb);
        unsigned char *rbuf = rb + (size_t)cur * maxc * wb;
        if (!last) {
            /* The other buffers were step t-1's: its sends must be done. */
            if ((rc = _wait_step(c, g, &ss[nxt], next)))
                return rc;
            size_t nl = tc_chunk_len(count, n, SC(t + 2)) * wb;
            _post_recvs(g, rb + (size_t)nxt * maxc * wb, nl,
                        _seg_size(nl, c->seg_bytes, wb), prev, &rs[nxt]);
            ss[nxt].n = _nseg(rl, seg);
        }
        for (int j = 0; j < rs[cur].n; j++) {
            size_t o = (size_t)j * seg, l = rl - o < seg ? rl - o : seg;
            if ((rc = tc_wait_req(c, g, &rs[cur].r[j], prev)))
                return rc;
            tc_decode_add(w, rbuf + o, acc + o / wb, l / wb);
            if (last)
                continue;
            /* Step t+1 sends this chunk: the same bytes, cut the same way. */
            const unsigned char *src = (const unsigned char *)acc + o / wb * 4;
            if (sb) {
                unsigned char *e = sb + (size_t)nxt * maxc * wb + o;
                tc_encode(w, acc + o / wb, e, l / wb);
                src = e;
            }
            _post_send(g, src, l, next, &ss[nxt].r[j]);
        }
        rs[cur].n = 0;
    }
#undef SC
    for (int k = 0; k < 2; k++)
        if ((rc = _wait_step(c, g, &ss[k], next)))
            return rc;
    return TCOMM_OK;
}

tcomm_rc tc_ring_allgather(tcomm_t *c, tc_scratch *s, const tc_group *g,
                           float *x, size_t count, tcomm_wire w)
{
    int n = g->size, i = g->rank;
    if (n <= 1) {
        if (w != TCOMM_WIRE_FP32) {
            void *t = tc_buf_get(&s->c, count * 2);
            if (!t)
                return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %zu elements",
                                  count);
            tc_round_to_wire(w, x, count, t);
        }
        return TCOMM_OK;
    }
    size_t wb = tcomm_wire_bytes(w);
    tcomm_rc rc = _check_size(tc_chunk_len(count, n, 0) * wb);
    if (rc)
        return rc;
    unsigned char *all = (unsigned char *)x;
    if (w != TCOMM_WIRE_FP32) {
        all = tc_buf_get(&s->c, count * wb);
        if (!all)
            return TORUS_FAIL(TCOMM_ERR_NOMEM,
                              "ring: no memory for %zu elements", count);
        size_t o = tc_chunk_off(count, n, i);
        tc_encode(w, x + o, all + o * wb, tc_chunk_len(count, n, i));
    }
    int next = (i + 1) % n, prev = (i + n - 1) % n;
    /* Step t forwards chunk i-t (own chunk first) and receives chunk i-t-1
     * in place, which step t+1 forwards segment by segment as it lands. */
#define AC(t) ((((i) - (t)) % n + n) % n)
    _step rs[2] = {{.n = 0}, {.n = 0}}, ss[2] = {{.n = 0}, {.n = 0}};
    {
        size_t o = tc_chunk_off(count, n, AC(0)) * wb,
               l = tc_chunk_len(count, n, AC(0)) * wb;
        size_t seg = _seg_size(l, c->seg_bytes, wb);
        size_t ro = tc_chunk_off(count, n, AC(1)) * wb,
               rl = tc_chunk_len(count, n, AC(1)) * wb;
        _post_recvs(g, all + ro, rl, _seg_size(rl, c->seg_bytes, wb), prev,
                    &rs[0]);
        _post_sends(g, all + o, l, seg, next, &ss[0]);
    }
    for (int t = 0; t < n - 1; t++) {
        int cur = t & 1, nxt = cur ^ 1, last = t == n - 2;
        size_t ro = tc_chunk_off(count, n, AC(t + 1)) * wb;
        size_t rl = tc_chunk_len(count, n, AC(t + 1)) * wb,
               seg = _seg_size(rl, c->seg_bytes, wb);
        if (!last) {
            if ((rc = _wait_step(c, g, &ss[nxt], next)))
                return rc;
            size_t no = tc_chunk_off(count, n, AC(t + 2)) * wb;
            size_t nl = tc_chunk_len(count, n, AC(t + 2)) * wb;
            _post_recvs(g, all + no, nl, _seg_size(nl, c->seg_bytes, wb), prev,
                        &rs[nxt]);
            ss[nxt].n = _nseg(rl, seg);
        }
        for (int j = 0; j < rs[cur].n; j++) {
            size_t o = (size_t)j * seg, l = rl - o < seg ? rl - o : seg;
            if ((rc = tc_wait_req(c, g, &rs[cur].r[j], prev)))
                return rc;
            if (!last)
                _post_send(g, all + ro + o, l, next, &ss[nxt].r[j]);
        }
        rs[cur].n = 0;
    }
#undef AC
    for (int k = 0; k < 2; k++)
        if ((rc = _wait_step(c, g, &ss[k], next)))
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
