/* test_comm_model.c: properties of libtcomm's alpha-beta cost model that
 * must hold whatever the parameters: the 2D schedule's inter-node traffic
 * meets the link limit 2(N-1)/N * S / B exactly, a grid of one row is the
 * ring, latency-bound messages prefer few steps, layouts an algorithm
 * cannot run on are refused, time grows with size, gradients summed in
 * place in shared memory are priced as such only where that path runs, a
 * 16-bit wire's casts cost what the probed convert rate says, and hybrid
 * runs fp32 on one node where the wire loses (and keeps it across nodes).
 * Also the probe's ring over the nodes, which measures the links the model
 * prices: every node in it, each rank's peers on its neighbour nodes; and
 * theta auto's choice with a measured cost per bucket on top of the
 * model's prices. And the bucket plan (fusion/plan.h): the routes it
 * resolves once at seal are what the per-step pick chose before, on the
 * emulated cluster's shapes and others, for the host and the NCCL
 * buckets. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "trainer/comm/bootstrap/bootstrap.h"
#include "trainer/comm/core/comm.h"
#include "trainer/comm/core/model.h"
#include "trainer/comm/fusion/plan.h"
#include "trainer/comm/fusion/theta.h"

static tcomm_model_params _cluster(int nodes, int q)
{
    tcomm_model_params m;
    tcomm_model_defaults(&m, nodes * q, q);
    m.rows = nodes;
    m.cols = q;
    m.group_size = q;
    return m;
}

START_TEST(test_link_limit)
{
    /* Bandwidth only, infinitely fast intra-node: torus2d with rows inside
     * nodes sends exactly the least a node must send. */
    tcomm_model_params m = _cluster(4, 2);
    m.link[TORUS_LINK_LEAF].alpha_s = m.link[TORUS_LINK_NODE].alpha_s = 0;
    m.link[TORUS_LINK_NODE].bw_Bps = m.reduce_Bps = m.convert_Bps = INFINITY;
    m.link[TORUS_LINK_LEAF].bw_Bps = 125e6; /* 1 Gbit/s */
    size_t n = 16u << 20;                   /* 64 MiB fp32 */
    double lim = tcomm_model_link_limit(&m, n, TCOMM_WIRE_FP32);
    ck_assert(fabs(lim - 2.0 * 3 / 4 * (64u << 20) / 125e6) < 1e-9);
    ck_assert(
        fabs(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP32) -
             lim) < 1e-9);
    ck_assert(
        fabs(tcomm_model_time(&m, TCOMM_ALGO_HIER_RS, n, TCOMM_WIRE_FP32) -
             lim) < 1e-9);
    /* The contiguous ring sends 2(P-1)/P S per node: more than the limit. */
    ck_assert(tcomm_model_time(&m, TCOMM_ALGO_RING, n, TCOMM_WIRE_FP32) >
              lim * 1.1);
    /* fp16 halves it; a second rail halves it again for the columns. */
    ck_assert(
        fabs(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16) -
             lim / 2) < 1e-9);
    m.rails = 2;
    ck_assert(
        fabs(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP32) -
             lim / 2) < 1e-9);
}
END_TEST

START_TEST(test_pipeline)
{
    /* Shared-memory rows, 1 Gbit/s columns: in pieces, the row stages
     * hide behind the column ring; never below either stage alone, and
     * messages under two pieces' worth are not cut at all. */
    tcomm_model_params m = _cluster(4, 2);
    m.shm = 1;
    m.link[TORUS_LINK_LEAF].bw_Bps = 125e6;
    m.link[TORUS_LINK_NODE].bw_Bps = 2e9;
    size_t n = 16u << 20;
    double t1 = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP32);
    double h1 = tcomm_model_time(&m, TCOMM_ALGO_HIER, n, TCOMM_WIRE_FP32);
    double small1 =
        tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, 1u << 19, TCOMM_WIRE_FP32);
    m.pipeline = 4;
    double t4 = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP32);
    double h4 = tcomm_model_time(&m, TCOMM_ALGO_HIER, n, TCOMM_WIRE_FP32);
    double lim = tcomm_model_link_limit(&m, n, TCOMM_WIRE_FP32);
    ck_assert(t4 < t1 && h4 < h1);
    ck_assert(t4 >= lim && h4 >= lim);
    ck_assert(fabs(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, 1u << 19,
                                    TCOMM_WIRE_FP32) -
                   small1) < 1e-12);
    /* In place too (shared_grads.c runs the same pieces): max(D, N + D/K)
     * of the sums D and the column ring N. */
    m.in_place = TCOMM_MODEL_INPLACE_ROWS;
    double i4 = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP32);
    m.pipeline = 1;
    double i1 = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP32);
    double D = 2 * (m.link[TORUS_LINK_NODE].alpha_s + 4.0 * n / m.reduce_Bps);
    ck_assert(i4 < i1 && i4 >= lim);
    ck_assert(fabs(i4 - ((i1 - D) + D / 4)) < 1e-12); /* N > D here */
    m.in_place = 0;
    m.pipeline = 4;
    /* The cut: 2 MiB pieces at least, at most `pipeline` of them, and ring
     * steps of 64 KiB at least (256 chunks: 16 MiB pieces). */
    ck_assert_int_eq(tcomm_model_pieces(32, 64.0 * (1 << 20), 8), 32);
    ck_assert_int_eq(tcomm_model_pieces(8, 64.0 * (1 << 20), 8), 8);
    ck_assert_int_eq(tcomm_model_pieces(32, 64.0 * (1 << 20), 256), 4);
    ck_assert_int_eq(tcomm_model_pieces(32, 3.0 * (1 << 20), 8), 1);
    ck_assert_int_eq(tcomm_model_pieces(1, 64.0 * (1 << 20), 8), 1);
    /* 16-bit wires pay their casts */
    m.convert_Bps = 1e9;
    double c1 = tcomm_model_time(&m, TCOMM_ALGO_RING, n, TCOMM_WIRE_FP16);
    m.convert_Bps = 1e12;
    ck_assert(tcomm_model_time(&m, TCOMM_ALGO_RING, n, TCOMM_WIRE_FP16) < c1);
}
END_TEST

