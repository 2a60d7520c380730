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
 * casts, which buy nothing where no byte leaves the node. */
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
