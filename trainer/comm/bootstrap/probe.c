/* bootstrap/probe.c: measure the cost model's link parameters at start-up.
 * Rank 0 ping-pongs a small and two large messages with a rank on its own
 * node; then the nodes form one ring, as a column ring loads them: the j-th
 * rank of every node sends to the j-th rank of the next node and receives
 * from the previous one, all ranks at once; last, every rank times its fp32
 * reduce loop and its fp16 cast at once. The ring and the kernels run on
 * every rank, as the algorithms the numbers price do: on a host where the
 * ranks share cores, a measurement with most ranks idle (or spinning in a
 * barrier) saw another machine than the all-reduce does. Rank 0's numbers
 * are broadcast so that every rank's hybrid choice is identical. About
 * 0.6 s on 1 Gbit/s links (eight 4 MiB exchanges per rank dominate). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainer/comm/bootstrap/bootstrap.h"
#include "trainer/comm/core/wire.h"
#include "trainer/comm/transport/transport.h"

/* Passes over the probe's 2 MiB of floats per kernel timed: about 10 ms
 * for a rank alone on a core and several scheduler time slices when ranks
 * share cores, so that a rank running alone for one slice does not stand
 * for all of them. */
#define _KERNEL_PASSES 64

/* The cost of the 16-bit wire on this rank: n fp32 values of a cast to
 * fp16 and back, as the wire's kernels run them (every rank at once;
 * rank 0's figure is broadcast). convert_Bps is the rate of one cast, the mean
 * of the two directions, so a round trip of F fp32 bytes costs 2 F /
 * convert_Bps. a holds 2n floats: the wire values go to its second half. */
