/* fusion/theta.h: the bucket size chosen from the links (tcomm_fusion
 * with TCOMM_FUSION_AUTO; internal to libtcomm). */
#ifndef TORUS_TCOMM_FUSION_THETA_H
#define TORUS_TCOMM_FUSION_THETA_H

#include "trainer/comm/core/comm.h"
#include "trainer/comm/fusion/plan.h"

#define TC_THETA_MIN         ((size_t)256 << 10)
#define TC_THETA_MAX         ((size_t)64 << 20)
#define TC_THETA_SLACK       1.10
#define TC_THETA_TRIAL_BYTES ((size_t)64 << 20)
#define TC_THETA_TRIALS      4
#define TC_THETA_TIE         1.005

/* The model proposes, a timed trial decides.
 *
 * The proposal: the smallest power of two from TC_THETA_MIN to
 * TC_THETA_MAX whose buckets (p's tensors cut greedily, as tc_plan_cut
 * does) the cost model (c->model: probed or default links), each bucket
 * also paying the fixed cost measured beyond the model (an all-reduce of
 * TC_THETA_MIN bytes, timed at start-up), prices within TC_THETA_SLACK of
 * one all-reduce of every gradient: the latency that cutting adds stays
 * under 10%, and the buckets are as small as that allows, so that
 * reductions start early in backward. TC_THETA_MAX when none is.
 *
 * The trial: the proposal and the fixed sizes 1, 4 and 16 MiB are each
 * timed on the first TC_THETA_TRIAL_BYTES of gradients (64 MiB: with 32,
 * two thirds of ResNet-50's gradients were left to the projection, and the
 * trial once timed 256 KiB fastest where it ran 11% slower in full; whole
 * buckets in backward order, as the communication thread runs them: segs
 * are the tensors as pieces, flags the fusion's), each after an untimed
 * pass at that size (tc_theta_time); each time is the slowest rank's,
 * projected to all
 * gradients by the model's price of all buckets over its price of the
 * trial's.
 * The smallest size within TC_THETA_TIE of the fastest is kept (sizes
 * that tie go to the smaller, whose buckets start reducing earlier in
 * backward; a wider tie, 2%, let the trial's noise keep sizes that ran
 * 6-7% slower in full on the emulated cluster) and p is left cut at it: what
 * the model does not see (a TCP window that reopens after each bucket on shaped
 * links, the cache that a bucket's wire buffers fall out of) decides
 * between sizes it prices within a few percent. The gradients are saved first
 * and restored after (zeros while timed). why gets the times and the proposal's
 * sentence. Collective: every rank calls, and all pick the same (the times are
 * agreed). */
tcomm_rc tc_fusion_theta(tcomm_t *c, tc_plan *p, const tcomm_seg *segs,
                         tcomm_algo algo, tcomm_wire wire, unsigned flags,
                         size_t *theta, char *why, size_t whylen);

/* The proposal alone, with extra seconds a bucket (and the whole once) on
 * top of the model's prices: no communication (unit-tested). Leaves p cut
 * at *theta; why gets one sentence on it. */
tcomm_rc tc_theta_pick(const tcomm_t *c, tc_plan *p, tcomm_algo algo,
                       tcomm_wire wire, double extra, size_t *theta, char *why,
                       size_t whylen);
/* One pass of the trial at bucket size theta: its seconds. */
typedef tcomm_rc (*tc_theta_pass_fn)(void *ctx, size_t theta, double *secs);
/* Times each of the n sizes in cand into secs[k]: an untimed pass at the
 * size, then the timed one. A size's first pass pays for what only it
 * uses (one untimed pass at the largest before all, as the trial once
 * ran, left the first size cold: 1 MiB took 40 ms where 2 MiB took 3.2,
 * so the smallest could never win). Stops at the first failing pass. */
tcomm_rc tc_theta_time(const size_t *cand, int n, tc_theta_pass_fn pass,
                       void *ctx, double *secs);
/* The sizes the trial times, ascending, each once: 1, 4 and 16 MiB and
 * the proposal. Returns how many (3 or 4). */
int tc_theta_candidates(size_t proposal, size_t out[TC_THETA_TRIALS]);
/* Of n > 0 times of ascending sizes, the index of the first within
 * TC_THETA_TIE of the least. */
int tc_theta_keep(const double *secs, int n);
/* *same = 1 when every power of two from TC_THETA_MIN to TC_THETA_MAX
 * cuts p's tensors into the same buckets (a small model: one bucket, or
 * tensors so large that each is its own), so that there is nothing to
 * choose; 0 when not. Leaves p cut at some size in that range. */
tcomm_rc tc_theta_uniform(tc_plan *p, int *same);

#endif
