/* core/route.h: how one all-reduce runs, resolved before it runs (layer
 * core). tc_route_pick (pick.c) asks the cost model once and fills one;
 * the executors (algo/allreduce.c, algo/segs.c, algo/nccl_allreduce.c)
 * only read it. A fused bucket's route is resolved when the buckets are
 * sealed or cut again (the bucket plan, fusion/plan.h), so that a step
 * runs its buckets without pricing anything; a single call outside
 * fusion resolves its own route at the call. Plain C, no MPI: the plan
 * and its unit tests include it alone. */
#ifndef TORUS_TCOMM_CORE_ROUTE_H
#define TORUS_TCOMM_CORE_ROUTE_H

#include "trainer/comm/tcomm.h"

/* Where the values go on their way (tcomm_allreduce_segs' four ways and
 * the device's one). */
typedef enum {
    TC_PATH_SENT = 0, /* one buffer, the algorithm over the transports */
    TC_PATH_PACKED,   /* pieces packed into one buffer, then as sent */
    TC_PATH_ON_NODE,  /* pieces cast straight into the row's (group's)
                       * shared segments and decoded straight back */
    TC_PATH_IN_PLACE, /* summed where they lie in shared memory */
    TC_PATH_DEVICE,   /* NCCL collectives on device memory */
    TC_PATH_COUNT
} tc_path;

/* What the route is resolved for: a single buffer (tcomm_allreduce), a
 * list of pieces (tcomm_allreduce_segs, the host buckets), device memory
 * (tcomm_nccl_allreduce, the NCCL buckets). */
typedef enum { TC_ROUTE_ONE = 0, TC_ROUTE_SEGS, TC_ROUTE_NCCL } tc_route_for;

typedef struct {
    tcomm_algo algo; /* never TCOMM_ALGO_HYBRID */
    tcomm_wire wire; /* the wire it runs on (hybrid may take fp32) */
    tc_path path;
    int pieces;       /* the pipeline's pieces (1: none), what hier.c,
                       * torus2d.c and the in-place path cut the message
                       * into; the same on every rank */
    double predict_s; /* the cost model's time; < 0: it cannot price it */
} tc_route;

/* pick.c. The route of an all-reduce of count floats (in nsegs pieces
 * for TC_ROUTE_SEGS) with algo (hybrid: the cost model's pick), wire and
 * the call's flags (TCOMM_SHARED: the pieces lie in shared memory at the
 * same offsets on every rank). Asks the cost model; the same inputs give
 * the same route on every rank. */
void tc_route_pick(const tcomm_t *c, size_t count, int nsegs, tcomm_algo algo,
                   tcomm_wire wire, unsigned flags, tc_route_for how,
                   tc_route *r);
const char *tc_path_name(tc_path p);

#endif
