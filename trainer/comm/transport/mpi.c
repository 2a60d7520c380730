/* transport/mpi.c: the MPI transport under our own algorithms (host memory).
 *
 * Every wait polls with a deadline instead of blocking in MPI_Wait: on an
 * oversubscribed node a spinning wait starves the very rank it waits for,
 * and a rank that died must turn into an error that names it, not a hang.
 * The flat algorithm is MPI's own MPI_Allreduce, the topology-blind
 * baseline; for 16-bit wires it runs a user op that adds pairwise in fp32
 * and rounds back, because MPI only hands an op two wire-typed buffers. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainer/comm/core/wire.h"
#include "trainer/comm/core/wire_isa.h"
#include "trainer/comm/transport/transport.h"

/* Poll n requests to completion. peer is the rank (inside g) we depend on,
 * named in the error when the deadline passes. */
static tcomm_rc _wait(tcomm_t *c, const tc_group *g, MPI_Request *r, int n,
                      int peer)
{
    double start = tcomm_wtime();
    for (unsigned long spin = 0;; spin++) {
        int done = 0;
        int rc = MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            int lost = tc_find_lost_rank(c, g->world[peer]);
            return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                              "rank %d: rank %d is lost (MPI error %d "
                              "talking to rank %d in the %s communicator)",
                              c->info.rank, lost, rc, g->world[peer], g->name);
        }
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
        if ((spin & 63) == 0 && tcomm_wtime() - start > c->timeout_s) {
            int lost = tc_find_lost_rank(c, g->world[peer]);
            return TORUS_FAIL(
                TCOMM_ERR_TIMEOUT,
                "rank %d: rank %d is lost or stalled: no "
                "progress for %.0f s (this rank waits on rank %d in the %s "
                "communicator)",
                c->info.rank, lost, c->timeout_s, g->world[peer], g->name);
        }
    }
}

tcomm_rc tc_wait_req(tcomm_t *c, const tc_group *g, MPI_Request *r, int peer)
{
    return _wait(c, g, r, 1, peer);
}

static int _search_lost_rank(tcomm_t *c, int suspect);

int tc_find_lost_rank(tcomm_t *c, int suspect)
{
    if (c->blame == MPI_COMM_NULL || c->info.size <= 2)
        return suspect;
    pthread_mutex_lock(&c->blame_mu);
    if (c->lost < 0)
        c->lost = _search_lost_rank(c, suspect);
    int lost = c->lost;
    pthread_mutex_unlock(&c->blame_mu);
    return lost;
}

