/* cost_model.c: the alpha-beta model of our all-reduce schedules.
 *
 * Ranks are laid out contiguously, ranks_per_node (q) to a node, N = P/q
 * nodes. A ring step moves one chunk over every edge of its ring at once;
 * its time is that of its slowest edge, alpha + chunk * share / bw, where
 * share is how many of the ring's edges leave one node together over
 * `rails` inter-node links. Reduction costs chunk / reduce_Bps per step.
 *
 *   ring (world, contiguous): 2(P-1) steps of S/P; one edge leaves a node.
 *   flat (MPI's own):  min(recursive doubling log2 P * (alpha + S/bw),
 *                      Rabenseifner) -- what OpenMPI 4.1's tuned module
 *                      picks between for small and large messages.
 *                      Rabenseifner halves the vector with the partner
 *                      P/2 away first, then P/4, ..., and mirrors that to
 *                      gather: with contiguous ranks the big first halves
 *                      cross nodes from every rank of a node at once, so
 *                      a node sends 2 * (1/2 + 1/4 + ... down to q) * S *
 *                      q, twice the link limit for q = 2 (measured: 1.68 s
 *                      against 0.84 s for 64 MiB on 4 x 2 ranks).
 *   hier (group g):    2(g-1) in-group steps of S/g (reduce-scatter+gather,
 *                      scatter+all-gather), then 2(G-1) leader steps of S/G.
 *   torus2d (R x C):   2(C-1) row steps of S/C, 2(R-1) column steps of
 *                      S/(RC); all C columns cross at once, so a node's
 *                      edges share its rails: share = ceil(min(C,q)/rails).
 *   hier-rs:           torus2d with rows = groups of g, columns = G groups.
 *
 * A link is intra-node when both ends share a node, i.e. a row (group)
 * fits inside a node; otherwise inter-node. With shm, a row inside a node
 * reduce-scatters (all-gathers) in shared memory: one alpha per phase, not
 * C-1, for the same (C-1)/C * S bytes read (shm_node.c). MPI's own flat
 * all-reduce on a 16-bit wire runs our user op, which adds pairwise in a
 * scalar loop: its reduce rate is a tenth of ours.
 *
 * 16-bit wires also pay the casts: a ring encodes every chunk it sends in
 * the reduce-scatter and decodes the whole message after the all-gather;
 * a shared-memory row encodes the whole vector and decodes it back.
 *
 * Pipelining (pipeline.c): with K pieces the network stage N (column or
 * leaders' ring) overlaps the node stages D on another thread, so the time
 * is max(D, N + D/K) instead of N + D.
 *
 * In place (shared_grads.c, gradients in node-shared memory): a row inside
 * a node has each member sum its 1/C chunk straight from every member's
 * gradients and write the result into all of them, so a rank streams its
 * F bytes' worth twice (read, write), rounds to the wire within that pass,
 * and passes two barriers; the column ring runs on the chunk in between,
 * not pipelined. */
#include <math.h>

#include "trainer/comm/cost_model.h"

void tcomm_model_defaults(tcomm_model_params *m, int P, int ranks_per_node)
{
    m->P = P > 0 ? P : 1;
    m->ranks_per_node = ranks_per_node > 0 ? ranks_per_node : 1;
    m->rows = 1;
    m->cols = m->P;
    m->group_size = m->ranks_per_node;
    m->rails = 1;
    /* This machine: shared memory between ranks (OpenMPI vader), and
     * loopback TCP between emulated nodes; measured by tcomm_probe_links. */
    m->intra.alpha_s = 3e-6;
    m->intra.bw_Bps = 3e9;
    m->inter.alpha_s = 30e-6;
    m->inter.bw_Bps = 1.5e9;
    m->reduce_Bps = 6e9;
    m->convert_Bps = 6e9;
    m->shm = 0;
    m->pipeline = 1;
    m->in_place = 0;
}

