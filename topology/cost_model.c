/* topology/cost_model.c: the alpha-beta model of torus's all-reduce
 * schedules, the one both the layout library and libtcomm price with.
 *
 * Ranks are laid out contiguously, ranks_per_node (q) to a node, N = P/q
 * nodes, leaf_ranks to a leaf switch. A ring whose members cover a block of
 * `covered` contiguous ranks runs on the slowest class it crosses: node when
 * the block fits one node, leaf when it fits one leaf (aligned: leaf_ranks
 * is a multiple of the block), cross (the spine) otherwise. A ring step moves
 * one chunk over every edge at once: alpha + chunk * share / bw, where share
 * = ceil(flows / rails) counts the ring's edges that leave one node together.
 * Reduction costs chunk / reduce_Bps per step.
 *
 *   ring (world, contiguous): 2(P-1) steps of S/P; one edge leaves a node.
 *   flat (MPI's own):  min(recursive doubling log2 P * (alpha + S/bw),
 *                      Rabenseifner) -- what OpenMPI 4.1's tuned module
 *                      picks between. Rabenseifner halves the vector with
 *                      the partner P/2 away first: with contiguous ranks the
 *                      big first halves cross nodes from every rank of a node
 *                      at once (measured: 1.68 s against 0.84 s for 64 MiB
 *                      on 4 x 2 ranks).
 *   hier (group g):    2(g-1) in-group steps of S/g twice (reduce-scatter +
 *                      gather, scatter + all-gather), then 2(G-1) leader
 *                      steps of S/G.
 *   torus2d (R x C):   2(C-1) row steps of S/C, 2(R-1) column steps of
 *                      S/(RC); all C columns cross at once, so a node's
 *                      edges share its rails: share = ceil(min(C,q)/rails).
 *   hier-rs:           torus2d with rows = groups of g, columns = G groups.
 *
 * With shm, a row inside a node reduce-scatters (all-gathers) in shared
 * memory: one alpha per phase, not C-1 (trainer/comm/transport/shm.c). MPI's
 * own all-reduce on a 16-bit wire runs our user op, a scalar pairwise loop: its
 * reduce rate is a tenth of ours. 16-bit wires also pay the casts: a ring
 * encodes every chunk it sends in the reduce-scatter and decodes the whole
 * message after the all-gather.
 *
 * Pipelining (trainer/comm/algo/pipeline.c): with K pieces the network stage N
 * overlaps the node stages D on another thread: max(D, N + D/K), not N + D.
 *
 * In place (trainer/comm/algo/shared_grads.c): a row inside a node has each
 * member sum its 1/C chunk straight from every member's gradients and write
 * the result into all of them: two barriers and one read and one write of
 * every rank's F fp32 bytes; the column ring runs on the chunk in between.
 * With one row and a 16-bit wire each rank also rounds its F/C chunk to the
 * wire (a cast there and back, 2 F/C / convert_Bps): what the wire costs on
 * a node, where it saves no link bytes (so fp32 is cheaper there). */
#include "config.h"

#include <math.h>

#include "topology/torus_cost.h"

static int _nodes(const torus_cost_t *m)
{
    int q = m->ranks_per_node < m->P ? m->ranks_per_node : m->P;
    return (m->P + q - 1) / q;
}

static int _rails(const torus_cost_t *m)
{
    return m->rails > 0 ? m->rails : 1;
}

/* The class of a ring whose members cover `covered` contiguous ranks,
 * starting at a multiple of `covered`. */
static torus_cost_link_class _class(const torus_cost_t *m, long covered)
{
    if (covered <= m->ranks_per_node || _nodes(m) <= 1)
        return TORUS_LINK_NODE;
    if (m->leaf_ranks <= 0 || m->leaf_ranks % covered == 0)
        return TORUS_LINK_LEAF;
    return TORUS_LINK_CROSS;
}

/* The class of the hop to a partner `d` ranks away (d >= ranks_per_node
 * leaves the node; d >= leaf_ranks leaves the leaf). */
static torus_cost_link_class _partner(const torus_cost_t *m, long d)
{
    if (d < m->ranks_per_node)
        return TORUS_LINK_NODE;
    if (m->leaf_ranks <= 0 || d < m->leaf_ranks)
        return TORUS_LINK_LEAF;
    return TORUS_LINK_CROSS;
}

/* One ring of n members, each `span` contiguous ranks apart; flows = edges
 * leaving a node at once when the ring crosses nodes. */
