/* algo/algo.h: the host all-reduce algorithms of libtcomm (layer algo,
 * above transport), over the host transports (transport/transport.h: MPI
 * between nodes, a node's shared memory inside one): the ring building
 * blocks, hier, torus2d, the pipeline that overlaps their stages, and the
 * in-place sums of gradients that lie in shared memory. tcomm_allreduce
 * and tcomm_allreduce_segs (tcomm.h) choose among them. A file of algo/
 * whose name starts with a transport (nccl_allreduce.c) runs over that
 * transport instead and does not use this header. */
#ifndef TORUS_TCOMM_ALGO_H
#define TORUS_TCOMM_ALGO_H

#include "trainer/comm/core/comm.h"
#include "trainer/comm/transport/transport.h"

/* ring.c. x is fp32, in place; s is the calling thread's scratch (&c->scr,
 * or &c->scr_pipe on the pipeline's thread). */
tcomm_rc tc_ring_reduce_scatter(tcomm_t *c, tc_scratch *s, const tc_group *g,
                                float *x, size_t count, tcomm_wire w);
/* After a reduce-scatter: the all-gather. Each member's own chunk is first
 * rounded to the wire, so every rank ends with identical values. */
tcomm_rc tc_ring_allgather(tcomm_t *c, tc_scratch *s, const tc_group *g,
                           float *x, size_t count, tcomm_wire w);
tcomm_rc tc_ring_allreduce(tcomm_t *c, tc_scratch *s, const tc_group *g,
                           float *x, size_t count, tcomm_wire w);

/* pipeline.c: a message in K pieces through three stages. The caller's
 * thread runs pre(i) for every piece, then post(i) for every piece; a
 * network thread runs net(i) as soon as pre(i) is done, and post(i) waits
 * for net(i). So the network stage of one piece overlaps the node stages
 * of the others. net runs on another thread: it must use &c->scr_pipe and
 * communicators the other stages do not. The first error wins; both
 * threads stop. */
typedef tcomm_rc (*tc_stage_fn)(tcomm_t *c, void *ctx, int piece);
tcomm_rc tc_pipeline_run(tcomm_t *c, int K, tc_stage_fn pre, tc_stage_fn net,
                         tc_stage_fn post, void *ctx);
/* How many pieces a message of wire_bytes runs in (1: not worth it, or not
 * possible: MPI without MPI_THREAD_MULTIPLE, TCOMM_PIPELINE=1). parts: as
 * torus_cost_pieces; the same on every rank, so that all cut alike. */
int tc_pipeline_pieces(const tcomm_t *c, size_t wire_bytes, int parts);
/* Where a member's slice of piece i lies in a message of count elements:
 * piece i of K, then chunk k of n of that piece. The packed rows
 * (torus2d.c) and the in-place path (shared_grads.c) both cut so, and a
 * column's rings pair their slices only because they do. */
static inline void tc_piece_chunk(size_t count, int K, int i, int n, int k,
                                  size_t *from, size_t *len)
{
    size_t o, l;
    tc_chunk(count, K, i, &o, &l);
    *from = o + tc_chunk_off(l, n, k);
    *len = tc_chunk_len(l, n, k);
}

/* The passes over the whole message that tcomm_allreduce adds around an
 * algorithm: the 1/P pre-scale before it and the inf/nan count after.
 * Where the node stage runs in shared memory they fold into its casts
 * (tc_shm_*_at), so that they overlap the network with the rest of the
 * pipeline instead of standing before and after it with the links idle.
 * tc_fold_* does them on their own where an algorithm cannot fold. */
typedef struct {
    float scale; /* 1: none (a plain sum) */
    size_t *bad; /* add the result's inf/nan count here; NULL: none */
} tc_fold;
void tc_fold_before(tc_fold *f, float *x, size_t count);
void tc_fold_after(tc_fold *f, const float *x, size_t count);

/* hier.c, torus2d.c. f: see tc_fold; done by the call either way. */
tcomm_rc tc_hier_allreduce(tcomm_t *c, float *x, size_t count, tcomm_wire w,
                           tc_fold *f);
tcomm_rc tc_2d_allreduce(tcomm_t *c, tc_group *rows, const tc_group *cols,
                         float *x, size_t count, tcomm_wire w, tc_fold *f);

/* seg_walk.c: call fn on every piece of the range [from, from + len) of
 * the vector that the pieces s[0..ns) make up: p and n are the piece's
 * part of the range, at its position in the range. */
typedef void (*tc_piece_fn)(float *p, size_t n, size_t at, void *arg);
void tc_seg_walk(const tcomm_seg *s, int ns, size_t from, size_t len,
                 tc_piece_fn fn, void *arg);

/* shared_grads.c. holds: 1 when this rank has a shared block (not plain
 * memory) and the count floats at p lie in it (count 0: any p). covers: 1
 * when every piece does and g can reduce in place. allreduce: the in-place
 * all-reduce of such pieces over rows (members on one node), then cols
 * (across nodes; size 1 for none). */
int tc_shared_holds(const tcomm_t *c, const float *p, size_t count);
int tc_shared_covers(const tcomm_t *c, const tc_group *g, const tcomm_seg *s,
                     int ns);
tcomm_rc tc_shared_allreduce(tcomm_t *c, tc_group *rows, const tc_group *cols,
                             const tcomm_seg *s, int ns, size_t count,
                             tcomm_wire w, float scale, size_t *bad);

#endif