static int _nodes(const tcomm_model_params *m)
{
    int q = m->ranks_per_node < m->P ? m->ranks_per_node : m->P;
    return (m->P + q - 1) / q;
}

/* One ring of n members, each a span of `span` contiguous ranks apart;
 * flows = edges leaving a node at once when the ring crosses nodes. */
static double _ring(const tcomm_model_params *m, int n, int span,
                    double chunk_bytes, double fp32_chunk, int steps_per_member,
                    int flows, int conv)
{
    if (n <= 1)
        return 0.0;
    int q = m->ranks_per_node;
    int crosses = (long)span * n > q && _nodes(m) > 1;
    /* A ring inside one node uses shared memory; span-apart members on
     * different nodes use the node's rails. */
    const tcomm_link *l = crosses ? &m->inter : &m->intra;
    double share = 1.0;
    if (crosses) {
        int rails = m->rails > 0 ? m->rails : 1;
        share = ceil((double)flows / rails);
    }
    double step = l->alpha_s + chunk_bytes * share / l->bw_Bps;
    /* 16-bit: n-1 chunks encoded to send, the whole message decoded */
    double cast = conv ? (2.0 * n - 1) * fp32_chunk / m->convert_Bps : 0.0;
    return (double)steps_per_member * (n - 1) * step +
           (double)(n - 1) * fp32_chunk / m->reduce_Bps + cast;
}

