/* transport/mpi.c: the MPI transport under our own algorithms (host memory).
 *
 * Every wait polls with a deadline instead of blocking in MPI_Wait: on an
 * oversubscribed node a spinning wait starves the very rank it waits for,
 * and a rank that died must turn into an error that names it, not a hang.
 * So every small collective here is MPI's nonblocking one (MPI_Iallreduce,
 * MPI_Ibcast) polled by the same wait, never the blocking call. The flat
 * algorithm is MPI's own blocking all-reduce, the topology-blind baseline
 * (OpenMPI's nonblocking one is 2.7x slower at 64 MiB over TCP), with the
 * deadline kept by a guard thread (guard.c); for 16-bit wires it runs a
 * user op that adds pairwise in fp32 and rounds back, because MPI only
 * hands an op two wire-typed buffers. */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainer/comm/core/wire.h"
#include "trainer/comm/core/wire_isa.h"
#include "trainer/comm/transport/transport.h"

/* The lost rank's name for a message ("rank 5", or "a rank" when every
 * rank reported waiting: a stall no one can pin on a single rank). */

/* Every tag this file sends with, one per kind of transfer, so that no
 * kind matches another's messages on the same communicator: tc_sendrecv's
 * exchange, _p2p's blocking transfers, the streamed ones (tc_isend and
 * tc_irecv, the ring's segments) and the barrier's tokens. */
enum { _TAG_EXCHANGE = 71, _TAG_P2P = 72, _TAG_STREAM = 73, _TAG_BARRIER = 74 };
static const char *_who(int lost, char *buf, size_t n)
{
    if (lost < 0)
        snprintf(buf, n, "a rank");
    else
        snprintf(buf, n, "rank %d", lost);
    return buf;
}

/* The error after a failed or expired wait over g; peer < 0: a collective
 * (what names it), with no single member to suspect. */
static tcomm_rc _wait_fail(tcomm_t *c, const tc_group *g, int peer,
                           const char *what, int mpi_rc, double limit)
{
    int lost = tc_find_lost_rank(c, peer < 0 ? -1 : g->world[peer]);
    char who[32];
    c->peer_lost = 1;
    _who(lost, who, sizeof who);
    if (mpi_rc != MPI_SUCCESS && peer >= 0)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: %s is lost (MPI error %d talking to rank "
                          "%d in the %s communicator)",
                          c->info.rank, who, mpi_rc, g->world[peer], g->name);
    if (mpi_rc != MPI_SUCCESS)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: %s is lost (MPI error %d in the %s "
                          "communicator's %s)",
                          c->info.rank, who, mpi_rc, g->name, what);
    if (peer >= 0)
        return TORUS_FAIL(TCOMM_ERR_TIMEOUT,
                          "rank %d: %s is lost or stalled: no progress for "
                          "%.0f s (this rank waits on rank %d in the %s "
                          "communicator)",
                          c->info.rank, who, limit, g->world[peer], g->name);
    return TORUS_FAIL(TCOMM_ERR_TIMEOUT,
                      "rank %d: %s is lost or stalled: no progress for %.0f s "
                      "(this rank waits in the %s communicator's %s)",
                      c->info.rank, who, limit, g->name, what);
}

/* A receive that got more bytes than it was posted for (MPI_ERR_TRUNCATE,
 * directly or in one of the n statuses behind MPI_ERR_IN_STATUS): *src is
 * the sender (inside g), else peer. Such a sender is alive and called with
 * another count, algorithm or layout than this rank: a mismatch to name,
 * not a lost rank to search for. */
static int _truncated(int rc, const MPI_Status *st, int n, int peer, int *src)
{
    int cls = MPI_ERR_OTHER;
    *src = peer;
    MPI_Error_class(rc, &cls);
    for (int i = 0; cls == MPI_ERR_IN_STATUS && i < n; i++) {
        if (st[i].MPI_ERROR == MPI_SUCCESS ||
            st[i].MPI_ERROR == MPI_ERR_PENDING)
            continue;
        MPI_Error_class(st[i].MPI_ERROR, &cls);
        *src = st[i].MPI_SOURCE;
    }
    return cls == MPI_ERR_TRUNCATE;
}

/* At most this many requests are waited on together (a send and a
 * receive). */
#define _WAIT_MAX 2

/* Poll n requests to completion within limit seconds (infinite: no
 * deadline). peer is the rank (inside g) we depend on, named in the error
 * when the deadline passes; < 0 for a collective, named by what. */