START_TEST(test_one_row_is_ring)
{
    tcomm_model_params m = _cluster(1, 6);
    m.rows = 1;
    m.cols = 6;
    for (size_t n = 1; n < (1u << 24); n *= 7)
        ck_assert(
            fabs(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP32) -
                 tcomm_model_time(&m, TCOMM_ALGO_RING, n, TCOMM_WIRE_FP32)) <
            1e-12);
}
END_TEST

START_TEST(test_in_place)
{
    size_t n = 4u << 20;
    double F = 4.0 * (double)n;
    /* One node of 4, one row: two barriers and one read and one write of
     * every rank's F bytes in fp32; a 16-bit wire adds the round trip of
     * each rank's F/4 chunk through the wire's casts. */
    tcomm_model_params m = _cluster(1, 4);
    m.shm = 1;
    double packed =
        tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16);
    m.in_place = TCOMM_MODEL_INPLACE_ROWS;
    double t = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP32);
    ck_assert(fabs(t - 2 * (m.link[TORUS_LINK_NODE].alpha_s +
                            F / m.reduce_Bps)) < 1e-12);
    ck_assert(t < packed);
    ck_assert(
        fabs(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16) -
             (t + 2 * F / 4 / m.convert_Bps)) < 1e-12);

    /* 2 x 2 on one node, groups = rows of 2: the packed pick is not torus2d
     * (the case torus-bench --resnet50 showed), the in-place one is; each
     * bit prices only its own algorithm. */
    m = _cluster(1, 4);
    m.rows = m.cols = m.group_size = 2;
    m.shm = 1;
    double ring = tcomm_model_time(&m, TCOMM_ALGO_RING, n, TCOMM_WIRE_FP16);
    double hier = tcomm_model_time(&m, TCOMM_ALGO_HIER, n, TCOMM_WIRE_FP16);
    double rs = tcomm_model_time(&m, TCOMM_ALGO_HIER_RS, n, TCOMM_WIRE_FP16);
    double t2 = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16);
    ck_assert_int_ne(tcomm_model_best(&m, n, TCOMM_WIRE_FP16),
                     TCOMM_ALGO_TORUS2D);
    m.in_place = TCOMM_MODEL_INPLACE_ROWS;
    ck_assert_int_eq(tcomm_model_best(&m, n, TCOMM_WIRE_FP16),
                     TCOMM_ALGO_TORUS2D);
    ck_assert(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16) <
              t2);
    ck_assert(
        fabs(tcomm_model_time(&m, TCOMM_ALGO_HIER_RS, n, TCOMM_WIRE_FP16) -
             rs) < 1e-12);
    ck_assert(fabs(tcomm_model_time(&m, TCOMM_ALGO_RING, n, TCOMM_WIRE_FP16) -
                   ring) < 1e-12);
    ck_assert(fabs(tcomm_model_time(&m, TCOMM_ALGO_HIER, n, TCOMM_WIRE_FP16) -
                   hier) < 1e-12);
    m.in_place = TCOMM_MODEL_INPLACE_GROUPS;
    ck_assert_int_eq(tcomm_model_best(&m, n, TCOMM_WIRE_FP16),
                     TCOMM_ALGO_HIER_RS);
    ck_assert(
        fabs(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16) -
             t2) < 1e-12);

    /* Rows that span nodes, or no shared memory: no in-place path to price. */
    m = _cluster(2, 2);
    m.rows = 1;
    m.cols = 4;
    m.shm = 1;
    double span = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16);
    m.in_place = TCOMM_MODEL_INPLACE_ROWS;
    ck_assert(
        fabs(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16) -
             span) < 1e-12);
    m = _cluster(1, 4);
    double noshm = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16);
    m.in_place = TCOMM_MODEL_INPLACE_ROWS;
    ck_assert(
        fabs(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16) -
             noshm) < 1e-12);
}
END_TEST