int tcomm_model_pieces(int pipeline, double wire_bytes)
{
    /* Pieces of fewer than 2 MiB are not worth their extra ring steps. */
    double most = floor(wire_bytes / (2 << 20));
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

static double _two_level(const tcomm_model_params *m, int C, int R, double S,
                         double F, int conv, int in_place)
{
    int q = m->ranks_per_node;
    int flows = C < q ? C : q;
    /* Rows: C contiguous ranks; one edge per node leaves it when a row
     * spans nodes. Columns: members C ranks apart. */
    double row = _ring(m, C, 1, S / C, F / C, 2, 1, conv);
    double col = _ring(m, R, C, S / ((double)C * R), F / ((double)C * R), 2,
                       flows, conv);
    if (in_place && m->shm && C > 1 && C <= q)
        return 2 * (m->intra.alpha_s + F / m->reduce_Bps) + col;
    if (m->shm && C > 1 && C <= q) {
        /* Shared segments move bytes at memory speed (the probed reduce
         * rate streams memory too), not at the intra link's message rate,
         * which pays copy-in/copy-out and a handshake per step: on a node
         * with more ranks than cores each handshake waits for the
         * scheduler, so the ring's steps cost more than its alpha says. */
        row = 2 * (m->intra.alpha_s + (C - 1.0) / C * S / m->reduce_Bps) +
              (C - 1.0) / C * F / m->reduce_Bps +
              (conv ? 2 * F / m->convert_Bps : 0.0);
        /* Only shared-memory rows run pipelined (algo_torus2d.c). */
        if (R > 1)
            return _overlap(row, col, tcomm_model_pieces(m->pipeline, S));
    }
    return row + col;
}

/* OpenMPI's recursive-halving reduce-scatter + recursive-doubling
 * all-gather (tuned allreduce algorithm 6), farthest partner first. */
static double _rabenseifner(const tcomm_model_params *m, double S, double F)
{
    int P = m->P, q = m->ranks_per_node, pof2 = 1;
    while (pof2 * 2 <= P)
        pof2 *= 2;
    double t = 0;
    if (pof2 != P) /* the extra ranks fold into the power of two first */
        t += 2 * (m->inter.alpha_s + S / m->inter.bw_Bps) + F / m->reduce_Bps;
    int rails = m->rails > 0 ? m->rails : 1;
    double part = 1;
    for (int d = pof2 / 2; d >= 1; d /= 2) {
        part /= 2;
        int crosses = d >= q && _nodes(m) > 1;
        const tcomm_link *l = crosses ? &m->inter : &m->intra;
        double share = crosses ? ceil((double)(q < P ? q : P) / rails) : 1.0;
        t += 2 * (l->alpha_s + part * S * share / l->bw_Bps) +
             part * F / m->reduce_Bps;
    }
    return t;
}

double tcomm_model_time(const tcomm_model_params *m, tcomm_algo a, size_t count,
                        tcomm_wire wire)
{
    double S = (double)count * (double)tcomm_wire_bytes(wire),
           F = (double)count * 4.0;
    int P = m->P, conv = wire != TCOMM_WIRE_FP32;
    if (P <= 1)
        return 0.0;
    switch (a) {
    case TCOMM_ALGO_RING:
        return _ring(m, P, 1, S / P, F / P, 2, 1, conv);
    case TCOMM_ALGO_FLAT: {
        const tcomm_link *l = _nodes(m) > 1 ? &m->inter : &m->intra;
        tcomm_model_params mm = *m;
        if (wire != TCOMM_WIRE_FP32)
            mm.reduce_Bps /= 10;
        double rd = ceil(log2((double)P)) *
                    (l->alpha_s + S / l->bw_Bps + F / mm.reduce_Bps);
        double rab = _rabenseifner(&mm, S, F);
        return rd < rab ? rd : rab;
    }
    case TCOMM_ALGO_HIER: {
        int g = m->group_size > 0 ? m->group_size : m->ranks_per_node;
        if (g > P)
            g = P;
        int G = (P + g - 1) / g;
        /* In-group: reduce-scatter + gather, later scatter + all-gather:
         * 4(g-1) chunk moves of S/g, all inside the group. */
        double in = 2.0 * _ring(m, g, 1, S / g, F / g, 2, 1, conv);
        double out = _ring(m, G, g, S / G, F / G, 2, 1, conv);
        if (G > 1)
            return _overlap(in, out, tcomm_model_pieces(m->pipeline, S));
        return in + out;
    }
    case TCOMM_ALGO_HIER_RS: {
        int g = m->group_size;
        if (g <= 0 || P % g)
            return -1.0;
        return _two_level(m, g, P / g, S, F, conv,
                          (m->in_place & TCOMM_MODEL_INPLACE_GROUPS) != 0);
    }
    case TCOMM_ALGO_TORUS2D:
        if (m->rows * m->cols != P || m->rows < 1)
            return -1.0;
        return _two_level(m, m->cols, m->rows, S, F, conv,
                          (m->in_place & TCOMM_MODEL_INPLACE_ROWS) != 0);
    default:
        return -1.0;
    }
}

tcomm_algo tcomm_model_best(const tcomm_model_params *m, size_t count,
                            tcomm_wire wire)
{
    /* On a tie the earlier wins: torus2d before hier-rs, which is the same
     * schedule when groups are the rows. */
    static const tcomm_algo cand[] = {TCOMM_ALGO_FLAT, TCOMM_ALGO_RING,
                                      TCOMM_ALGO_HIER, TCOMM_ALGO_TORUS2D,
                                      TCOMM_ALGO_HIER_RS};
    tcomm_algo best = TCOMM_ALGO_FLAT;
    double bt = INFINITY;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        double t = tcomm_model_time(m, cand[i], count, wire);
        if (t >= 0 && t < bt) { /* strict: ties keep the earlier, simpler one */
            bt = t;
            best = cand[i];
        }
    }
    return best;
}

double tcomm_model_link_limit(const tcomm_model_params *m, size_t count,
                              tcomm_wire wire)
{
    int N = _nodes(m);
    if (N <= 1)
        return 0.0;
    double S = (double)count * (double)tcomm_wire_bytes(wire);
    int rails = m->rails > 0 ? m->rails : 1;
    return 2.0 * (N - 1) / N * S / (m->inter.bw_Bps * rails);
}