static double _ring(const torus_cost_t *m, int n, int span, double chunk_bytes,
                    double fp32_chunk, int steps_per_member, int flows,
                    int conv)
{
    if (n <= 1)
        return 0.0;
    torus_cost_link_class k = _class(m, (long)span * n);
    const torus_cost_link_t *l = &m->link[k];
    double share = k == TORUS_LINK_NODE ? 1.0 : ceil((double)flows / _rails(m));
    double step = l->alpha_s + chunk_bytes * share / l->bw_Bps;
    /* 16-bit: n-1 chunks encoded to send, the whole message decoded */
    double cast = conv ? (2.0 * n - 1) * fp32_chunk / m->convert_Bps : 0.0;
    return (double)steps_per_member * (n - 1) * step +
           (double)(n - 1) * fp32_chunk / m->reduce_Bps + cast;
}

int torus_cost_pieces(int pipeline, double wire_bytes, int parts)
{
    /* Pieces of fewer than 2 MiB are not worth their extra ring steps
     * (netns.sh: 64 pieces of 1 MiB were 3% slower than 32 of 2 MiB), nor
     * pieces whose ring steps move less than 64 KiB: every piece's ring
     * pays its 2(R-1) step latencies again, and 64 KiB is about one alpha
     * on a 100 Gbit/s fabric. On 64 nodes of 4 ranks that keeps 64 MiB in
     * pieces of 16 MiB. */
    double least = fmax(2 << 20, (double)parts * (64 << 10));
    double most = floor(wire_bytes / least);
    if (pipeline < 2 || most < 2)
        return 1;
    return most < pipeline ? (int)most : pipeline;
}

/* Node stages D and network stage N, in K pieces when pipelined. The
 * pieces' extra ring steps cost no extra alphas: the rings stream, so a
 * step's start overlaps the previous one's tail (measured on the emulated
 * cluster: 8 pieces no slower than 4 or 1). */
static double _overlap(double D, double N, int K)
{
    if (K <= 1)
        return D + N;
    return D > N + D / K ? D : N + D / K;
}

/* A row of C inside a node, in shared memory: bytes move at memory speed
 * (the probed reduce rate streams memory too), not at the node link's
 * message rate, which pays copy-in/copy-out and a handshake per step. */
static double _shm_row(const torus_cost_t *m, int C, double S, double F,
                       int conv)
{
    const double alpha = m->link[TORUS_LINK_NODE].alpha_s;
    return 2 * (alpha + (C - 1.0) / C * S / m->reduce_Bps) +
           (C - 1.0) / C * F / m->reduce_Bps +
           (conv ? 2 * F / m->convert_Bps : 0.0);
}

static double _two_level(const torus_cost_t *m, int C, int R, double S,
                         double F, int conv, int in_place)
{
    int q = m->ranks_per_node;
    int flows = C < q ? C : q;
    /* Rows: C contiguous ranks; one edge per node leaves it when a row
     * spans nodes. Columns: members C ranks apart. */
    double row = _ring(m, C, 1, S / C, F / C, 2, 1, conv);
    double col = _ring(m, R, C, S / ((double)C * R), F / ((double)C * R), 2,
                       flows, conv);
    bool in_node_shm = m->shm && C > 1 && C <= q;
    if (in_place && in_node_shm) {
        /* The sum is fp32. With one row it is rounded to a 16-bit wire
         * once: each rank casts its chunk there and back. With columns the
         * ring's all-gather has rounded it already. */
        double round = conv && R == 1 ? 2 * F / C / m->convert_Bps : 0.0;
        double sum =
            2 * (m->link[TORUS_LINK_NODE].alpha_s + F / m->reduce_Bps) + round;
        /* Large buckets run in pieces, as the packed rows do
         * (trainer/comm/algo/shared_grads.c). */
        return R > 1
                   ? _overlap(sum, col, torus_cost_pieces(m->pipeline, S, m->P))
                   : sum + col;
    }
    if (in_node_shm) {
        row = _shm_row(m, C, S, F, conv);
        /* Only shared-memory rows run pipelined (trainer/comm/algo/torus2d.c).
         */
        if (R > 1)
            return _overlap(row, col, torus_cost_pieces(m->pipeline, S, m->P));
    }
    return row + col;
}

/* OpenMPI's recursive-halving reduce-scatter + recursive-doubling
 * all-gather (tuned allreduce algorithm 6), farthest partner first. */