START_TEST(test_latency_and_shapes)
{
    tcomm_model_params m = _cluster(512, 8);
    /* 4096 ranks, 4 bytes: few steps win; the 2(P-1)-step ring loses. */
    tcomm_algo b = tcomm_model_best(&m, 1, TCOMM_WIRE_FP32);
    ck_assert_int_ne(b, TCOMM_ALGO_RING);
    ck_assert(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, 1, TCOMM_WIRE_FP32) <
              tcomm_model_time(&m, TCOMM_ALGO_RING, 1, TCOMM_WIRE_FP32) / 5);
    /* Large messages: a two-level schedule beats the ring. */
    b = tcomm_model_best(&m, 1u << 26, TCOMM_WIRE_FP16);
    ck_assert(b == TCOMM_ALGO_TORUS2D || b == TCOMM_ALGO_HIER_RS ||
              b == TCOMM_ALGO_HIER);
    /* Time grows with size. */
    for (int a = TCOMM_ALGO_FLAT; a <= TCOMM_ALGO_TORUS2D; a++)
        ck_assert(tcomm_model_time(&m, a, 1000, TCOMM_WIRE_FP32) <
                  tcomm_model_time(&m, a, 1000000, TCOMM_WIRE_FP32));
    /* Layouts that cannot run are refused, and never chosen. */
    m.rows = 3; /* 3 x 8 != 4096 */
    ck_assert(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, 1000, TCOMM_WIRE_FP32) <
              0);
    m.group_size = 3; /* does not divide 4096 */
    ck_assert(tcomm_model_time(&m, TCOMM_ALGO_HIER_RS, 1000, TCOMM_WIRE_FP32) <
              0);
    b = tcomm_model_best(&m, 1u << 26, TCOMM_WIRE_FP16);
    ck_assert(b != TCOMM_ALGO_TORUS2D && b != TCOMM_ALGO_HIER_RS);
    /* One rank: nothing to do. */
    tcomm_model_params one = _cluster(1, 1);
    ck_assert(tcomm_model_time(&one, TCOMM_ALGO_RING, 1000, TCOMM_WIRE_FP32) ==
              0);
}
END_TEST

/* The wire's casts on a node: the in-place sum's round trip, priced per
 * byte at convert_Bps, and only with one row (with columns the ring rounds
 * and its casts are priced there). */
START_TEST(test_convert_term)
{
    size_t n = 4u << 20;
    double F = 4.0 * (double)n;
    tcomm_model_params m = _cluster(1, 4);
    m.shm = 1;
    m.in_place = TCOMM_MODEL_INPLACE_ROWS;
    double t32 = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP32);
    m.convert_Bps = 2e9;
    double slow = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16);
    m.convert_Bps = 8e9;
    double fast = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16);
    ck_assert(fabs(slow - t32 - 2 * F / 4 / 2e9) < 1e-12);
    ck_assert(fabs(fast - t32 - 2 * F / 4 / 8e9) < 1e-12);
    ck_assert(
        fabs(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_BF16) -
             fast) < 1e-12);
    /* 2 x 2: the in-place rows cast nothing; the column ring's casts are
     * its own (n-1 encodes, n decodes of its chunk of F/4). */
    m = _cluster(1, 4);
    m.rows = m.cols = 2;
    m.shm = 1;
    m.in_place = TCOMM_MODEL_INPLACE_ROWS;
    m.convert_Bps = 2e9;
    double c1 = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16);
    m.convert_Bps = 4e9;
    double c2 = tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, n, TCOMM_WIRE_FP16);
    ck_assert(fabs((c1 - c2) - 3 * F / 4 * (1 / 2e9 - 1 / 4e9)) < 1e-12);
}
END_TEST

/* A tcomm_t of 4 ranks on `nodes` nodes, rows inside a node, for the pick:
 * only what tc_hybrid_pick_wire reads (the model, the layout, whether the
 * row holds the members' blocks). */
static void _layout(tcomm_t *c, unsigned char **arena, int nodes)
{
    memset(c, 0, sizeof *c);
    c->info.size = 4;
    c->info.nnodes = nodes;
    c->info.groups_uniform = 1;
    tcomm_model_defaults(&c->model, 4, 4 / nodes);
    c->model.rows = nodes;
    c->model.cols = 4 / nodes;
    c->model.group_size = 4 / nodes;
    c->model.shm = 1;
    c->row.on_node = 1;
    c->row.size = 4 / nodes;
    c->row.arena = arena;
}

/* Hybrid's wire: on one node fp16 buys nothing in place, so fp32 runs
 * there; across nodes the wire stays what was asked for; fp32 asked for
 * stays fp32. */
