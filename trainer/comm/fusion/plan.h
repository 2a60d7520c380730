/* fusion/plan.h: the bucket plan and its per-step bookkeeping, shared by
 * the host fusion (fusion.c) and the device fusion (gpu_fusion.c). Plain
 * C: no threads, locks or CUDA, so tests/unit/test_comm_plan.c checks it
 * on any machine; the callers hold their own lock around it.
 *
 * - Cut: tensors, registered in backward order, go greedily into buckets
 *   that close once they hold theta bytes (fp32).
 * - Step: tc_plan_ready() counts a tensor in; tc_plan_next() hands out the
 *   next bucket to launch, strictly in index order (collectives must be
 *   issued in the same order on every rank, and the order fixes the bits
 *   of the sums): a complete bucket waits behind an incomplete earlier
 *   one. Each bucket launches once per step, so a per-bucket resource (a
 *   CUDA event, a staging slice) is reused across steps and never twice
 *   within one. tc_plan_flush() makes the rest ready (backward is over:
 *   unused gradients count as ready), tc_plan_reset() starts a step.
 * - Spans: where gradients are addresses in one arena (the device grads
 *   arena), a bucket is the byte range from its lowest tensor to the end
 *   of its highest; tc_plan_spans() checks that no two buckets' ranges
 *   overlap, so each bucket is reduced in place as one vector (gaps are
 *   the arena's alignment padding, zero-filled and never written).
 * - Routes: once cut (and spanned, for device memory), every bucket gets
 *   its route (core/route.h: algorithm, wire, path, pipeline pieces,
 *   predicted time) from tc_plan_route, the only place the cost model is
 *   asked about a bucket. A step runs each bucket along its route and
 *   prices nothing; cutting again (theta re-tuned) resolves them again. */
#ifndef TORUS_TCOMM_FUSION_PLAN_H
#define TORUS_TCOMM_FUSION_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/comm/core/route.h"
#include "trainer/comm/tcomm.h"

typedef struct {
    int first, n;     /* tensor range */
    size_t count;     /* floats in its tensors */
    int pending;      /* tensors not yet ready this step */
    uintptr_t lo, hi; /* span [lo, hi) in bytes (tc_plan_spans) */
    tc_route route;   /* how it runs (tc_plan_route) */
} tc_pbucket;

typedef struct {
    uintptr_t *addr; /* per tensor: where it lies (0: unknown) */
    size_t *count;   /* floats */
    int *bucket;
    unsigned char *ready;
    int nt, cap;
    tc_pbucket *b;
    int nb;
    int next; /* the next bucket to launch this step */
} tc_plan;

/* Appends a tensor (index nt). */
tcomm_rc tc_plan_add(tc_plan *p, const void *addr, size_t count);
/* Cuts the buckets (theta bytes, > 0) and resets the step. */
tcomm_rc tc_plan_cut(tc_plan *p, size_t theta);
/* Tensor i is final for this step; TCOMM_ERR_ARG if out of range or
 * already ready this step. */
tcomm_rc tc_plan_ready(tc_plan *p, int i);
/* The next bucket to launch (and counts it launched), or -1 while the
 * head bucket is incomplete or every bucket has launched. */
int tc_plan_next(tc_plan *p);
/* Every tensor not yet ready becomes ready. */
void tc_plan_flush(tc_plan *p);
/* A new step: nothing ready, nothing launched. */
void tc_plan_reset(tc_plan *p);
/* Buckets launched this step. */
int tc_plan_launched(const tc_plan *p);
/* Fills every bucket's span from the tensors' addresses; TCOMM_ERR_LAYOUT
 * naming the two buckets when spans overlap (or a tensor has no address
 * while having elements). *max_floats: the largest span in floats. */
tcomm_rc tc_plan_spans(tc_plan *p, size_t *max_floats);
void tc_plan_free(tc_plan *p);
/* Resolves every bucket's route on c (tc_route_pick) for algo, wire and
 * flags: host pieces (TC_ROUTE_SEGS: the bucket's count in its tensors)
 * or device spans (TC_ROUTE_NCCL: its span's floats, after
 * tc_plan_spans). After every cut; the same on every rank. */
void tc_plan_route(tc_plan *p, const tcomm_t *c, tcomm_algo algo,
                   tcomm_wire wire, unsigned flags, tc_route_for how);
/* The routes in one line for the banner and the logs: the buckets in runs
 * of one algorithm, wire and path, and the predicted time of all ("19
 * buckets: 0-17 torus2d/fp16 in-place, 18 flat/fp32 packed; predicted
 * 12.3 ms a step"), cut short to fit n > 0 bytes. Returns the length
 * it has in full, as snprintf does. */
int tc_plan_text(const tc_plan *p, char *buf, size_t n);

/* How a device-memory gradient exchange runs (gpu_fusion.c): NCCL on the
 * device, or the MPI transport through pinned host buffers. */
typedef enum { TC_GPU_AUTO = 0, TC_GPU_NCCL, TC_GPU_STAGED } tc_gpu_path;

/* The path for n ranks, where rank r runs on GPU dev[r] (any number that
 * names one GPU of a node: gpu_fusion.c hashes its PCI bus id) of node
 * node[r] and asks for pref[r] (TC_GPU_AUTO, or a path forced by
 * TCOMM_GPU): NCCL when it is built (have_nccl) and no two ranks of a
 * node share a device (NCCL refuses two ranks on one GPU), else staged.
 * Any rank asking for staged gets staged everywhere. Returns the path, or
 * -1 when some rank forces NCCL that cannot run: then *a and *b are two
 * ranks sharing a device (both -1 when NCCL is not built). The same
 * inputs on every rank give the same answer on every rank. */
int tc_gpu_choose(int n, const int *node, const int *dev, const int *pref,
                  int have_nccl, int *a, int *b);
/* TCOMM_GPU's value ("auto", "nccl", "staged"; NULL or "" = auto), -1 if
 * unknown. */
int tc_gpu_parse(const char *s);
const char *tc_gpu_name(int path);

#endif
