/* algo_hybrid.c: Tencent's hybrid all-reduce. Each call (one fused bucket)
 * runs the algorithm the alpha-beta model predicts fastest for its size on
 * this layout: small buckets favour few steps (flat / hier), large ones
 * favour little inter-node traffic (torus2d / hier-rs). The parameters are
 * the defaults or what tcomm_probe_links measured; every rank holds the
 * same ones (rank 0's probe is broadcast), so every rank picks the same. */
#include "trainer/comm/tcomm_internal.h"

tcomm_algo tc_hybrid_pick(const tcomm_t *c, size_t count, tcomm_wire w)
{
    return tcomm_model_best(&c->model, count, w);
}

double tcomm_predict(const tcomm_t *c, tcomm_algo algo, size_t count, tcomm_wire wire)
{
    if (algo == TCOMM_ALGO_HYBRID)
        algo = tc_hybrid_pick(c, count, wire);
    return tcomm_model_time(&c->model, algo, count, wire);
}
