/* fusion/theta.h: the bucket size chosen from the links (tcomm_fusion
 * with TCOMM_FUSION_AUTO; internal to libtcomm). */
#ifndef TORUS_TCOMM_FUSION_THETA_H
#define TORUS_TCOMM_FUSION_THETA_H

#include "trainer/comm/core/comm.h"
#include "trainer/comm/fusion/plan.h"

/* The smallest power of two from TC_THETA_MIN to TC_THETA_MAX whose
 * buckets (p's tensors cut greedily, as tc_plan_cut does) the cost model
 * (c->model: probed or default links), each bucket also paying the fixed
 * cost measured beyond the model (an all-reduce of TC_THETA_MIN bytes,
 * timed at start-up), prices within TC_THETA_SLACK of one all-reduce of
 * every gradient: the latency that cutting adds stays under 10%, and the
 * buckets are as small as that allows, so that reductions start early in
 * backward. TC_THETA_MAX when none is. Leaves p cut at *theta; why gets
 * one sentence on the choice. Collective (the timing): every rank calls,
 * and every rank with the same model and tensors picks the same. */
#define TC_THETA_MIN   ((size_t)256 << 10)
#define TC_THETA_MAX   ((size_t)64 << 20)
#define TC_THETA_SLACK 1.10
tcomm_rc tc_fusion_theta(tcomm_t *c, tc_plan *p, tcomm_algo algo,
                         tcomm_wire wire, size_t *theta, char *why,
                         size_t whylen);
/* The choice alone, with extra seconds a bucket (and the whole once) on
 * top of the model's prices: no communication (unit-tested). */
tcomm_rc tc_theta_pick(const tcomm_t *c, tc_plan *p, tcomm_algo algo,
                       tcomm_wire wire, double extra, size_t *theta, char *why,
                       size_t whylen);

#endif