START_TEST(test_pick_wire)
{
    unsigned char *blocks[4] = {0};
    static tcomm_t c;
    size_t n = 1u << 20;
    _layout(&c, blocks, 1);
    tcomm_wire w = TCOMM_WIRE_FP16;
    tcomm_algo a = tc_hybrid_pick_wire(&c, n, TCOMM_SHARED, &w);
    ck_assert_int_eq(w, TCOMM_WIRE_FP32);
    ck_assert_int_eq(a, TCOMM_ALGO_TORUS2D);
    /* The pick is the model's cheapest over both wires. */
    tcomm_model_params m = c.model;
    m.in_place = TCOMM_MODEL_INPLACE_ROWS;
    ck_assert(tcomm_model_time(&m, a, n, w) <
              tcomm_model_time(&m, tcomm_model_best(&m, n, TCOMM_WIRE_FP16), n,
                               TCOMM_WIRE_FP16));
    /* Casts for free: a tie keeps the wire asked for. */
    c.model.convert_Bps = INFINITY;
    w = TCOMM_WIRE_FP16;
    tc_hybrid_pick_wire(&c, n, TCOMM_SHARED, &w);
    ck_assert_int_eq(w, TCOMM_WIRE_FP16);
    w = TCOMM_WIRE_FP32;
    tc_hybrid_pick_wire(&c, n, TCOMM_SHARED, &w);
    ck_assert_int_eq(w, TCOMM_WIRE_FP32);
    /* Two nodes: the columns cross the network on the wire asked for,
     * however slow its casts. */
    _layout(&c, blocks, 2);
    c.model.convert_Bps = 1e6;
    w = TCOMM_WIRE_BF16;
    tc_hybrid_pick_wire(&c, n, TCOMM_SHARED, &w);
    ck_assert_int_eq(w, TCOMM_WIRE_BF16);
}
END_TEST

/* ---- the bucket plan against the per-step pick it replaced ---- */

/* A tcomm_t of P ranks on `nodes` nodes (rows and groups: a node's ranks),
 * with what the route reads; arena: the members' shared blocks (NULL:
 * none). 1 Gbit/s between nodes, as the emulated cluster shapes them. */
static void _grid(tcomm_t *c, int P, int nodes, unsigned char **arena)
{
    int q = P / nodes;
    memset(c, 0, sizeof *c);
    c->info.size = P;
    c->info.nnodes = nodes;
    c->info.ngroups = nodes;
    c->info.groups_uniform = 1;
    c->model = _cluster(nodes, q);
    c->model.shm = 1;
    c->model.link[TORUS_LINK_LEAF].bw_Bps = 125e6;
    c->model.link[TORUS_LINK_LEAF].alpha_s = 60e-6;
    c->thread_multiple = 1;
    c->pipeline = 32;
    c->row.on_node = c->group.on_node = 1;
    c->row.all_on_node = c->group.all_on_node = 1;
    c->row.size = c->group.size = q;
    c->row.arena = c->group.arena = arena;
}

/* What tcomm_allreduce_segs ran for a bucket before the plan: hybrid's
 * pick of algorithm and wire, the way its pieces took, the pipeline's
 * pieces that hier.c / torus2d.c / shared_grads.c cut. */
static tc_route _per_step(const tcomm_t *c, size_t count, int nsegs,
                          tcomm_algo algo, tcomm_wire wire, unsigned flags)
{
    tc_route r = {0};
    if (algo == TCOMM_ALGO_HYBRID)
        algo = tc_hybrid_pick_wire(c, count, flags, &wire);
    const tc_group *rows =
        algo == TCOMM_ALGO_TORUS2D                             ? &c->row
        : algo == TCOMM_ALGO_HIER_RS && c->info.groups_uniform ? &c->group
                                                               : NULL;
    int in_place = count > 0 && tc_shared_in_place(rows, flags);
    r.algo = algo;
    r.wire = wire;
    if (nsegs == 1 && !in_place)
        r.path = TC_PATH_SENT;
    else if (in_place)
        r.path = TC_PATH_IN_PLACE;
    else if (rows && rows->on_node && count > 0)
        r.path = TC_PATH_ON_NODE;
    else
        r.path = TC_PATH_PACKED;
    r.pieces = tc_pipeline_pieces(c, count * tcomm_wire_bytes(wire),
                                  algo == TCOMM_ALGO_HIER ? c->info.ngroups
                                                          : c->info.size);
    return r;
}

/* ResNet-50's gradients in backward order, roughly: per bottleneck block
 * three convolutions and their batch-norm pairs, stage by stage, then the
 * stem; fc last in forward, so first here. addr: a grads arena of fake
 * addresses (never read) in forward order, 64-byte aligned, for spans. */