static void _probe_casts(tcomm_t *c, float *a, size_t n)
{
    double t0 = tcomm_wtime();
    for (int i = 0; i < _KERNEL_PASSES; i++) {
        tc_encode(TCOMM_WIRE_FP16, a, a + n, n);
        tc_decode(TCOMM_WIRE_FP16, a + n, a, n);
    }
    double t = tcomm_wtime() - t0;
    if (t > 0)
        c->model.convert_Bps = 2.0 * _KERNEL_PASSES * (double)n * 4 / t;
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

/* The median time per exchange of bytes, sent to dst while as many come
 * from src (both sides call), over iters (at most _EXCHANGES) after a
 * warm-up. The median, not the mean: one TCP retransmission on a shaped
 * link stalls an exchange for a timeout (one such stall once made the model
 * price every algorithm 40% high). All exchanging ranks run together, so
 * each time holds the others' share of the link. */
#define _EXCHANGES 50
static tcomm_rc _exchange(tcomm_t *c, int dst, int src, void *buf, size_t bytes,
                          int iters, double *t)
{
    char *b = buf;
    double each[_EXCHANGES];
    tcomm_rc rc = TCOMM_OK;
    if (iters > _EXCHANGES)
        iters = _EXCHANGES;
    for (int i = -1; i < iters && !rc; i++) {
        double t0 = tcomm_wtime();
        rc = tc_sendrecv(c, &c->world, b, bytes, dst, b + bytes, bytes, src);
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

/* For rank r: pos[r], the position of its node in the order of the nodes'
 * first ranks, and idx[r], its index among its node's ranks. Returns the
 * number of nodes; *least: the fewest ranks any node has. */
static int _node_ring(const int *nodes, int size, int *pos, int *idx,
                      int *least)
{
    int n = 0;
    for (int r = 0; r < size; r++) {
        int first = 0, k = 0;
        while (nodes[first] != nodes[r])
            first++;
        for (int q = first; q < r; q++)
            k += nodes[q] == nodes[r];
        pos[r] = first == r ? n++ : pos[first];
        idx[r] = k;
    }
    *least = size;
    for (int p = 0; p < n; p++) {
        int k = 0;
        for (int r = 0; r < size; r++)
            k += pos[r] == p;
        if (k < *least)
            *least = k;
    }
    return n;
}

/* The rank at node position p with index j on its node, or -1. */
static int _rank_at(const int *pos, const int *idx, int size, int p, int j)
{
    for (int r = 0; r < size; r++)
        if (pos[r] == p && idx[r] == j)
            return r;
    return -1;
}

tcomm_rc tc_probe_ring(const int *nodes, int size, int rank, int *next,
                       int *prev, int *flows)
{
    int *pos = calloc(2 * (size_t)size, sizeof(int));
    *next = *prev = -1;
    *flows = 0;
    if (!pos)
        return TCOMM_ERR_NOMEM;
    int *idx = pos + size;
    int n = _node_ring(nodes, size, pos, idx, flows);
    if (n > 1 && idx[rank] < *flows) {
        *next = _rank_at(pos, idx, size, (pos[rank] + 1) % n, idx[rank]);
        *prev = _rank_at(pos, idx, size, (pos[rank] + n - 1) % n, idx[rank]);
    }
    free(pos);
    return TCOMM_OK;
}

/* The link between nodes as a column ring loads it: all nodes in one ring,
 * the j-th rank of each sending to the j-th rank of the next node while it
 * receives from the previous one, every such rank at once, so a node's
 * link carries `flows` flows each way, full duplex, and every node's
 * ranks and links are as busy as in a ring step. (A ping-pong of one pair
 * gave 0.143 GB/s on the emulated cluster's 1 Gbit/s links, more than the
 * link's 0.125, and priced every algorithm 20-28% low; an exchange between
 * two nodes with the others' ranks spinning in a barrier gave 0.06-0.16
 * GB/s from one run to the next.) Ranks beyond the fewest any node has sit
 * out. Every rank calls; rank 0 fits. buf holds 2 * big bytes. */
static tcomm_rc _measure_nodes(tcomm_t *c, const int *nodes, void *buf,
                               size_t big, tcomm_link *l)
{
    int next, prev, flows;
    tcomm_rc rc =
        tc_probe_ring(nodes, c->info.size, c->info.rank, &next, &prev, &flows);
    rc = tc_agree(c, &c->world, rc == TCOMM_OK, "allocate the probe's ring",
                  TCOMM_ERR_NOMEM);
    /* Bandwidth from the big exchanges alone, not from a slope between two
     * sizes: they run back to back after a warm-up, as a ring's steps do,
     * so a token bucket's burst (refilled only while a link idles) and a
     * TCP window's opening are paid once, in the warm-up. The slope of two
     * medians was the difference of two noisy times: on the emulated
     * cluster it read 0.062 to 0.164 GB/s from one run to the next on a
     * link that carries 0.119 (iperf3, tests/bench/comm/link_ring.sh). */
    const size_t sizes[2] = {8, big};
    const int iters[2] = {49, 7}; /* odd: a middle one */
    double t[2] = {0, 0};
    for (int k = 0; k < 2 && !rc; k++) {
        rc = _barrier(c);
        if (!rc && next >= 0)
            rc = _exchange(c, next, prev, buf, sizes[k], iters[k], &t[k]);
        /* The slowest rank's median: a ring step ends when its slowest
         * edge does. Flows that share a link do not share it evenly (TCP
         * lets one run ahead, and it then finishes early); one rank's
         * median read up to 7% above the link's rate (0.128 GB/s on links
         * that carry 0.119). */
        if (!rc)
            rc = tcomm_max_double(c, &t[k]);
    }
    if (!rc && c->info.rank == 0) {
        l->alpha_s = t[0];
        l->bw_Bps = t[1] > t[0] ? flows * (double)big / (t[1] - t[0]) : 1e12;
    }
    return rc;
}

/* The fp32 add the algorithms run per received chunk, and the fp16 casts,
 * timed on every rank at once (rank 0's figures are kept): in a ring step
 * all ranks add at once, so they share the cores and the memory as here.
 * a holds 2n floats. */
static tcomm_rc _measure_kernels(tcomm_t *c, float *a, size_t n)
{
    tcomm_rc rc = _barrier(c);
    if (rc)
        return rc;
    double t0 = tcomm_wtime();
    for (int i = 0; i < _KERNEL_PASSES; i++)
        tc_decode_add(TCOMM_WIRE_FP32, a + n, a, n);
    double t = tcomm_wtime() - t0;
    if (t > 0)
        c->model.reduce_Bps = (double)_KERNEL_PASSES * (double)n * 4 / t;
    _probe_casts(c, a, n);
    return TCOMM_OK;
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
    if (intra > 0 && (c->info.rank == 0 || c->info.rank == intra))
        rc = _measure_node(c, intra, buf, big, &c->model.link[TORUS_LINK_NODE]);
    if (!rc && inter > 0)
        rc =
            _measure_nodes(c, nodes, buf, big, &c->model.link[TORUS_LINK_LEAF]);
    if (inter < 0 && c->info.rank == 0) /* one node: no inter links to use */
        c->model.link[TORUS_LINK_LEAF] = c->model.link[TORUS_LINK_NODE];
    if (!rc)
        rc = _measure_kernels(c, buf, big / 8);
    if (!rc)
        rc = tcomm_bcast_bytes(c, &c->model, sizeof c->model, 0);
    free(nodes);
    free(buf);
    return rc;
}