static tcomm_rc _wait(tcomm_t *c, const tc_group *g, MPI_Request *r, int n,
                      int peer, const char *what, double limit)
{
    double start = tcomm_wtime();
    MPI_Status st[_WAIT_MAX];
    if (n > _WAIT_MAX)
        return TORUS_FAIL(TCOMM_ERR_ARG, "rank %d: %d requests in one wait",
                          c->info.rank, n);
    for (unsigned long spin = 0;; spin++) {
        int done = 0, src;
        int rc = MPI_Testall(n, r, &done, st);
        if (rc != MPI_SUCCESS && _truncated(rc, st, n, peer, &src))
            return TORUS_FAIL(
                TCOMM_ERR_ARG,
                "rank %d: rank %d sent more than this rank expected in the "
                "%s communicator (MPI_ERR_TRUNCATE): the ranks called with "
                "different counts, algorithms or layouts; no rank is lost",
                c->info.rank, src >= 0 && src < g->size ? g->world[src] : -1,
                g->name);
        if (rc != MPI_SUCCESS)
            return _wait_fail(c, g, peer, what, rc, limit);
        if (done)
            return TCOMM_OK;
        /* Spin briefly (latency), then yield (oversubscribed nodes), then
         * nap so a long wait costs no CPU. */
        if (spin > c->poll_yield)
            sched_yield();
        if (spin > c->poll_sleep) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
        if ((spin & 63) == 0 && tcomm_wtime() - start > limit)
            return _wait_fail(c, g, peer, what, MPI_SUCCESS, limit);
    }
}

tcomm_rc tc_wait_req(tcomm_t *c, const tc_group *g, tc_req *r, int peer)
{
    return _wait(c, g, r, 1, peer, "wait", c->timeout_s);
}

tcomm_rc tc_wait_coll(tcomm_t *c, const tc_group *g, MPI_Request *r,
                      const char *what)
{
    return _wait(c, g, r, 1, -1, what, c->timeout_s);
}

tcomm_rc tc_coll_start(tcomm_t *c, const tc_group *g, int mpi_rc,
                       MPI_Request *r, const char *what)
{
    if (mpi_rc != MPI_SUCCESS)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: cannot start the %s of the %s "
                          "communicator (MPI error %d)",
                          c->info.rank, what, g->name, mpi_rc);
    return tc_wait_coll(c, g, r, what);
}

tcomm_rc tc_agree_why(tcomm_t *c, const tc_group *g, int ok, int *who,
                      const char *what, tcomm_rc fail_rc)
{
    int blame = who && *who >= 0 ? *who : c->info.rank;
    if (g->comm == MPI_COMM_NULL || g->size < 2) {
        if (who)
            *who = ok ? -1 : blame;
        return ok ? TCOMM_OK : fail_rc;
    }
    /* MINLOC: the lowest status (0: failed) and the lowest world rank
     * blamed for it, so that every rank names the same one. */
    int in[2] = {ok ? 1 : 0, ok ? c->info.rank : blame}, out[2] = {1, -1};
    MPI_Request r = MPI_REQUEST_NULL;
    char desc[160];
    snprintf(desc, sizeof desc, "agreement that every rank could %s", what);
    tcomm_rc rc = tc_coll_start(
        c, g, MPI_Iallreduce(in, out, 1, MPI_2INT, MPI_MINLOC, g->comm, &r), &r,
        desc);
    if (rc)
        return rc;
    if (who)
        *who = out[0] ? -1 : out[1];
    if (out[0])
        return TCOMM_OK;
    if (!ok) /* our own failure, or one we already named: message set */
        return fail_rc;
    return TORUS_FAIL(fail_rc,
                      "rank %d: rank %d could not %s, so every rank of the %s "
                      "communicator gives up with it",
                      c->info.rank, out[1], what, g->name);
}

tcomm_rc tc_agree(tcomm_t *c, const tc_group *g, int ok, const char *what,
                  tcomm_rc fail_rc)
{
    return tc_agree_why(c, g, ok, NULL, what, fail_rc);
}

/* MPI counts are int. One step of our algorithms moves a chunk of a fused
 * bucket, far below 2 GiB, so a larger step is refused rather than split. */
static int _split_count(size_t bytes, MPI_Datatype *dt, int *count)
{
    if (bytes <= (size_t)0x7fffffff) {
        *dt = MPI_BYTE;
        *count = (int)bytes;
        return 0;
    }
    return -1;
}