static int _search_lost_rank(tcomm_t *c, int suspect)
{
    enum { TAG = 79 };
    int P = c->info.size, me = c->info.rank;
    int *blocked = malloc(sizeof(int) * (size_t)P);
    MPI_Request *sr = malloc(sizeof(MPI_Request) * (size_t)P);
    if (!blocked || !sr) {
        free(blocked);
        free(sr);
        return suspect;
    }
    int msg[2] = {me, suspect}, in[2];
    for (int r = 0; r < P; r++) {
        blocked[r] = -1;
        sr[r] = MPI_REQUEST_NULL;
        if (r != me) /* small: eager, completes even if r is gone */
            MPI_Isend(msg, 2, MPI_INT, r, TAG, c->blame, &sr[r]);
    }
    blocked[me] = suspect;
    /* Everyone stuck behind the lost rank reports within a few seconds of
     * us: they all stopped at the same collective. */
    double until = tcomm_wtime() + (c->timeout_s < 10 ? c->timeout_s / 2 : 5.0);
    int heard = 1;
    while (heard < P - 1 && tcomm_wtime() < until) {
        int flag = 0;
        MPI_Message m;
        /* A matched probe: the message we saw is the one we receive. */
        if (MPI_Improbe(MPI_ANY_SOURCE, TAG, c->blame, &flag, &m,
                        MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
        if (flag) {
            if (MPI_Mrecv(in, 2, MPI_INT, &m, MPI_STATUS_IGNORE) ==
                    MPI_SUCCESS &&
                in[0] >= 0 && in[0] < P && blocked[in[0]] < 0) {
                blocked[in[0]] = in[1];
                heard++;
            }
        } else {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    /* Follow who-waits-on-whom to the first rank that did not report. */
    int x = suspect;
    for (int hops = 0; hops < P && x >= 0 && x < P && blocked[x] >= 0; hops++)
        x = blocked[x];
    if (x < 0 || x >= P || blocked[x] >= 0)
        x = suspect; /* a cycle: nobody is missing, so blame our own peer */
    free(blocked);
    free(sr); /* pending sends are abandoned: the job is going down */
    return x;
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
    MPI_Irecv(rbuf, rn, rdt, src, 71, g->comm, &r[0]);
    MPI_Isend(sbuf, sn, sdt, dst, 71, g->comm, &r[1]);
    return _wait(c, g, r, 2, src);
}

/* One blocking-with-deadline send (is_send) or receive. */
static tcomm_rc _p2p(tcomm_t *c, const tc_group *g, void *buf, size_t bytes,
                     int peer, int is_send)
{
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Datatype dt;
    int n;
    if (_split_count(bytes, &dt, &n))
        return TORUS_FAIL(TCOMM_ERR_ARG, "message of %zu bytes exceeds 2 GiB",
                          bytes);
    if (is_send)
        MPI_Isend(buf, n, dt, peer, 72, g->comm, &r);
    else
        MPI_Irecv(buf, n, dt, peer, 72, g->comm, &r);
    return _wait(c, g, &r, 1, peer);
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

tcomm_rc tc_flat_allreduce(tcomm_t *c, float *x, size_t count, tcomm_wire w)
{
    if (count > 0x7fffffff)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "flat: %zu elements exceed MPI's int count", count);
    int rc;
    if (w == TCOMM_WIRE_FP32) {
        rc = MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM,
                           c->world.comm);
    } else {
        void *t = tc_buf_get(&c->scr.a, count * 2);
        if (!t)
            return TORUS_FAIL(TCOMM_ERR_NOMEM,
                              "flat: no memory for %zu elements", count);
        tc_encode(w, x, t, count);
        rc = MPI_Allreduce(MPI_IN_PLACE, t, (int)count, c->dt_half,
                           w == TCOMM_WIRE_FP16 ? c->op_fp16 : c->op_bf16,
                           c->world.comm);
        tc_decode(w, t, x, count);
    }
    if (rc != MPI_SUCCESS)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: MPI_Allreduce failed (%d)", c->info.rank,
                          rc);
    return TCOMM_OK;
}

/* ------------------------------------------------ small world helpers */

tcomm_rc tcomm_barrier(tcomm_t *c)
{
    if (c->singleton)
        return TCOMM_OK;
    char a = 0, b = 0;
    /* A ring of one-byte sendrecvs, not MPI_Barrier, so a lost rank turns
     * into a timeout naming it instead of a hang. Two rounds make every
     * rank wait for every other. */
    int n = c->world.size, r = c->world.rank;
    for (int round = 0; round < 2; round++)
        for (int s = 0; s < n - 1; s++) {
            tcomm_rc rc = tc_sendrecv(c, &c->world, &a, 1, (r + 1) % n, &b, 1,
                                      (r + n - 1) % n);
            if (rc)
                return rc;
        }
    return TCOMM_OK;
}

tcomm_rc tcomm_bcast_bytes(tcomm_t *c, void *buf, size_t bytes, int root)
{
    if (c->singleton)
        return TCOMM_OK;
    if (bytes > 0x7fffffff ||
        MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, c->world.comm))
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: broadcast of %zu bytes failed",
                          c->info.rank, bytes);
    return TCOMM_OK;
}

tcomm_rc tcomm_max_double(tcomm_t *c, double *v)
{
    if (c->singleton)
        return TCOMM_OK;
    if (MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_MAX, c->world.comm))
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT, "rank %d: max all-reduce failed",
                          c->info.rank);
    return TCOMM_OK;
}

tcomm_rc tcomm_sum_double(tcomm_t *c, double *v, int n)
{
    if (c->singleton)
        return TCOMM_OK;
    if (MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, c->world.comm))
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT, "rank %d: sum all-reduce failed",
                          c->info.rank);
    return TCOMM_OK;
}
