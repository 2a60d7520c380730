/* tcomm_fusion.h: tensor fusion with overlap (part of libtcomm).
 *
 * Gradients are registered once, in backward order. Consecutive ones are
 * packed into buckets of about theta bytes (fp32); a bucket is reduced as
 * soon as backward has produced all of its gradients, on a communication
 * thread, while backward goes on. tcomm_fusion_finish() ends the step: it
 * flushes what is left (unused gradients count as ready) and waits.
 * Buckets always run in index order, so the reduction order and hence the
 * result are the same on every run. At seal time every rank checks that
 * all ranks built the same bucket layout (one 8-byte hash per rank). */
#ifndef TORUS_TCOMM_FUSION_H
#define TORUS_TCOMM_FUSION_H

#include "trainer/comm/tcomm.h"

typedef struct tcomm_fusion tcomm_fusion_t;

/* Default bucket size, picked by measurement: the theta sweep of
 * tests/bench/comm/node.sh is flat from 256 KiB to 32 MiB here, and 4 MiB
 * keeps ResNet-50 at 19 buckets (docs/comm.md). */
#define TCOMM_FUSION_DEFAULT_BYTES (4u << 20)
/* bucket_bytes: chosen at seal from the links and the gradients. Seal
 * then probes the links (tcomm_probe_links, collective, about 0.1 s), the
 * cost model proposes the smallest power of two from 256 KiB to 64 MiB
 * whose buckets it prices within 10% of one all-reduce of every gradient,
 * and a timed trial of that and 1, 4 and 16 MiB on the first 64 MiB of
 * gradients keeps the smallest within 0.5% of the fastest (fusion/theta.h;
 * the gradients are put back as they were). Where every power of two in
 * that range cuts the gradients into the same buckets (a small model),
 * nothing is probed or timed and the default size is kept.
 * tcomm_fusion_theta_why() says what it chose and why. */
#define TCOMM_FUSION_AUTO ((size_t)-1)

/* One bucket's reduction as it ran, for a timeline (on_bucket below). */
typedef struct {
    int bucket, ntensors;
    size_t count;     /* fp32 values */
    tcomm_algo algo;  /* the one that ran (hybrid resolved) */
    tcomm_wire wire;  /* the precision on the wire */
    int in_place;     /* reduced where it lies in shared memory */
    double t0, t1;    /* tcomm_wtime() (CLOCK_MONOTONIC) at start and end */
    double predict_s; /* what the cost model priced it at, at seal; < 0:
                       * it cannot price it */
} tcomm_fusion_span;

typedef struct {
    size_t bucket_bytes; /* theta; 0 = TCOMM_FUSION_DEFAULT_BYTES, or
                          * TCOMM_FUSION_AUTO */
    tcomm_algo algo;
    tcomm_wire wire;
    unsigned flags;  /* TCOMM_AVERAGE */
    int synchronous; /* 1: reduce on the caller's thread (no overlap) */
    /* Optional: called after each bucket's reduction, on the thread that
     * reduced it (the communication thread), with ctx on_bucket_ctx. */
    void (*on_bucket)(void *ctx, const tcomm_fusion_span *s);
    void *on_bucket_ctx;
} tcomm_fusion_options;

typedef struct {
    size_t buckets;   /* reduced this step */
    size_t in_place;  /* of them, reduced where they lie (shared memory) */
    size_t nonfinite; /* inf/nan over all buckets: skip the step */
    double comm_s;    /* time spent reducing (all buckets) */
    double wait_s;    /* time finish() waited: the exposed part */
} tcomm_fusion_stats;

tcomm_rc tcomm_fusion_create(tcomm_t *c, const tcomm_fusion_options *o,
                             tcomm_fusion_t **out);
/* Register gradient buffer grad (count fp32), in backward order. Its index
 * (0, 1, ...) is returned in *index. Not after seal. */
tcomm_rc tcomm_fusion_add(tcomm_fusion_t *f, float *grad, size_t count,
                          const char *name, int *index);
/* Build the buckets, check them against every rank, start the thread. */
tcomm_rc tcomm_fusion_seal(tcomm_fusion_t *f);
size_t tcomm_fusion_bucket_count(const tcomm_fusion_t *f);
/* After seal: the bucket size in bytes, and with TCOMM_FUSION_AUTO the
 * sentence that says why ("" for a size given). */
size_t tcomm_fusion_theta(const tcomm_fusion_t *f);
const char *tcomm_fusion_theta_why(const tcomm_fusion_t *f);
/* After seal, between steps (before the first ready or after finish):
 * the buckets cut again at bytes and checked against every rank, as seal
 * does (a resumed run takes the size its checkpoint records). Collective;
 * the sentence of theta_why stays the one seal gave. */
tcomm_rc tcomm_fusion_set_theta(tcomm_fusion_t *f, size_t bytes);
/* After seal: the bucket plan in one line, cut short to fit n > 0 bytes
 * (buckets in runs of one algorithm, wire and path: sent, packed,
 * on-node, in-place; the cost model's time for all of them). Each
 * bucket's route is resolved at seal and at set_theta, and a step only
 * follows it: the cost model is never asked during a step. "" before
 * seal. */
int tcomm_fusion_plan_text(const tcomm_fusion_t *f, char *buf, size_t n);
/* After seal, with TCOMM_ALGO_HYBRID and a 16-bit wire on one node: how
 * many buckets the cost model runs on fp32 instead, and why ("" else:
 * across nodes the wire is the one asked for). */
const char *tcomm_fusion_wire_why(const tcomm_fusion_t *f);
/* After seal: 1 when every rank's gradients lie in tcomm_shared_alloc
 * memory at the same offsets, so that buckets whose rows or groups share
 * a node are reduced in place. */
int tcomm_fusion_shared(const tcomm_fusion_t *f);
/* Tensors [*first, *first + *ntensors) form bucket b, with *count floats. */
tcomm_rc tcomm_fusion_bucket(const tcomm_fusion_t *f, size_t b, int *first,
                             int *ntensors, size_t *count);
/* Gradient index is final for this step. */
tcomm_rc tcomm_fusion_ready(tcomm_fusion_t *f, int index);
/* Backward ended: reduce the rest, wait for all buckets, reset for the
 * next step. Errors of the communication thread come out here. */
tcomm_rc tcomm_fusion_finish(tcomm_fusion_t *f, tcomm_fusion_stats *st);
/* Before finish: waits until at least n buckets of this step are reduced
 * (buckets are reduced in order, so buckets 0 .. n-1 are then final; a
 * failed reduction counts as done and finish reports it), and returns how
 * many are. Every gradient of those n buckets must be marked ready (it
 * would wait for ever for one that is not). Without a communication thread
 * (synchronous) it waits for nothing. For the GPU staged path, which copies
 * each bucket back as soon as it is reduced. */
int tcomm_fusion_wait(tcomm_fusion_t *f, int n);
void tcomm_fusion_destroy(tcomm_fusion_t *f);

#endif
