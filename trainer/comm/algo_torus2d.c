/* algo_torus2d.c: Sony's 2D-torus all-reduce: reduce-scatter along the
 * rows, all-reduce of each slice along the columns, all-gather along the
 * rows. Only 1/C of the data crosses the column links (between nodes when
 * rows sit inside nodes), and the latency term drops from 2(P-1) to
 * 2(C-1) + 2(R-1) steps. The same routine runs Tencent's reduce-scatter
 * flavour of hier, with the groups as rows and the equal-index members of
 * every group as columns. Counts that do not divide evenly use the same
 * first-chunks-longer split on every rank, so slices line up. */
#include "trainer/comm/tcomm_internal.h"

tcomm_rc tc_2d_allreduce(tcomm_t *c, tc_group *rows, const tc_group *cols,
                         float *x, size_t count, tcomm_wire w)
{
    int C = rows->size, k = rows->rank;
    /* Rows inside a node go through shared memory (shm_node.c). */
    tcomm_rc rc = tc_reduce_scatter(c, rows, x, count, w);
    if (rc)
        return rc;
    /* The column ring reduces our slice with the same slice of every row. */
    float *slice = x + tc_chunk_off(count, C, k);
    size_t len = tc_chunk_len(count, C, k);
    if ((rc = tc_ring_allreduce(c, cols, slice, len, w)))
        return rc;
    return tc_allgather(c, rows, x, count, w);
}
