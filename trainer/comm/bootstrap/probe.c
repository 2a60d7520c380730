/* bootstrap/probe.c: measure the cost model's link parameters at start-up.
 * Rank 0 ping-pongs a small and two large messages with a rank on its own
 * node; then every rank of its node exchanges with its counterpart on one
 * other node, all pairs at once (the way a ring step loads a node's link);
 * rank 0 also times its fp32 reduce loop and its fp16 cast. The numbers are
 * broadcast so that every rank's hybrid choice is identical. About 0.5 s on 1
 * Gbit/s links. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainer/comm/core/wire.h"
#include "trainer/comm/transport/transport.h"

/* The cost of the 16-bit wire on this rank: n fp32 values of a cast to
 * fp16 and back, as the wire's kernels run them (rank 0, before the
 * broadcast). convert_Bps is the rate of one cast, the mean of the two
 * directions, so a round trip of F fp32 bytes costs 2 F / convert_Bps.
 * a holds 2n floats: the wire values go to its second half. */
static void _probe_casts(tcomm_t *c, float *a, size_t n)
{
    double t0 = tcomm_wtime();
    for (int i = 0; i < 4; i++) {
        tc_encode(TCOMM_WIRE_FP16, a, a + n, n);
        tc_decode(TCOMM_WIRE_FP16, a + n, a, n);
    }
    double t = tcomm_wtime() - t0;
    if (t > 0)
        c->model.convert_Bps = 2 * 4.0 * (double)n * 4 / t;
}

/* Round-trip time of bytes between world ranks 0 and peer (both call). */
static tcomm_rc _pingpong(tcomm_t *c, int peer, void *buf, size_t bytes,
                          int iters, double *rtt)
{
    tcomm_rc rc = TCOMM_OK;
    double t0 = 0;
    for (int i = -1; i < iters && !rc; i++) { /* i = -1 warms up */
        if (i == 0)
            t0 = tcomm_wtime();
        if (c->info.rank == 0) {
            rc = tc_send(c, &c->world, buf, bytes, peer);
            if (!rc)
                rc = tc_recv(c, &c->world, buf, bytes, peer);
        } else {
            rc = tc_recv(c, &c->world, buf, bytes, 0);
            if (!rc)
                rc = tc_send(c, &c->world, buf, bytes, 0);
        }
    }
    *rtt = (tcomm_wtime() - t0) / iters;
    return rc;
}

/* alpha is half a small message's round trip. The bandwidth is the slope
 * between two large messages, not big / (time - alpha): a fixed cost per
 * message that only large messages pay (a token bucket's burst, which lets
 * the first 512 KiB of every message through at once on the emulated
 * cluster's tbf links; a TCP window that opens per message) would
 * otherwise count as bandwidth, and a ring's steady stream pays none of it. */
static void _fit(double t_small, double t_mid, double t_big, size_t mid,
                 size_t big, double flows, tcomm_link *l)
{
    l->alpha_s = t_small;
    double t = t_big - t_mid;
    l->bw_Bps = t > 0 ? flows * (double)(big - mid) / t : 1e12;
}

/* The node link: a round trip between ranks 0 and peer, one way's time. */
static tcomm_rc _measure_node(tcomm_t *c, int peer, void *buf, size_t big,
                              tcomm_link *l)
{
    double t8, tm, tb;
    const size_t mid = big / 4;
    tcomm_rc rc = _pingpong(c, peer, buf, 8, 50, &t8);
    if (!rc)
        rc = _pingpong(c, peer, buf, mid, 4, &tm);
    if (!rc)
        rc = _pingpong(c, peer, buf, big, 4, &tb);
    if (!rc && c->info.rank == 0)
        _fit(t8 / 2, tm / 2, tb / 2, mid, big, 1, l);
    return rc;
}

static int _cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median time per exchange of bytes each way with peer (both call),
 * over iters (at most _EXCHANGES) after a warm-up. The median, not the
 * mean: one TCP retransmission on a shaped link stalls an exchange for a
 * timeout, and in the bandwidth's slope (a difference of two such times)
 * one stall made the model price every algorithm 40% high. The pairs run
 * together, so every pair's time holds the others' share of the link. */
#define _EXCHANGES 50
static tcomm_rc _exchange(tcomm_t *c, int peer, void *buf, size_t bytes,
                          int iters, double *t)
{
    char *b = buf;
    double each[_EXCHANGES];
    tcomm_rc rc = TCOMM_OK;
    if (iters > _EXCHANGES)
        iters = _EXCHANGES;
    for (int i = -1; i < iters && !rc; i++) {
        double t0 = tcomm_wtime();
        rc = tc_sendrecv(c, &c->world, b, bytes, peer, b + bytes, bytes, peer);
        if (i >= 0)
            each[i] = tcomm_wtime() - t0;
    }
    if (!rc) {
        qsort(each, (size_t)iters, sizeof each[0], _cmp_double);
        *t = each[iters / 2];
    }
    return rc;
}