static int _resnet50(tc_plan *p)
{
    static const int width[4] = {64, 128, 256, 512}, blocks[4] = {3, 4, 6, 3};
    size_t cnt[200];
    int n = 0;
    cnt[n++] = 1000 * 2048 + 1000;
    for (int s = 3; s >= 0; s--)
        for (int b = blocks[s] - 1; b >= 0; b--) {
            size_t w = (size_t)width[s], in = b ? 4 * w : (s ? 2 * w : 64);
            size_t k[9] = {4 * w,     4 * w, w * 4 * w, w,     w,
                           9 * w * w, w,     w,         in * w};
            for (int j = 0; j < 9; j++)
                cnt[n++] = k[j];
        }
    cnt[n++] = 64;
    cnt[n++] = 64;
    cnt[n++] = 64 * 3 * 49;
    uintptr_t at = 1 << 20;
    memset(p, 0, sizeof *p);
    for (int i = n - 1; i >= 0; i--) { /* forward order in memory */
        ck_assert_int_eq(tc_plan_add(p, (void *)at, cnt[i]), TCOMM_OK);
        at += (cnt[i] * 4 + 63) / 64 * 64;
    }
    /* Registered in backward order: reverse what was added. */
    for (int i = 0, j = p->nt - 1; i < j; i++, j--) {
        uintptr_t a = p->addr[i];
        size_t k = p->count[i];
        p->addr[i] = p->addr[j], p->count[i] = p->count[j];
        p->addr[j] = a, p->count[j] = k;
    }
    return n;
}

START_TEST(test_plan_routes)
{
    static const int shape[][2] = {{8, 4}, {8, 2}, {8, 1},  {4, 2},
                                   {4, 1}, {2, 2}, {16, 4}, {6, 3}};
    static const size_t thetas[] = {30000,   256 << 10, 1 << 20,
                                    4 << 20, 16 << 20,  64 << 20};
    static const tcomm_algo algos[] = {TCOMM_ALGO_HYBRID, TCOMM_ALGO_TORUS2D,
                                       TCOMM_ALGO_HIER_RS, TCOMM_ALGO_HIER};
    static unsigned char *blocks[16];
    static tcomm_t c;
    tc_plan p;
    _resnet50(&p);
    int checked = 0, fp32 = 0, in_place = 0;
    for (size_t s = 0; s < sizeof shape / sizeof shape[0]; s++)
        for (int sh = 0; sh < 2; sh++) {
            _grid(&c, shape[s][0], shape[s][1], sh ? blocks : NULL);
            unsigned flags = TCOMM_AVERAGE | (sh ? TCOMM_SHARED : 0);
            for (size_t t = 0; t < sizeof thetas / sizeof thetas[0]; t++) {
                ck_assert_int_eq(tc_plan_cut(&p, thetas[t]), TCOMM_OK);
                ck_assert_int_eq(tc_plan_spans(&p, NULL), TCOMM_OK);
                for (int a = 0; a < 4; a++)
                    for (int w = 0; w < TCOMM_WIRE_COUNT; w++) {
                        tc_plan_route(&p, &c, algos[a], w, flags,
                                      TC_ROUTE_SEGS);
                        for (int b = 0; b < p.nb; b++) {
                            const tc_route *r = &p.b[b].route;
                            tc_route e = _per_step(&c, p.b[b].count, p.b[b].n,
                                                   algos[a], w, flags);
                            ck_assert_msg(
                                r->algo == e.algo && r->wire == e.wire &&
                                    r->path == e.path && r->pieces == e.pieces,
                                "P=%d nodes=%d theta=%zu %s %s bucket %d: "
                                "plan %s/%s/%s/%d, per step %s/%s/%s/%d",
                                shape[s][0], shape[s][1], thetas[t],
                                tcomm_algo_name(algos[a]), tcomm_wire_name(w),
                                b, tcomm_algo_name(r->algo),
                                tcomm_wire_name(r->wire), tc_path_name(r->path),
                                r->pieces, tcomm_algo_name(e.algo),
                                tcomm_wire_name(e.wire), tc_path_name(e.path),
                                e.pieces);
                            tcomm_model_params m = c.model;
                            m.in_place = r->path == TC_PATH_IN_PLACE
                                             ? TCOMM_MODEL_INPLACE_ROWS |
                                                   TCOMM_MODEL_INPLACE_GROUPS
                                             : 0;
                            if (r->path == TC_PATH_IN_PLACE)
                                ck_assert(r->predict_s ==
                                          tcomm_model_time(&m, r->algo,
                                                           p.b[b].count,
                                                           r->wire));
                            fp32 += w != TCOMM_WIRE_FP32 &&
                                    r->wire == TCOMM_WIRE_FP32;
                            in_place += r->path == TC_PATH_IN_PLACE;
                            checked++;
                        }
                        /* The NCCL buckets: hybrid over each span's
                         * floats (alignment gaps included), wire kept. */
                        tc_plan_route(&p, &c, algos[a], w, flags,
                                      TC_ROUTE_NCCL);
                        for (int b = 0; b < p.nb; b++) {
                            size_t span = (p.b[b].hi - p.b[b].lo) / 4;
                            tcomm_algo e = algos[a] == TCOMM_ALGO_HYBRID
                                               ? tc_hybrid_pick(&c, span, w, 0)
                                               : algos[a];
                            ck_assert_int_eq(p.b[b].route.algo, e);
                            ck_assert_int_eq(p.b[b].route.wire, w);
                            ck_assert_int_eq(p.b[b].route.path, TC_PATH_DEVICE);
                        }
                    }
            }
        }
    /* The grid covered what matters: hybrid took fp32 somewhere (one
     * node) and buckets were summed in place. */
    ck_assert_int_gt(checked, 10000);
    ck_assert_int_gt(fp32, 0);
    ck_assert_int_gt(in_place, 0);
    char line[256];
    _grid(&c, 8, 4, blocks);
    ck_assert_int_eq(tc_plan_cut(&p, 4 << 20), TCOMM_OK);
    tc_plan_route(&p, &c, TCOMM_ALGO_TORUS2D, TCOMM_WIRE_FP16, TCOMM_SHARED,
                  TC_ROUTE_SEGS);
    tc_plan_text(&p, line, sizeof line);
    char want[64];
    snprintf(want, sizeof want,
             "%d buckets: 0-%d torus2d/fp16 in-place; "
             "predicted ",
             p.nb, p.nb - 1);
    ck_assert_msg(strncmp(line, want, strlen(want)) == 0, "%s", line);
    /* Cut short, never past the buffer; the length in full returned. */
    int full = (int)strlen(line);
    ck_assert_int_eq(tc_plan_text(&p, line, 8), full);
    ck_assert_uint_eq(strlen(line), 7);
    tc_plan_free(&p);
}
END_TEST

