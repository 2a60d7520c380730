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

/* hier.c, torus2d.c. K: the pipeline's pieces (tc_route.pieces); f: see
 * tc_fold (core/comm.h), done by the call either way. */
tcomm_rc tc_hier_allreduce(tcomm_t *c, float *x, size_t count, tcomm_wire w,
                           int K, tc_fold *f);
tcomm_rc tc_2d_allreduce(tcomm_t *c, tc_group *rows, const tc_group *cols,
                         float *x, size_t count, tcomm_wire w, int K,
                         tc_fold *f);

/* allreduce.c: tcomm_allreduce along a route resolved before (tc_route:
 * r->algo is never hybrid); asks no cost model. */
tcomm_rc tc_allreduce_run(tcomm_t *c, float *buf, size_t count,
                          const tc_route *r, unsigned flags, tcomm_result *res);
/* segs.c: tcomm_allreduce_segs along a route resolved before for these
 * count floats in ns pieces (tc_route_pick with TC_ROUTE_SEGS and the same
 * flags); asks no cost model. The fusion's buckets run so. */
tcomm_rc tc_segs_run(tcomm_t *c, const tcomm_seg *segs, int nsegs, size_t count,
                     const tc_route *r, unsigned flags, tcomm_result *res);

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
 * (across nodes; size 1 for none), in K pipeline pieces where every row
 * is on a node (tc_route.pieces). */
int tc_shared_holds(const tcomm_t *c, const float *p, size_t count);
int tc_shared_covers(const tcomm_t *c, const tc_group *g, const tcomm_seg *s,
                     int ns);
tcomm_rc tc_shared_allreduce(tcomm_t *c, tc_group *rows, const tc_group *cols,
                             const tcomm_seg *s, int ns, size_t count,
                             tcomm_wire w, int K, float scale, size_t *bad);

#endif
