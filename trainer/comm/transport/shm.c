/* transport/shm.c: reduce-scatter and all-gather inside one node through
 * MPI-3 shared memory windows, for the row / group stage of torus2d, hier
 * and hier-rs (the contiguous `ring` stays a ring: it is the baseline).
 *
 * On a node, moving a chunk as a message costs a copy plus a handshake per
 * ring step, and with more ranks than cores every handshake waits for the
 * scheduler. Here every member writes its whole vector, cast to the wire,
 * into its own segment once; after a barrier, member i sums chunk i from
 * all segments in fp32, in member order (deterministic); for the
 * all-gather it writes its rounded chunk back and, after a barrier, every
 * member decodes all chunks. Same contract as the ring versions: after the
 * reduce-scatter x holds chunk i's fp32 sum; after the all-gather every
 * member holds identical wire-rounded values. */
#include <stdlib.h>
#include <string.h>

#include "trainer/comm/core/wire.h"
#include "trainer/comm/transport/transport.h"

void tc_shm_probe(tcomm_t *c, tc_group *g)
{
    g->on_node = 0;
    if (!c->use_shm || g->comm == MPI_COMM_NULL || g->size < 2)
        return;
    MPI_Comm local;
    if (MPI_Comm_split_type(g->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                            &local) != MPI_SUCCESS)
        return;
    int n = 0, all = 0;
    MPI_Comm_size(local, &n);
    MPI_Comm_free(&local);
    /* Every member must agree, or some would wait in a barrier others skip. */
    int mine = n == g->size;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, g->comm);
    g->on_node = all;
}

void tc_shm_free(tc_group *g)
{
    if (g->shm.bytes) {
        MPI_Win_unlock_all(g->shm.win);
        MPI_Win_free(&g->shm.win);
    }
    free(g->shm.seg);
    memset(&g->shm, 0, sizeof g->shm);
}

/* Collective over g: every member asks for the same size (same count).
 * A member that cannot allocate fails every member with it, naming it
 * (shm_win.c), instead of leaving them in a collective it skipped. */
tcomm_rc tc_shm_reserve(tcomm_t *c, tc_group *g, size_t bytes)
{
    if (bytes <= g->shm.bytes)
        return TCOMM_OK;
    /* Freeing the old window is a blocking collective too: only once every
     * member is known to be here (deadline-guarded). */
    tcomm_rc rc;
    if (g->shm.bytes &&
        (rc = tc_agree(c, g, 1, "grow its shared segment", TCOMM_ERR_NOMEM)))
        return rc;
    tc_shm_free(g);
    size_t want = bytes + bytes / 4 + 4096;
    void *base;
    g->shm.seg = calloc((size_t)g->size, sizeof *g->shm.seg);
    if (!g->shm.seg)
        TORUS_FAIL(TCOMM_ERR_NOMEM, "rank %d: no memory to map the %s",
                   c->info.rank, g->name);
    rc = tc_win_alloc(c, g, g->shm.seg != NULL, want, 1, MPI_INFO_NULL, &base,
                      &g->shm.win, NULL);
    if (rc) {
        free(g->shm.seg);
        g->shm.seg = NULL;
        return rc;
    }
    for (int j = 0; j < g->size; j++) {
        MPI_Aint sz;
        int disp;
        MPI_Win_shared_query(g->shm.win, j, &sz, &disp, &g->shm.seg[j]);
    }
    MPI_Win_lock_all(MPI_MODE_NOCHECK, g->shm.win);
    g->shm.bytes = want;
    return TCOMM_OK;
}

/* Everyone's writes are visible to everyone after this. A non-blocking
 * barrier polled with our deadline, so a lost member is reported. */
tcomm_rc tc_shm_sync(tcomm_t *c, tc_group *g)
{
    return tc_shm_sync_win(c, g, g->shm.win);
}

/* The same, for stores into win's memory. */
tcomm_rc tc_shm_sync_win(tcomm_t *c, const tc_group *g, MPI_Win win)
{
    MPI_Request r;
    MPI_Win_sync(win);
    if (MPI_Ibarrier(g->comm, &r) != MPI_SUCCESS)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: barrier of the %s failed", c->info.rank,
                          g->name);
    tcomm_rc rc = tc_wait_req(c, g, &r, (g->rank + 1) % g->size);
    MPI_Win_sync(win);
    return rc;
}

tcomm_rc tc_shm_reduce_scatter_at(tcomm_t *c, tc_group *g, float *x,
                                  size_t count, tcomm_wire w, size_t at,
                                  float scale)
{
    size_t wb = tcomm_wire_bytes(w);
    int n = g->size, me = g->rank;
    tcomm_rc rc = tc_shm_reserve(c, g, (at + count) * wb);
    if (rc)
        return rc;
    size_t off = tc_chunk_off(count, n, me), len = tc_chunk_len(count, n, me);
    unsigned char *mine = g->shm.seg[me] + at * wb;
    /* Nobody reads a member's own chunk in its segment (it sums that chunk
     * from x), so only the rest is cast; the own chunk is scaled where it
     * lies. */
    tc_encode_scaled(w, x, mine, off, scale);
    tc_encode_scaled(w, x + off + len, mine + (off + len) * wb,
                     count - off - len, scale);
    if (scale != 1.0f)
        tc_scale(x + off, len, scale);
    if ((rc = tc_shm_sync(c, g)))
        return rc;
    for (int j = 0; j < n; j++) /* own fp32 value plus the others, in order */
        if (j != me)
            tc_decode_add(w, g->shm.seg[j] + (at + off) * wb, x + off, len);
    return TCOMM_OK;
}

tcomm_rc tc_shm_allgather_at(tcomm_t *c, tc_group *g, float *x, size_t count,
                             tcomm_wire w, size_t at, size_t *bad)
{
    size_t wb = tcomm_wire_bytes(w), nbad = 0;
    int n = g->size, me = g->rank, fp32 = w == TCOMM_WIRE_FP32;
    tcomm_rc rc = tc_shm_reserve(c, g, (at + count) * wb);
    if (rc)
        return rc;
    size_t off = tc_chunk_off(count, n, me), len = tc_chunk_len(count, n, me);
    unsigned char *mine = g->shm.seg[me] + (at + off) * wb;
    /* On an fp32 wire the own chunk stays as it is: counted as it is cast. */
    if (bad && fp32)
        nbad += tc_encode_count(w, x + off, mine, len);
    else
        tc_encode(w, x + off, mine, len);
    if ((rc = tc_shm_sync(c, g)))
        return rc;
    for (int j = 0; j < n; j++) {
        size_t o = tc_chunk_off(count, n, j), l = tc_chunk_len(count, n, j);
        const unsigned char *src = g->shm.seg[j] + (at + o) * wb;
        if (j == me && fp32) /* x holds it; 16-bit: rounded like the rest */
            continue;
        if (bad)
            nbad += tc_decode_count(w, src, x + o, l);
        else
            tc_decode(w, src, x + o, l);
    }
    if (bad)
        *bad += nbad;
    /* Nobody may overwrite a segment until everyone has read it. */
    return tc_shm_sync(c, g);
}