/* The probe's ring over the nodes: node order, index on the node, the
 * ranks that sit out. */
START_TEST(test_probe_ring)
{
    /* Nodes in order of first rank: 5, 9, 7 (7 has a third rank, which
     * sits out: 2 flows). */
    const int nodes[] = {5, 5, 9, 9, 7, 7, 7};
    const int want[7][2] = {{2, 4}, {3, 5}, {4, 0},  {5, 1},
                            {0, 2}, {1, 3}, {-1, -1}};
    for (int r = 0; r < 7; r++) {
        int next, prev, flows;
        ck_assert_int_eq(tc_probe_ring(nodes, 7, r, &next, &prev, &flows),
                         TCOMM_OK);
        ck_assert_int_eq(flows, 2);
        ck_assert_int_eq(next, want[r][0]);
        ck_assert_int_eq(prev, want[r][1]);
    }
    /* Ranks of two nodes interleaved (cyclic placement): peers by index
     * on the node, not by rank number; with two nodes next is prev. */
    const int cyc[] = {1, 2, 1, 2};
    const int cwant[4] = {1, 0, 3, 2};
    for (int r = 0; r < 4; r++) {
        int next, prev, flows;
        ck_assert_int_eq(tc_probe_ring(cyc, 4, r, &next, &prev, &flows),
                         TCOMM_OK);
        ck_assert_int_eq(flows, 2);
        ck_assert_int_eq(next, cwant[r]);
        ck_assert_int_eq(prev, cwant[r]);
    }
    /* One node: no ring. */
    const int one[] = {4, 4};
    int next, prev, flows;
    ck_assert_int_eq(tc_probe_ring(one, 2, 1, &next, &prev, &flows), TCOMM_OK);
    ck_assert_int_eq(next, -1);
    ck_assert_int_eq(prev, -1);
}
END_TEST

/* theta auto: a cost per bucket measured beyond the model makes small
 * buckets dearer, so the choice grows with it; the rule holds for the
 * numbers it prints, which name the measured cost. */
