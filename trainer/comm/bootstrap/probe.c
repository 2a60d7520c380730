/* bootstrap/probe.c: measure the cost model's link parameters at start-up. Rank
 * 0 ping-pongs a small and a large message with one rank on its own node and
 * one on another node, and times its fp32 reduce loop; the numbers are
 * broadcast so that every rank's hybrid choice is identical. About 0.1 s. */
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

static tcomm_rc _measure(tcomm_t *c, int peer, void *buf, size_t big,
                         tcomm_link *l)
{
    double small_rtt, big_rtt;
    tcomm_rc rc = _pingpong(c, peer, buf, 8, 50, &small_rtt);
    if (!rc)
        rc = _pingpong(c, peer, buf, big, 4, &big_rtt);
    if (!rc && c->info.rank == 0) {
        l->alpha_s = small_rtt / 2;
        double t = big_rtt / 2 - l->alpha_s;
        l->bw_Bps = t > 0 ? (double)big / t : 1e12;
    }
    return rc;
}

tcomm_rc tcomm_probe_links(tcomm_t *c)
{
    tcomm_rc rc = TCOMM_OK;
    const size_t big = 4 << 20;
    if (c->singleton || c->info.size == 1)
        return TCOMM_OK;
    int *nodes = malloc(sizeof(int) * (size_t)c->info.size);
    void *buf = malloc(big);
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
    memset(buf, 1, big);
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
        rc = _measure(c, intra, buf, big, &c->model.link[TORUS_LINK_NODE]);
    if (!rc && inter > 0 && (c->info.rank == 0 || c->info.rank == inter))
        rc = _measure(c, inter, buf, big, &c->model.link[TORUS_LINK_LEAF]);
    if (inter < 0 && c->info.rank == 0) /* one node: no inter links to use */
        c->model.link[TORUS_LINK_LEAF] = c->model.link[TORUS_LINK_NODE];
    if (!rc)
        rc = tcomm_bcast_bytes(c, &c->model, sizeof c->model, 0);
    free(nodes);
    free(buf);
    return rc;
}