tcomm_rc tc_sendrecv(tcomm_t *c, const tc_group *g, const void *sbuf,
                     size_t sbytes, int dst, void *rbuf, size_t rbytes, int src)
{
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Datatype sdt, rdt;
    int sn, rn;
    if (_split_count(sbytes, &sdt, &sn) || _split_count(rbytes, &rdt, &rn))
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "message of %zu bytes exceeds 2 GiB per step",
                          sbytes > rbytes ? sbytes : rbytes);
    MPI_Irecv(rbuf, rn, rdt, src, _TAG_EXCHANGE, g->comm, &r[0]);
    MPI_Isend(sbuf, sn, sdt, dst, _TAG_EXCHANGE, g->comm, &r[1]);
    return _wait(c, g, r, 2, src, "exchange", c->timeout_s);
}

/* Post one nonblocking send (is_send) or receive with tag on g: *r is
 * MPI_REQUEST_NULL unless it was posted. */
static tcomm_rc _post(tcomm_t *c, const tc_group *g, void *buf, size_t bytes,
                      int peer, int is_send, int tag, MPI_Request *r)
{
    MPI_Datatype dt;
    int n, mrc;
    *r = MPI_REQUEST_NULL;
    if (_split_count(bytes, &dt, &n))
        return TORUS_FAIL(TCOMM_ERR_ARG, "message of %zu bytes exceeds 2 GiB",
                          bytes);
    if (is_send)
        mrc = MPI_Isend(buf, n, dt, peer, tag, g->comm, r);
    else
        mrc = MPI_Irecv(buf, n, dt, peer, tag, g->comm, r);
    if (mrc == MPI_SUCCESS)
        return TCOMM_OK;
    return _wait_fail(c, g, peer, is_send ? "send" : "receive", mrc,
                      c->timeout_s);
}

/* One blocking-with-deadline send (is_send) or receive. */
static tcomm_rc _p2p(tcomm_t *c, const tc_group *g, void *buf, size_t bytes,
                     int peer, int is_send)
{
    MPI_Request r;
    tcomm_rc rc = _post(c, g, buf, bytes, peer, is_send, _TAG_P2P, &r);
    if (rc)
        return rc;
    return _wait(c, g, &r, 1, peer, is_send ? "send" : "receive", c->timeout_s);
}

tcomm_rc tc_isend(tcomm_t *c, const tc_group *g, const void *buf, size_t bytes,
                  int dst, tc_req *r)
{
    return _post(c, g, (void *)buf, bytes, dst, 1, _TAG_STREAM, r);
}

tcomm_rc tc_irecv(tcomm_t *c, const tc_group *g, void *buf, size_t bytes,
                  int src, tc_req *r)
{
    return _post(c, g, buf, bytes, src, 0, _TAG_STREAM, r);
}

tcomm_rc tc_send(tcomm_t *c, const tc_group *g, const void *buf, size_t bytes,
                 int dst)
{
    return _p2p(c, g, (void *)buf, bytes, dst, 1);
}

tcomm_rc tc_recv(tcomm_t *c, const tc_group *g, void *buf, size_t bytes,
                 int src)
{
    return _p2p(c, g, buf, bytes, src, 0);
}

/* ---------------------------------------------------------------- flat */

static void _op_add16(void *in, void *inout, int *len, MPI_Datatype *dt,
                      int fp16)
{
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) {
        if (fp16)
            b[i] = tc_half_from_float(tc_float_from_half(a[i]) +
                                      tc_float_from_half(b[i]));
        else {
            uint32_t x = (uint32_t)a[i] << 16, y = (uint32_t)b[i] << 16;
            float fx, fy;
            memcpy(&fx, &x, 4);
            memcpy(&fy, &y, 4);
            b[i] = tc_bf16_from_float(fx + fy);
        }
    }
}

static void _op_fp16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    _op_add16(in, inout, len, dt, 1);
}

static void _op_bf16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    _op_add16(in, inout, len, dt, 0);
}

tcomm_rc tc_mpi_ops_create(tcomm_t *c)
{
    if (MPI_Type_contiguous(2, MPI_BYTE, &c->dt_half) != MPI_SUCCESS ||
        MPI_Type_commit(&c->dt_half) != MPI_SUCCESS ||
        MPI_Op_create(_op_fp16, 1, &c->op_fp16) != MPI_SUCCESS ||
        MPI_Op_create(_op_bf16, 1, &c->op_bf16) != MPI_SUCCESS)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "cannot create the MPI fp16/bf16 reduction ops");
    return TCOMM_OK;
}

void tc_mpi_ops_free(tcomm_t *c)
{
    if (c->op_fp16 != MPI_OP_NULL)
        MPI_Op_free(&c->op_fp16);
    if (c->op_bf16 != MPI_OP_NULL)
        MPI_Op_free(&c->op_bf16);
    if (c->dt_half != MPI_DATATYPE_NULL)
        MPI_Type_free(&c->dt_half);
}