START_TEST(test_theta_extra)
{
    static tcomm_t c;
    _layout(&c, NULL, 2);
    tc_plan p = {0};
    for (int i = 0; i < 64; i++) /* 64 MiB of fp32 gradients, 1 MiB each */
        ck_assert_int_eq(tc_plan_add(&p, NULL, (size_t)1 << 18), TCOMM_OK);
    size_t t0 = 0, t1 = 0, t2 = 0;
    char why[1024];
    ck_assert_int_eq(tc_theta_pick(&c, &p, TCOMM_ALGO_RING, TCOMM_WIRE_FP32,
                                   0.0, &t0, why, sizeof why),
                     TCOMM_OK);
    ck_assert_ptr_nonnull(strstr(why, "0.00 ms a bucket measured"));
    ck_assert_int_eq(tc_theta_pick(&c, &p, TCOMM_ALGO_RING, TCOMM_WIRE_FP32,
                                   0.002, &t1, why, sizeof why),
                     TCOMM_OK);
    ck_assert_ptr_nonnull(strstr(why, "2.00 ms a bucket measured"));
    ck_assert_int_eq(tc_theta_pick(&c, &p, TCOMM_ALGO_RING, TCOMM_WIRE_FP32,
                                   0.05, &t2, why, sizeof why),
                     TCOMM_OK);
    ck_assert_uint_lt(t0, t1);
    ck_assert_uint_lt(t1, t2);
    /* The chosen cut: its buckets within 10% of the whole, each paying
     * the 50 ms, and the whole paying it once. */
    const tcomm_algo a = TCOMM_ALGO_RING;
    const tcomm_wire w = TCOMM_WIRE_FP32;
    double whole = tcomm_predict(&c, a, 64u << 18, w) + 0.05, sum = 0;
    for (int b = 0; b < p.nb; b++)
        sum += tcomm_predict(&c, a, p.b[b].count, w) + 0.05;
    ck_assert(sum <= 1.1 * whole || t2 == TC_THETA_MAX);
    ck_assert_ptr_nonnull(strstr(why, "the smallest power of two"));
    tc_plan_free(&p);
}
END_TEST

/* theta auto at its cap: 128 MiB of gradients and a second a bucket, so
 * even 64 MiB buckets (two) cost far over 10% more than one all-reduce;
 * the choice is 64 MiB and the sentence says the rule went unmet (it had
 * claimed "the smallest power of two ... within 10%": CI, 2026-12-03). */
START_TEST(test_theta_cap)
{
    static tcomm_t c;
    _layout(&c, NULL, 2);
    tc_plan p = {0};
    for (int i = 0; i < 128; i++)
        ck_assert_int_eq(tc_plan_add(&p, NULL, (size_t)1 << 18), TCOMM_OK);
    size_t t = 0;
    char why[1024];
    ck_assert_int_eq(tc_theta_pick(&c, &p, TCOMM_ALGO_RING, TCOMM_WIRE_FP32,
                                   1.0, &t, why, sizeof why),
                     TCOMM_OK);
    ck_assert_uint_eq(t, TC_THETA_MAX);
    ck_assert_int_eq(p.nb, 2);
    ck_assert_ptr_null(strstr(why, "the smallest power of two"));
    ck_assert_ptr_nonnull(strstr(why, "the largest size auto takes: no power "
                                      "of two from 256 to 65536 KiB"));
    tc_plan_free(&p);
}
END_TEST

/* theta auto's trial: 1, 4 and 16 MiB and the model's proposal, each once
 * and ascending; the smallest size within 0.5% of the least time is kept. */
static void _check_candidates(size_t proposal, int n, const size_t *want)
{
    size_t got[TC_THETA_TRIALS];
    ck_assert_int_eq(tc_theta_candidates(proposal, got), n);
    for (int k = 0; k < n; k++)
        ck_assert_uint_eq(got[k], want[k]);
}

START_TEST(test_theta_trial)
{
    const size_t K = 1024, M = K * K;
    _check_candidates(256 * K, 4, (size_t[]){256 * K, M, 4 * M, 16 * M});
    _check_candidates(M, 3, (size_t[]){M, 4 * M, 16 * M});
    _check_candidates(4 * M, 3, (size_t[]){M, 4 * M, 16 * M});
    _check_candidates(8 * M, 4, (size_t[]){M, 4 * M, 8 * M, 16 * M});
    _check_candidates(64 * M, 4, (size_t[]){M, 4 * M, 16 * M, 64 * M});
    ck_assert_int_eq(tc_theta_keep((double[]){3, 1, 2}, 3), 1);
    ck_assert_int_eq(tc_theta_keep((double[]){2, 3, 1.5, 4}, 4), 2);
    ck_assert_int_eq(tc_theta_keep((double[]){5, 4, 4}, 3), 1);
    ck_assert_int_eq(tc_theta_keep((double[]){7}, 1), 0);
    /* Within 0.5% of the fastest, the smaller size is kept; not beyond. */
    ck_assert_int_eq(tc_theta_keep((double[]){9, 1.004, 1, 1.001}, 4), 1);
    ck_assert_int_eq(tc_theta_keep((double[]){9, 1.015, 1, 1.01}, 4), 2);
    ck_assert_int_eq(tc_theta_keep((double[]){1.03, 1}, 2), 1);
}
END_TEST

/* A link whose first pass at each bucket size costs 36 ms more (what only
 * that size uses is set up then), with warm times per size; fail_at > 0:
 * the fail_at-th pass fails. */
typedef struct {
    size_t size[TC_THETA_TRIALS];
    double warm[TC_THETA_TRIALS];
    int used[TC_THETA_TRIALS], passes, fail_at;
} _cold_link;

