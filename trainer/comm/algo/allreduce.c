/* algo/allreduce.c: tcomm_allreduce, the one entry point for host buffers. It
 * pre-scales (averaging before the cast keeps fp16 from overflowing at
 * scale, the DDP bug we avoid), resolves hybrid, runs the algorithm and
 * counts inf/nan in the result for loss scaling; the algorithms whose node
 * stage runs in shared memory fold the scale and the count into it
 * (tc_fold, core/comm.h). tc_allreduce_run is the same along a route
 * resolved before (tc_route: algorithm, wire, pipeline pieces), which the
 * fused buckets' packed path takes without asking the cost model. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "trainer/comm/algo/algo.h"
#include "trainer/comm/core/wire.h"

/* One algorithm along r over count > 0 floats (f: the scale and the count
 * that hier, hier-rs and torus2d fold into their node stage). */
static tcomm_rc _dispatch(tcomm_t *c, float *buf, size_t count,
                          const tc_route *r, tc_fold *f)
{
    /* Nothing to exchange on one rank, but the result still carries wire
     * precision so one rank and many agree on what fp16 means. */
    if (c->info.size == 1)
        return tc_ring_allgather(c, &c->scr, &c->world, buf, count, r->wire);
    switch (r->algo) {
    case TCOMM_ALGO_FLAT:
        return tc_flat_allreduce(c, buf, count, r->wire);
    case TCOMM_ALGO_RING:
        return tc_ring_allreduce(c, &c->scr, &c->world, buf, count, r->wire);
    case TCOMM_ALGO_HIER:
        return tc_hier_allreduce(c, buf, count, r->wire, r->pieces, f);
    case TCOMM_ALGO_HIER_RS:
        return tc_2d_allreduce(c, &c->group, &c->peers, buf, count, r->wire,
                               r->pieces, f);
    case TCOMM_ALGO_TORUS2D:
        return tc_2d_allreduce(c, &c->row, &c->col, buf, count, r->wire,
                               r->pieces, f);
    default:
        return TORUS_FAIL(TCOMM_ERR_ARG, "unknown algorithm %d", (int)r->algo);
    }
}

tcomm_rc tc_allreduce_run(tcomm_t *c, float *buf, size_t count,
                          const tc_route *r, unsigned flags, tcomm_result *res)
{
    double t0 = tcomm_wtime();
    tcomm_rc rc = TCOMM_OK;
    tcomm_algo algo = r->algo;
    tcomm_wire wire = r->wire;
    if (algo == TCOMM_ALGO_HIER_RS && !c->info.groups_uniform)
        return TORUS_FAIL(TCOMM_ERR_UNSUPPORTED,
                          "hier-rs needs groups of equal size; "
                          "this layout has %d groups of unequal size",
                          c->info.ngroups);
    size_t bad = 0;
    tc_fold f = {(flags & TCOMM_AVERAGE) && c->info.size > 1
                     ? 1.0f / (float)c->info.size
                     : 1.0f,
                 res ? &bad : NULL};
    c->started = 1; /* ends start-up's deadline (bootstrap/watchdog.c) */
    /* hier, hier-rs and torus2d do f's passes themselves, folded or not */
    int folds = count && c->info.size > 1 &&
                (algo == TCOMM_ALGO_HIER || algo == TCOMM_ALGO_HIER_RS ||
                 algo == TCOMM_ALGO_TORUS2D);
    if (!folds)
        tc_fold_before(&f, buf, count);
    if (count)
        rc = _dispatch(c, buf, count, r, &f);
    if (rc)
        return rc;
    if (!folds)
        tc_fold_after(&f, buf, count);
    if (res) {
        res->nonfinite = bad;
        res->algo_used = algo;
        res->wire_used = wire;
        res->seconds = tcomm_wtime() - t0;
        res->in_place = 0;
    }
    return TCOMM_OK;
}

tcomm_rc tcomm_allreduce(tcomm_t *c, float *buf, size_t count, tcomm_algo algo,
                         tcomm_wire wire, unsigned flags, tcomm_result *res)
{
    if ((unsigned)algo >= TCOMM_ALGO_COUNT ||
        (unsigned)wire >= TCOMM_WIRE_COUNT || (count && !buf))
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "tcomm_allreduce: bad algorithm %d, wire %d or "
                          "buffer",
                          (int)algo, (int)wire);
    tc_route r;
    tc_route_pick(c, count, 1, algo, wire, flags, TC_ROUTE_ONE, &r);
    return tc_allreduce_run(c, buf, count, &r, flags, res);
}
