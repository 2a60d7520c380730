/* algo/nccl_allreduce.c: the all-reduce algorithms over the NCCL
 * transport (tcomm_nccl_allreduce, tcomm_nccl.h), for gradients in device
 * memory; the host algorithms beside it (ring.c, hier.c, torus2d.c, flat
 * in transport/mpi.c) run over MPI and node shared memory. Each algorithm
 * is a composition of NCCL collectives on the communicators the transport
 * split (transport/nccl_transport.h), enqueued on its stream:
 *   flat     ncclAllReduce on world
 *   ring     ncclReduceScatter + ncclAllGather on world
 *   hier     ncclReduce to the group leader, ncclAllReduce among leaders,
 *            ncclBroadcast in the group
 *   hier-rs  reduce-scatter in the group, all-reduce among equal-index
 *            peers, all-gather in the group
 *   torus2d  reduce-scatter along the row, all-reduce along the column,
 *            all-gather along the row
 * and hybrid the one of these the cost model prices lowest for the bucket
 * (core/pick.c), as on the host. NCCL runs each collective with its own
 * ring or tree inside; what this file adds is which ranks reduce together
 * in which order, the shape of the torus. */
#include "trainer/comm/core/comm.h"
#include "trainer/comm/transport/nccl_transport.h"

#define NCCL_TRY(call) TC_NCCL_TRY(n->c->info.rank, call)

/* Reduce-scatter along a (this rank is member arank of asize there, and
 * owns slice arank of the wire in between), all-reduce the slice along b
 * (none: the one-level ring), all-gather along a. */
static tcomm_rc _two_level(tcomm_nccl_t *n, ncclComm_t a, int arank, int asize,
                           ncclComm_t b, size_t npad, tcomm_wire w)
{
    size_t wb = tcomm_wire_bytes(w), chunk = npad / (size_t)asize;
    ncclDataType_t dt = tc_nccl_type(w);
    char *slice = (char *)n->wire + (size_t)arank * chunk * wb;
    NCCL_TRY(
        ncclReduceScatter(n->wire, slice, chunk, dt, ncclSum, a, n->stream));
    if (b)
        NCCL_TRY(ncclAllReduce(slice, slice, chunk, dt, ncclSum, b, n->stream));
    NCCL_TRY(ncclAllGather(slice, n->wire, chunk, dt, a, n->stream));
    return TCOMM_OK;
}

/* Reduce to member 0 of each group, all-reduce among those leaders,
 * broadcast back in the group. */
static tcomm_rc _hier(tcomm_nccl_t *n, size_t npad, ncclDataType_t dt)
{
    const tcomm_info *i = &n->c->info;
    NCCL_TRY(ncclReduce(n->wire, n->wire, npad, dt, ncclSum, 0, n->group,
                        n->stream));
    if (i->group_rank == 0 && i->ngroups > 1)
        NCCL_TRY(ncclAllReduce(n->wire, n->wire, npad, dt, ncclSum, n->leaders,
                               n->stream));
    NCCL_TRY(ncclBroadcast(n->wire, n->wire, npad, dt, 0, n->group, n->stream));
    return TCOMM_OK;
}

/* Enqueue algo on the staged wire buffer (npad values). With one rank it
 * still runs: NCCL's size-1 communicators make it a device copy, and a
 * one-process check then exercises the real collectives. */
static tcomm_rc _enqueue(tcomm_nccl_t *n, tcomm_algo algo, size_t npad,
                         tcomm_wire w)
{
    const tcomm_info *i = &n->c->info;
    switch (algo) {
    case TCOMM_ALGO_FLAT:
        NCCL_TRY(ncclAllReduce(n->wire, n->wire, npad, tc_nccl_type(w), ncclSum,
                               n->world, n->stream));
        return TCOMM_OK;
    case TCOMM_ALGO_RING:
        return _two_level(n, n->world, i->rank, i->size, NULL, npad, w);
    case TCOMM_ALGO_HIER:
        return _hier(n, npad, tc_nccl_type(w));
    case TCOMM_ALGO_HIER_RS:
        return _two_level(n, n->group, i->group_rank, i->group_size, n->peers,
                          npad, w);
    case TCOMM_ALGO_TORUS2D:
        return _two_level(n, n->row, i->col, i->cols, n->col, npad, w);
    default:
        return TORUS_FAIL(TCOMM_ERR_ARG, "unknown algorithm %d", (int)algo);
    }
}

tcomm_rc tcomm_nccl_allreduce(tcomm_nccl_t *n, float *x, size_t count,
                              tcomm_algo algo, tcomm_wire w, unsigned flags,
                              cudaStream_t producer)
{
    return tcomm_nccl_allreduce_timed(n, x, count, algo, w, flags, producer,
                                      NULL);
}

tcomm_rc tcomm_nccl_allreduce_timed(tcomm_nccl_t *n, float *x, size_t count,
                                    tcomm_algo algo, tcomm_wire w,
                                    unsigned flags, cudaStream_t producer,
                                    const cudaEvent_t *ev)
{
    tcomm_t *c = n->c;
    const tcomm_info *i = &c->info;
    tcomm_rc rc = tc_nccl_alive(n);
    if (rc)
        return rc;
    c->started = 1; /* ends start-up's deadline (bootstrap/watchdog.c) */
    if (algo == TCOMM_ALGO_HYBRID)
        algo = tc_hybrid_pick(c, count, w, 0);
    if (algo == TCOMM_ALGO_HIER_RS && !i->groups_uniform)
        return TORUS_FAIL(TCOMM_ERR_UNSUPPORTED,
                          "hier-rs needs groups of equal size");
    float scale = (flags & TCOMM_AVERAGE) ? 1.0f / (float)i->size : 1.0f;
    if ((rc = tc_nccl_stage_in(n, x, count, scale, w, producer, ev)))
        return rc;
    if ((rc = _enqueue(n, algo, tc_nccl_padded(n, count), w)))
        return rc;
    return tc_nccl_stage_out(n, x, count, w, ev);
}