static tcomm_rc _cold_pass(void *ctx, size_t theta, double *secs)
{
    _cold_link *l = ctx;
    int k = 0;
    while (l->size[k] != theta)
        k++;
    if (++l->passes == l->fail_at)
        return TCOMM_ERR_TIMEOUT;
    *secs = l->warm[k] + (l->used[k]++ ? 0 : 0.036);
    return TCOMM_OK;
}

/* The trial times every size warm: the first size, cold, once looked 13
 * times slower than it runs, so the smallest could never be kept. */
START_TEST(test_theta_trial_warm)
{
    const size_t M = 1 << 20;
    _cold_link l = {.size = {M, 2 * M, 4 * M, 16 * M},
                    .warm = {0.00300, 0.00324, 0.0035, 0.004}};
    double secs[TC_THETA_TRIALS];
    ck_assert_int_eq(tc_theta_time(l.size, 4, _cold_pass, &l, secs), TCOMM_OK);
    for (int k = 0; k < 4; k++)
        ck_assert_double_eq(secs[k], l.warm[k]);
    ck_assert_int_eq(tc_theta_keep(secs, 4), 0);
    ck_assert_int_eq(l.passes, 8); /* two passes a size */
    /* A failing pass stops the trial with its code. */
    _cold_link f = {.size = {M, 4 * M, 16 * M}, .fail_at = 3};
    ck_assert_int_eq(tc_theta_time(f.size, 3, _cold_pass, &f, secs),
                     TCOMM_ERR_TIMEOUT);
    ck_assert_int_eq(f.passes, 3);
}
END_TEST

/* theta auto has nothing to choose where every size from 256 KiB to 64
 * MiB cuts the gradients alike: a small model (one bucket) or tensors of
 * 64 MiB and more (one bucket each); ResNet-like sizes it does, and so do
 * cuts that differ only in where they fall (384+128+384 KiB: two buckets
 * at 256 KiB and at 512 KiB, split at other tensors). */
static int _uniform(int n, const size_t *kib)
{
    tc_plan p = {0};
    int same = -1;
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(tc_plan_add(&p, NULL, kib[i] << 8), TCOMM_OK);
    ck_assert_int_eq(tc_theta_uniform(&p, &same), TCOMM_OK);
    tc_plan_free(&p);
    return same;
}

/* Waits nap where the ranks sharing a kernel outnumber their CPUs: the
 * ranks with rank's kernel id are counted, and the union of their CPU
 * sets (8 ranks of an emulated cluster on CPUs 0-1; 4 ranks of a real
 * node, each bound to its own 2 CPUs; another machine's ranks apart). */
START_TEST(test_host_share)
{
    tc_host h[12];
    memset(h, 0, sizeof h);
    for (int r = 0; r < 12; r++) {
        strcpy(h[r].kernel, r < 8 ? "a1b2" : "c3d4");
        CPU_ZERO(&h[r].cpus);
        if (r < 8) {
            CPU_SET(0, &h[r].cpus);
            CPU_SET(1, &h[r].cpus);
        } else {
            CPU_SET(2 * (r - 8), &h[r].cpus);
            CPU_SET(2 * (r - 8) + 1, &h[r].cpus);
        }
    }
    int ranks, cpus;
    tc_host_share(h, 12, 3, &ranks, &cpus);
    ck_assert_int_eq(ranks, 8);
    ck_assert_int_eq(cpus, 2);
    tc_host_share(h, 12, 10, &ranks, &cpus);
    ck_assert_int_eq(ranks, 4);
    ck_assert_int_eq(cpus, 8);
}
END_TEST

START_TEST(test_theta_uniform)
{
    ck_assert_int_eq(_uniform(3, (size_t[]){100, 20, 130}), 1);
    ck_assert_int_eq(_uniform(3, (size_t[]){65536, 65536, 70000}), 1);
    ck_assert_int_eq(_uniform(1, (size_t[]){1}), 1);
    size_t mib[64];
    for (int i = 0; i < 64; i++)
        mib[i] = 1024;
    ck_assert_int_eq(_uniform(64, mib), 0);
    ck_assert_int_eq(_uniform(3, (size_t[]){384, 128, 384}), 0);
    ck_assert_int_eq(_uniform(2, (size_t[]){300, 65536}), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_model");
    TCase *t = tcase_create("model");
    tcase_add_test(t, test_link_limit);
    tcase_add_test(t, test_pipeline);
    tcase_add_test(t, test_one_row_is_ring);
    tcase_add_test(t, test_latency_and_shapes);
    tcase_add_test(t, test_in_place);
    tcase_add_test(t, test_convert_term);
    tcase_add_test(t, test_pick_wire);
    tcase_add_test(t, test_plan_routes);
    tcase_add_test(t, test_probe_ring);
    tcase_add_test(t, test_theta_extra);
    tcase_add_test(t, test_theta_cap);
    tcase_add_test(t, test_theta_trial);
    tcase_add_test(t, test_theta_trial_warm);
    tcase_add_test(t, test_theta_uniform);
    tcase_add_test(t, test_host_share);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
