/* algo_ring.c: the ring reduce-scatter and all-gather every other
 * algorithm is built from, and the plain `ring` all-reduce over world.
 *
 * Precision: partial sums live in fp32 in the caller's buffer; only what
 * travels is cast to the wire format, and each received chunk is widened
 * and added in fp32. After the reduce-scatter each owner rounds its chunk
 * to the wire once and the all-gather moves those wire values verbatim, so
 * every rank decodes identical bits. The order of additions is fixed by the
 * ring, so repeated runs are bitwise equal. */
#include "trainer/comm/tcomm_internal.h"

/* A received segment of wire values is widened and added into the fp32
 * partial sums. */
typedef struct {
    tcomm_wire w;
    const unsigned char *rbuf;
    float *acc;
    size_t wb;
} _add_ctx;

static void _add_seg(void *ctx, size_t off, size_t len)
{
    const _add_ctx *a = ctx;
    tc_decode_add(a->w, a->rbuf + off, a->acc + off / a->wb, len / a->wb);
}

tcomm_rc tc_ring_reduce_scatter(tcomm_t *c, tc_scratch *s, const tc_group *g, float *x,
                                size_t count, tcomm_wire w)
{
    int n = g->size, i = g->rank;
    if (n <= 1)
        return TCOMM_OK;
    size_t wb = tcomm_wire_bytes(w), maxc = tc_chunk_len(count, n, 0);
    unsigned char *sbuf = tc_buf_get(&s->a, maxc * wb);
    unsigned char *rbuf = tc_buf_get(&s->b, maxc * wb);
    if (!sbuf || !rbuf)
        return TC_FAIL(TCOMM_ERR_NOMEM, "ring: no memory for %zu-element chunks", maxc);
    int next = (i + 1) % n, prev = (i + n - 1) % n;
    /* Step s sends chunk i-s-1 and receives chunk i-s-2, so after n-1 steps
     * rank i holds the full sum of chunk i. */
    for (int s = 0; s < n - 1; s++) {
        int sc = ((i - s - 1) % n + n) % n, rc_ = ((i - s - 2) % n + n) % n;
        float *sp = x + tc_chunk_off(count, n, sc), *rp = x + tc_chunk_off(count, n, rc_);
        size_t sl = tc_chunk_len(count, n, sc), rl = tc_chunk_len(count, n, rc_);
        const void *out = sp;
        if (w != TCOMM_WIRE_FP32) {
            tc_encode(w, sp, sbuf, sl);
            out = sbuf;
        }
        /* Each segment is added as it lands, while the rest is in flight. */
        _add_ctx a = {w, rbuf, rp, wb};
        tcomm_rc rc = tc_sendrecv_segs(c, g, out, sl * wb, next, rbuf, rl * wb,
                                       prev, c->seg_bytes, wb, _add_seg, &a);
        if (rc)
            return rc;
    }
    return TCOMM_OK;
}

tcomm_rc tc_ring_allgather(tcomm_t *c, tc_scratch *s, const tc_group *g, float *x,
                           size_t count, tcomm_wire w)
{
    int n = g->size, i = g->rank;
    if (n <= 1) {
        if (w != TCOMM_WIRE_FP32) {
            void *t = tc_buf_get(&s->c, count * 2);
            if (!t)
                return TC_FAIL(TCOMM_ERR_NOMEM, "no memory for %zu elements", count);
            tc_round_to_wire(w, x, count, t);
        }
        return TCOMM_OK;
    }
    size_t wb = tcomm_wire_bytes(w);
    unsigned char *all = (unsigned char *)x;
    if (w != TCOMM_WIRE_FP32) {
        all = tc_buf_get(&s->c, count * wb);
        if (!all)
            return TC_FAIL(TCOMM_ERR_NOMEM, "ring: no memory for %zu elements", count);
        size_t o = tc_chunk_off(count, n, i);
        tc_encode(w, x + o, all + o * wb, tc_chunk_len(count, n, i));
    }
    int next = (i + 1) % n, prev = (i + n - 1) % n;
    /* Step s forwards chunk i-s (own chunk first) and receives chunk i-s-1. */
    for (int s = 0; s < n - 1; s++) {
        int sc = ((i - s) % n + n) % n, rc_ = ((i - s - 1) % n + n) % n;
        size_t so = tc_chunk_off(count, n, sc), ro = tc_chunk_off(count, n, rc_);
        tcomm_rc rc = tc_sendrecv(c, g, all + so * wb, tc_chunk_len(count, n, sc) * wb,
                                  next, all + ro * wb, tc_chunk_len(count, n, rc_) * wb, prev);
        if (rc)
            return rc;
    }
    if (w != TCOMM_WIRE_FP32)
        tc_decode(w, all, x, count);
    return TCOMM_OK;
}

tcomm_rc tc_ring_allreduce(tcomm_t *c, tc_scratch *s, const tc_group *g, float *x,
                           size_t count, tcomm_wire w)
{
    tcomm_rc rc = tc_ring_reduce_scatter(c, s, g, x, count, w);
    return rc ? rc : tc_ring_allgather(c, s, g, x, count, w);
}
