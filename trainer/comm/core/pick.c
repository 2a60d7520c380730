/* core/pick.c: Tencent's hybrid all-reduce. Each call (one fused bucket)
 * runs the algorithm the alpha-beta model predicts fastest for its size on
 * this layout: small buckets favour few steps (flat / hier), large ones
 * favour little inter-node traffic (torus2d / hier-rs). The parameters are
 * the defaults or what tcomm_probe_links measured; every rank holds the
 * same ones (rank 0's probe is broadcast), so every rank picks the same.
 * A bucket whose gradients lie in shared memory (TCOMM_SHARED) is priced
 * as the in-place sum wherever tcomm_allreduce_segs can run one: rows or
 * groups on one node that hold the members' blocks, the same on every
 * rank of a uniform layout. On one node the fused buckets' hybrid also
 * picks the wire (tc_hybrid_pick_wire): the model prices the 16-bit wire's
 * casts, which buy nothing where no byte leaves the node.
 * tc_route_pick resolves all of a call's choices at once (route.h): the
 * fused buckets' once, when they are sealed (fusion/plan.c), so that no
 * step asks the model again. */
#include "trainer/comm/core/comm.h"

int tc_shared_in_place(const tc_group *g, unsigned flags)
{
    return g && (flags & TCOMM_SHARED) && g->on_node && g->arena;
}

/* c's model with the in-place paths a call with flags would run. */
static tcomm_model_params _model(const tcomm_t *c, unsigned flags)
{
    tcomm_model_params m = c->model;
    m.in_place = 0;
    if (tc_shared_in_place(&c->row, flags))
        m.in_place |= TCOMM_MODEL_INPLACE_ROWS;
    if (c->info.groups_uniform && tc_shared_in_place(&c->group, flags))
        m.in_place |= TCOMM_MODEL_INPLACE_GROUPS;
    return m;
}

tcomm_algo tc_hybrid_pick(const tcomm_t *c, size_t count, tcomm_wire w,
                          unsigned flags)
{
    tcomm_model_params m = _model(c, flags);
    return tcomm_model_best(&m, count, w);
}

tcomm_algo tc_hybrid_pick_wire(const tcomm_t *c, size_t count, unsigned flags,
                               tcomm_wire *w)
{
    tcomm_model_params m = _model(c, flags);
    tcomm_algo a = tcomm_model_best(&m, count, *w);
    if (*w == TCOMM_WIRE_FP32 || c->info.nnodes != 1)
        return a;
    /* Strictly cheaper: on a tie the wire asked for stays. */
    tcomm_algo a32 = tcomm_model_best(&m, count, TCOMM_WIRE_FP32);
    if (tcomm_model_time(&m, a32, count, TCOMM_WIRE_FP32) <
        tcomm_model_time(&m, a, count, *w)) {
        *w = TCOMM_WIRE_FP32;
        return a32;
    }
    return a;
}

int tc_pipeline_pieces(const tcomm_t *c, size_t wire_bytes, int parts)
{
    /* The network thread calls MPI while the caller's does too. */
    if (!c->thread_multiple)
        return 1;
    return tcomm_model_pieces(c->pipeline, (double)wire_bytes, parts);
}

/* Which of tcomm_allreduce_segs' ways a bucket of nsegs pieces takes. */
static tc_path _segs_path(const tcomm_t *c, size_t count, int nsegs,
                          tcomm_algo algo, unsigned flags)
{
    const tc_group *rows = TC_ALGO_ROWS(c, algo);
    int in_place = count > 0 && tc_shared_in_place(rows, flags);
    if (in_place)
        return TC_PATH_IN_PLACE;
    if (nsegs == 1) /* one piece: reduced where it is */
        return TC_PATH_SENT;
    return rows && rows->on_node && count > 0 ? TC_PATH_ON_NODE
                                              : TC_PATH_PACKED;
}

void tc_route_pick(const tcomm_t *c, size_t count, int nsegs, tcomm_algo algo,
                   tcomm_wire wire, unsigned flags, tc_route_for how,
                   tc_route *r)
{
    /* A single buffer or device memory is never reduced in place. */
    unsigned f = how == TC_ROUTE_SEGS ? flags : 0;
    if (algo == TCOMM_ALGO_HYBRID && how == TC_ROUTE_SEGS)
        algo = tc_hybrid_pick_wire(c, count, f, &wire);
    else if (algo == TCOMM_ALGO_HYBRID)
        algo = tc_hybrid_pick(c, count, wire, 0);
    r->algo = algo;
    r->wire = wire;
    r->path = how == TC_ROUTE_NCCL  ? TC_PATH_DEVICE
              : how == TC_ROUTE_ONE ? TC_PATH_SENT
                                    : _segs_path(c, count, nsegs, algo, f);
    /* hier pipelines its leaders' ring over the groups, torus2d, hier-rs
     * and the in-place sum their column rings over all ranks. */
    int parts = algo == TCOMM_ALGO_HIER ? c->info.ngroups : c->info.size;
    r->pieces =
        how == TC_ROUTE_NCCL
            ? 1
            : tc_pipeline_pieces(c, count * tcomm_wire_bytes(wire), parts);
    tcomm_model_params m = _model(c, f);
    r->predict_s = tcomm_model_time(&m, algo, count, wire);
}

const char *tc_path_name(tc_path p)
{
    static const char *const names[TC_PATH_COUNT] = {
        "sent", "packed", "on-node", "in-place", "device"};
    return (unsigned)p < TC_PATH_COUNT ? names[p] : "?";
}

double tcomm_predict(const tcomm_t *c, tcomm_algo algo, size_t count,
                     tcomm_wire wire)
{
    if (algo == TCOMM_ALGO_HYBRID)
        algo = tc_hybrid_pick(c, count, wire, 0);
    return tcomm_model_time(&c->model, algo, count, wire);
}

int tcomm_links_text(const tcomm_t *c, char *buf, size_t n)
{
    const tcomm_model_params *m = &c->model;
    const torus_cost_link_t *node = &m->link[TORUS_LINK_NODE];
    const torus_cost_link_t *leaf = &m->link[TORUS_LINK_LEAF];
    return snprintf(buf, n,
                    "in a node %.1f us + %.2f GB/s, between nodes %.1f us + "
                    "%.3f GB/s, fp32 add %.2f GB/s, fp16 cast %.2f GB/s",
                    node->alpha_s * 1e6, node->bw_Bps / 1e9,
                    leaf->alpha_s * 1e6, leaf->bw_Bps / 1e9,
                    m->reduce_Bps / 1e9, m->convert_Bps / 1e9);
}