/* MPI_Allreduce in place, as tc_guarded runs it. */
typedef struct {
    void *buf;
    int count;
    MPI_Datatype type;
    MPI_Op op;
    MPI_Comm comm;
} _flat_args;

static int _flat_call(void *arg)
{
    _flat_args *a = arg;
    return MPI_Allreduce(MPI_IN_PLACE, a->buf, a->count, a->type, a->op,
                         a->comm);
}

tcomm_rc tc_flat_allreduce(tcomm_t *c, float *x, size_t count, tcomm_wire w)
{
    if (count > 0x7fffffff)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "flat: %zu elements exceed MPI's int count", count);
    _flat_args a = {x, (int)count, MPI_FLOAT, MPI_SUM, c->world.comm};
    if (w != TCOMM_WIRE_FP32) {
        if (!(a.buf = tc_buf_get(&c->scr.a, count * 2)))
            return TORUS_FAIL(TCOMM_ERR_NOMEM,
                              "flat: no memory for %zu elements", count);
        tc_encode(w, x, a.buf, count);
        a.type = c->dt_half;
        a.op = w == TCOMM_WIRE_FP16 ? c->op_fp16 : c->op_bf16;
    }
    int mrc =
        tc_guarded(c, "the flat all-reduce (MPI_Allreduce)", _flat_call, &a);
    if (mrc != MPI_SUCCESS)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: flat all-reduce failed (MPI error %d)",
                          c->info.rank, mrc);
    if (w != TCOMM_WIRE_FP32)
        tc_decode(w, a.buf, x, count);
    return TCOMM_OK;
}

/* ------------------------------------------------ small world helpers */

/* A ring of one-byte sendrecvs within limit seconds each, not
 * MPI_Barrier, so a lost rank turns into an error naming it instead of a
 * hang. Two rounds make every rank wait for every other. */
static tcomm_rc _barrier(tcomm_t *c, double limit)
{
    if (c->singleton)
        return TCOMM_OK;
    char a = 0, b = 0;
    int n = c->world.size, me = c->world.rank, next = (me + 1) % n,
        prev = (me + n - 1) % n;
    for (int round = 0; round < 2; round++)
        for (int s = 0; s < n - 1; s++) {
            MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
            MPI_Irecv(&b, 1, MPI_BYTE, prev, _TAG_BARRIER, c->world.comm,
                      &r[0]);
            MPI_Isend(&a, 1, MPI_BYTE, next, _TAG_BARRIER, c->world.comm,
                      &r[1]);
            tcomm_rc rc = _wait(c, &c->world, r, 2, prev, "barrier", limit);
            if (rc)
                return rc;
        }
    return TCOMM_OK;
}

tcomm_rc tcomm_barrier(tcomm_t *c)
{
    return _barrier(c, c->timeout_s);
}

tcomm_rc tcomm_barrier_timeout(tcomm_t *c, double seconds)
{
    return _barrier(c, seconds > 0 ? seconds : INFINITY);
}

double tcomm_set_timeout(tcomm_t *c, double seconds)
{
    double old = c->timeout_s;
    c->timeout_s = seconds > 0 ? seconds : INFINITY;
    return old;
}

tcomm_rc tcomm_bcast_bytes(tcomm_t *c, void *buf, size_t bytes, int root)
{
    if (c->singleton)
        return TCOMM_OK;
    if (bytes > 0x7fffffff)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "rank %d: a broadcast of %zu bytes exceeds 2 GiB",
                          c->info.rank, bytes);
    if (root < 0 || root >= c->info.size)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "rank %d: broadcast root %d is not a rank (0..%d)",
                          c->info.rank, root, c->info.size - 1);
    MPI_Request r = MPI_REQUEST_NULL;
    return tc_coll_start(
        c, &c->world,
        MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, c->world.comm, &r), &r,
        "broadcast");
}

tcomm_rc tcomm_max_double(tcomm_t *c, double *v)
{
    if (c->singleton)
        return TCOMM_OK;
    MPI_Request r = MPI_REQUEST_NULL;
    return tc_coll_start(c, &c->world,
                         MPI_Iallreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_MAX,
                                        c->world.comm, &r),
                         &r, "max all-reduce");
}

tcomm_rc tcomm_sum_double(tcomm_t *c, double *v, int n)
{
    if (c->singleton)
        return TCOMM_OK;
    if (n < 0)
        return TORUS_FAIL(TCOMM_ERR_ARG, "rank %d: sum of %d values",
                          c->info.rank, n);
    MPI_Request r = MPI_REQUEST_NULL;
    return tc_coll_start(c, &c->world,
                         MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM,
                                        c->world.comm, &r),
                         &r, "sum all-reduce");
}