static double _rabenseifner(const torus_cost_t *m, double S, double F,
                            double reduce_Bps)
{
    int P = m->P, q = m->ranks_per_node, pof2 = 1;
    while (pof2 * 2 <= P)
        pof2 *= 2;
    double t = 0;
    /* The fold is priced as a hop between nodes even on one node, as the
     * model was measured against (OpenMPI pairs ranks for it). */
    const torus_cost_link_t *fold =
        &m->link[m->leaf_ranks > 0 && m->leaf_ranks < P ? TORUS_LINK_CROSS
                                                        : TORUS_LINK_LEAF];
    if (pof2 != P) /* the extra ranks fold into the power of two first */
        t += 2 * (fold->alpha_s + S / fold->bw_Bps) + F / reduce_Bps;
    double part = 1;
    for (int d = pof2 / 2; d >= 1; d /= 2) {
        part /= 2;
        torus_cost_link_class k = _partner(m, d);
        const torus_cost_link_t *l = &m->link[k];
        double share = k == TORUS_LINK_NODE
                           ? 1.0
                           : ceil((double)(q < P ? q : P) / _rails(m));
        t += 2 * (l->alpha_s + part * S * share / l->bw_Bps) +
             part * F / reduce_Bps;
    }
    return t;
}

static double _flat(const torus_cost_t *m, double S, double F, int conv)
{
    const torus_cost_link_t *l = &m->link[_class(m, m->P)];
    double reduce_Bps = conv ? m->reduce_Bps / 10 : m->reduce_Bps;
    double rd = ceil(log2((double)m->P)) *
                (l->alpha_s + S / l->bw_Bps + F / reduce_Bps);
    double rab = _rabenseifner(m, S, F, reduce_Bps);
    return rd < rab ? rd : rab;
}

static double _hier(const torus_cost_t *m, double S, double F, int conv)
{
    int P = m->P, g = m->group_size > 0 ? m->group_size : m->ranks_per_node;
    if (g > P)
        g = P;
    int G = (P + g - 1) / g;
    /* In-group: reduce-scatter + gather, later scatter + all-gather: 4(g-1)
     * chunk moves of S/g, all inside the group. */
    double in = 2.0 * _ring(m, g, 1, S / g, F / g, 2, 1, conv);
    double out = _ring(m, G, g, S / G, F / G, 2, 1, conv);
    if (G > 1)
        return _overlap(in, out, torus_cost_pieces(m->pipeline, S, G));
    return in + out;
}

double torus_cost_time(const torus_cost_t *m, torus_cost_algo a, size_t count,
                       int wire_bytes)
{
    double S = (double)count * wire_bytes, F = (double)count * 4.0;
    int P = m->P, conv = wire_bytes != 4;
    if (P <= 1)
        return 0.0;
    switch (a) {
    case TORUS_COST_RING:
        return _ring(m, P, 1, S / P, F / P, 2, 1, conv);
    case TORUS_COST_FLAT:
        return _flat(m, S, F, conv);
    case TORUS_COST_HIER:
        return _hier(m, S, F, conv);
    case TORUS_COST_HIER_RS: {
        int g = m->group_size;
        if (g <= 0 || P % g)
            return -1.0;
        return _two_level(m, g, P / g, S, F, conv,
                          (m->in_place & TORUS_COST_INPLACE_GROUPS) != 0);
    }
    case TORUS_COST_TORUS2D:
        if (m->rows * m->cols != P || m->rows < 1)
            return -1.0;
        return _two_level(m, m->cols, m->rows, S, F, conv,
                          (m->in_place & TORUS_COST_INPLACE_ROWS) != 0);
    default:
        return -1.0;
    }
}

torus_cost_algo torus_cost_best(const torus_cost_t *m, size_t count,
                                int wire_bytes)
{
    /* On a tie the earlier wins: torus2d before hier-rs, which is the same
     * schedule when groups are the rows. */
    static const torus_cost_algo cand[] = {TORUS_COST_FLAT, TORUS_COST_RING,
                                           TORUS_COST_HIER, TORUS_COST_TORUS2D,
                                           TORUS_COST_HIER_RS};
    torus_cost_algo best = TORUS_COST_FLAT;
    double bt = INFINITY;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        double t = torus_cost_time(m, cand[i], count, wire_bytes);
        if (t >= 0 && t < bt) { /* strict: ties keep the earlier, simpler one */
            bt = t;
            best = cand[i];
        }
    }
    return best;
}

double torus_cost_link_limit(const torus_cost_t *m, size_t count,
                             int wire_bytes)
{
    int N = _nodes(m);
    if (N <= 1)
        return 0.0;
    double S = (double)count * wire_bytes;
    return 2.0 * (N - 1) / N * S /
           (m->link[TORUS_LINK_LEAF].bw_Bps * _rails(m));
}
