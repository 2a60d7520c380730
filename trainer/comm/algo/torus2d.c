/* algo/torus2d.c: Sony's 2D-torus all-reduce: reduce-scatter along the
 * rows, all-reduce of each slice along the columns, all-gather along the
 * rows. Only 1/C of the data crosses the column links (between nodes when
 * rows sit inside nodes), and the latency term drops from 2(P-1) to
 * 2(C-1) + 2(R-1) steps. The same routine runs Tencent's reduce-scatter
 * flavour of hier, with the groups as rows and the equal-index members of
 * every group as columns. Counts that do not divide evenly use the same
 * first-chunks-longer split on every rank, so slices line up.
 *
 * When the rows reduce in a node's shared memory, a large message runs in
 * pieces (pipeline.c): the column ring of one piece overlaps the row
 * stages of the others. Ring rows would share the links and the wire
 * buffers with the columns, so they run the stages one after the other. */
#include "trainer/comm/algo/algo.h"

typedef struct {
    tc_group *rows;
    const tc_group *cols;
    float *x;
    size_t count;
    tcomm_wire w;
    int K;
    tc_fold *f;
} _2d;

/* Every piece has its own part of the shared segments, so a member still
 * reading one piece never sees the next one's bytes. */
static tcomm_rc _row_rs(tcomm_t *c, void *ctx, int i)
{
    _2d *d = ctx;
    size_t o, l;
    tc_chunk(d->count, d->K, i, &o, &l);
    return tc_shm_reduce_scatter_at(c, d->rows, d->x + o, l, d->w, o,
                                    d->f->scale);
}

static tcomm_rc _col_ring(tcomm_t *c, void *ctx, int i)
{
    _2d *d = ctx;
    size_t from, len;
    tc_piece_chunk(d->count, d->K, i, d->rows->size, d->rows->rank, &from,
                   &len);
    return tc_ring_allreduce(c, &c->scr_pipe, d->cols, d->x + from, len, d->w);
}

static tcomm_rc _row_ag(tcomm_t *c, void *ctx, int i)
{
    _2d *d = ctx;
    size_t o, l;
    tc_chunk(d->count, d->K, i, &o, &l);
    return tc_shm_allgather_at(c, d->rows, d->x + o, l, d->w, o, d->f->bad);
}

/* A whole message's row stage: through the node's shared memory when
 * the row lives on one node (folding f's passes), else the ring. */
static tcomm_rc _reduce_scatter(tcomm_t *c, tc_group *g, float *x, size_t count,
                                tcomm_wire w, tc_fold *f)
{
    if (g->on_node)
        return tc_shm_reduce_scatter_at(c, g, x, count, w, 0, f->scale);
    tc_fold_before(f, x, count);
    return tc_ring_reduce_scatter(c, &c->scr, g, x, count, w);
}

static tcomm_rc _allgather(tcomm_t *c, tc_group *g, float *x, size_t count,
                           tcomm_wire w, tc_fold *f)
{
    if (g->on_node)
        return tc_shm_allgather_at(c, g, x, count, w, 0, f->bad);
    tcomm_rc rc = tc_ring_allgather(c, &c->scr, g, x, count, w);
    if (!rc)
        tc_fold_after(f, x, count);
    return rc;
}

tcomm_rc tc_2d_allreduce(tcomm_t *c, tc_group *rows, const tc_group *cols,
                         float *x, size_t count, tcomm_wire w, int K,
                         tc_fold *f)
{
    int C = rows->size, k = rows->rank;
    /* Every row, not just this one: the column rings pair pieces. */
    if (K > 1 && rows->all_on_node && C > 1 && cols->size > 1) {
        /* Reserving is collective: once, for all pieces. */
        tcomm_rc rc = tc_shm_reserve(c, rows, count * tcomm_wire_bytes(w));
        _2d d = {rows, cols, x, count, w, K, f};
        return rc ? rc : tc_pipeline_run(c, K, _row_rs, _col_ring, _row_ag, &d);
    }
    /* Rows inside a node go through shared memory (transport/shm.c). */
    tcomm_rc rc = _reduce_scatter(c, rows, x, count, w, f);
    if (rc)
        return rc;
    /* The column ring reduces our slice with the same slice of every row. */
    float *slice = x + tc_chunk_off(count, C, k);
    size_t len = tc_chunk_len(count, C, k);
    if ((rc = tc_ring_allreduce(c, &c->scr, cols, slice, len, w)))
        return rc;
    return _allgather(c, rows, x, count, w, f);
}