static tcomm_rc _barrier(tcomm_t *c)
{
    MPI_Request rq = MPI_REQUEST_NULL;
    return tc_coll_start(c, &c->world, MPI_Ibarrier(c->world.comm, &rq), &rq,
                         "probe's barrier");
}

/* The link between nodes as a ring step uses it: the j-th rank of rank 0's
 * node exchanges with the j-th rank of the other node, every pair at once,
 * both ways at once, so the measured rate is what the node's link gives all
 * of its ranks' flows together, full duplex, with every rank of both nodes
 * busy. (A ping-pong of one pair gave 0.143 GB/s on the emulated cluster's
 * 1 Gbit/s links, more than the link's 0.125, and the model priced every
 * algorithm 20-28% below its measured time.) Every rank calls; rank 0
 * fits. buf holds 2 * big bytes. */
static tcomm_rc _measure_nodes(tcomm_t *c, const int *nodes, int other,
                               void *buf, size_t big, tcomm_link *l)
{
    int me = c->info.rank, n0 = nodes[0], peer = -1, flows = 0;
    int j = 0, seen[2] = {0, 0}; /* my index on my node; ranks seen per node */
    for (int r = 0; r < c->info.size; r++) {
        int side = nodes[r] == n0 ? 0 : nodes[r] == other ? 1 : -1;
        if (side < 0)
            continue;
        if (r == me)
            j = seen[side];
        seen[side]++;
    }
    flows = seen[0] < seen[1] ? seen[0] : seen[1];
    int mine = nodes[me] == n0 ? 0 : nodes[me] == other ? 1 : -1;
    if (mine >= 0 && j < flows) { /* my partner: index j on the other side */
        int want = j;
        for (int r = 0; r < c->info.size && peer < 0; r++)
            if (nodes[r] == (mine ? n0 : other) && want-- == 0)
                peer = r;
    }
    const size_t mid = big / 4, sizes[3] = {8, mid, big};
    const int iters[3] = {49, 5, 5}; /* odd: a middle one */
    double t[3] = {0, 0, 0};
    tcomm_rc rc = TCOMM_OK;
    for (int k = 0; k < 3 && !rc; k++) {
        rc = _barrier(c);
        if (!rc && peer >= 0)
            rc = _exchange(c, peer, buf, sizes[k], iters[k], &t[k]);
    }
    if (!rc && me == 0)
        _fit(t[0], t[1], t[2], mid, big, flows, l);
    return rc;
}

tcomm_rc tcomm_probe_links(tcomm_t *c)
{
    tcomm_rc rc = TCOMM_OK;
    const size_t big = 4 << 20;
    if (c->singleton || c->info.size == 1)
        return TCOMM_OK;
    int *nodes = malloc(sizeof(int) * (size_t)c->info.size);
    void *buf = malloc(2 * big); /* send and receive halves */
    if (!nodes || !buf)
        TORUS_FAIL(TCOMM_ERR_NOMEM, "probe: no memory");
    /* Agree first: a rank without the memory must not skip the gather the
     * others wait in. */
    rc = tc_agree(c, &c->world, nodes && buf, "allocate the probe's buffers",
                  TCOMM_ERR_NOMEM);
    MPI_Request rq = MPI_REQUEST_NULL;
    if (!rc)
        rc = tc_coll_start(c, &c->world,
                           MPI_Iallgather(&c->info.node_id, 1, MPI_INT, nodes,
                                          1, MPI_INT, c->world.comm, &rq),
                           &rq, "probe's node gather");
    if (rc) {
        free(nodes);
        free(buf);
        return rc;
    }
    memset(buf, 1, 2 * big);
    int intra = -1, inter = -1;
    for (int r = 1; r < c->info.size; r++) {
        if (nodes[r] == nodes[0] && intra < 0)
            intra = r;
        if (nodes[r] != nodes[0] && inter < 0)
            inter = r;
    }
    if (c->info.rank == 0) {
        /* Time the fp32 add the algorithms run per received chunk. */
        float *a = buf;
        size_t n = big / 8;
        double t0 = tcomm_wtime();
        for (int i = 0; i < 4; i++)
            tc_decode_add(TCOMM_WIRE_FP32, a + n, a, n);
        double t = tcomm_wtime() - t0;
        if (t > 0)
            c->model.reduce_Bps = 4.0 * (double)n * 4 / t;
        _probe_casts(c, a, n);
    }
    if (intra > 0 && (c->info.rank == 0 || c->info.rank == intra))
        rc = _measure_node(c, intra, buf, big, &c->model.link[TORUS_LINK_NODE]);
    if (!rc && inter > 0)
        rc = _measure_nodes(c, nodes, nodes[inter], buf, big,
                            &c->model.link[TORUS_LINK_LEAF]);
    if (inter < 0 && c->info.rank == 0) /* one node: no inter links to use */
        c->model.link[TORUS_LINK_LEAF] = c->model.link[TORUS_LINK_NODE];
    if (!rc)
        rc = tcomm_bcast_bytes(c, &c->model, sizeof c->model, 0);
    free(nodes);
    free(buf);
    return rc;
}
