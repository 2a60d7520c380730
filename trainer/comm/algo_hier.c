/* algo_hier.c: Tencent's hierarchical all-reduce: reduce inside each group
 * (a node, or the TORUS_GROUP / --group-size group) to its leader, ring
 * all-reduce among the leaders, broadcast back inside the group. Only the
 * leaders use the slow links, which suits groups much faster inside than
 * between. The reduce is a ring reduce-scatter plus a gather to the leader,
 * and the broadcast a scatter plus a ring all-gather, so the in-group
 * traffic stays bandwidth-optimal for large buckets. */
#include "trainer/comm/tcomm_internal.h"

tcomm_rc tc_hier_allreduce(tcomm_t *c, float *x, size_t count, tcomm_wire w)
{
    tc_group *g = &c->group; /* on one node: shared memory (shm_node.c) */
    int n = g->size, me = g->rank;
    size_t wb = tcomm_wire_bytes(w);
    tcomm_rc rc;
    if (n > 1) {
        if ((rc = tc_reduce_scatter(c, g, x, count, w)))
            return rc;
        unsigned char *all = tc_buf_get(&c->wire_c, count * wb);
        if (!all)
            return TC_FAIL(TCOMM_ERR_NOMEM, "hier: no memory for %zu elements", count);
        size_t o = tc_chunk_off(count, n, me), l = tc_chunk_len(count, n, me);
        tc_encode(w, x + o, all + o * wb, l);
        if (me != 0) {
            if ((rc = tc_send(c, g, all + o * wb, l * wb, 0)))
                return rc;
        } else {
            for (int j = 1; j < n; j++)
                if ((rc = tc_recv(c, g, all + tc_chunk_off(count, n, j) * wb,
                                  tc_chunk_len(count, n, j) * wb, j)))
                    return rc;
            tc_decode(w, all, x, count);
        }
    }
    if (me == 0 && c->leaders.size > 1 &&
        (rc = tc_ring_allreduce(c, &c->leaders, x, count, w)))
        return rc;
    if (n <= 1)
        return c->leaders.size > 1 ? TCOMM_OK : tc_ring_allgather(c, g, x, count, w);
    /* Scatter the leader's (already wire-exact) result, then all-gather. */
    unsigned char *all = tc_buf_get(&c->wire_c, count * wb);
    if (!all)
        return TC_FAIL(TCOMM_ERR_NOMEM, "hier: no memory for %zu elements", count);
    size_t o = tc_chunk_off(count, n, me), l = tc_chunk_len(count, n, me);
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
    return tc_allgather(c, g, x, count, w);
}
