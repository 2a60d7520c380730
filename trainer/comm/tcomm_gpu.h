/* tcomm_gpu.h: gradient exchange for gradients in device memory, inside
 * the training step (part of libtcomm; built when configure finds CUDA).
 *
 * Gradients are registered once, in backward order, as device pointers
 * into one grads arena; consecutive ones form buckets of about theta bytes
 * (the host fusion's plan, fusion/plan.h). After each layer's backward
 * *launch* the caller marks its gradients ready; a complete bucket is
 * then launched, strictly in bucket order, behind a CUDA event recorded
 * on the compute stream, so the reduction runs while backward goes on,
 * with no host wait. finish() launches the rest, makes the compute stream
 * wait (cudaStreamWaitEvent) for the reductions, so the update that the
 * caller enqueues next runs after them, and returns the inf/nan count of
 * the sums (the host's only wait: the skip decision needs that number).
 *
 * Two paths, chosen at create, the same on every rank:
 * - nccl: each bucket's span of the arena is cast to the wire on the
 *   device (fp16/bf16 with the 1/world pre-scale when TCOMM_AVERAGE,
 *   core/wire_math.h), reduced with NCCL on a communication stream with
 *   the same algorithm as the CPU path (tcomm_nccl.h: flat, ring, hier,
 *   hier-rs, torus2d over ncclCommSplit rows and columns; hybrid picks
 *   per bucket with the cost model, core/pick.c), and cast back in place;
 * - staged: each bucket is copied on a communication stream into pinned
 *   host memory as soon as it is complete, reduced by the host fusion
 *   (tcomm_fusion.h: MPI, the CPU path's algorithms, wire and deadlines)
 *   and copied back. For ranks that share a GPU, which NCCL refuses.
 * The choice: TCOMM_GPU=nccl|staged|auto (default auto) on any rank, else
 * nccl when libtcomm has NCCL and no two ranks of a node run on the same
 * device (each rank's current CUDA device at create), else staged; nccl
 * forced where it cannot run is an error naming two ranks that share a
 * device. */
#ifndef TORUS_TCOMM_GPU_H
#define TORUS_TCOMM_GPU_H

#include "trainer/comm/tcomm.h"
#include "trainer/comm/tcomm_fusion.h"

typedef struct tcomm_gpu tcomm_gpu_t;

typedef struct {
    size_t bucket_bytes; /* theta; 0 = TCOMM_FUSION_DEFAULT_BYTES */
    tcomm_algo algo;
    tcomm_wire wire;
    unsigned flags; /* TCOMM_AVERAGE */
} tcomm_gpu_options;

/* Collective on world: agrees on the path and sets up NCCL (unique id
 * through PMIx) or the staging stream. compute_stream: the cudaStream_t
 * that backward and the update run on (the engine backend's stream); the
 * calling thread's current device is this rank's. */
tcomm_rc tcomm_gpu_create(tcomm_t *c, const tcomm_gpu_options *o,
                          void *compute_stream, tcomm_gpu_t **out);
/* "nccl" or "staged". */
const char *tcomm_gpu_path(const tcomm_gpu_t *g);
/* Register device gradient grad (count fp32), in backward order; its
 * index (0, 1, ...) in *index. Not after seal. */
tcomm_rc tcomm_gpu_add(tcomm_gpu_t *g, float *grad, size_t count, int *index);
/* Collective: cut the buckets, check that every rank has the same layout,
 * reserve the device wire buffer or the pinned staging memory. */
tcomm_rc tcomm_gpu_seal(tcomm_gpu_t *g);
size_t tcomm_gpu_bucket_count(const tcomm_gpu_t *g);
/* After seal: the bucket plan in one line (tcomm_fusion_plan_text): the
 * NCCL path's routes, resolved at seal over the buckets' spans, or the
 * staged path's host buckets. "" before seal. */
int tcomm_gpu_plan_text(const tcomm_gpu_t *g, char *buf, size_t n);
/* Gradient index is final once the work already queued on the compute
 * stream has run (call it after the layer's backward launch). */
tcomm_rc tcomm_gpu_ready(tcomm_gpu_t *g, int index);
/* Backward is launched: reduce the rest; the compute stream then waits
 * for every bucket. st: buckets, nonfinite (same on every rank), wait_s
 * (this call's host time). A lost rank fails here, named. */
tcomm_rc tcomm_gpu_finish(tcomm_gpu_t *g, tcomm_fusion_stats *st);
/* finish in two halves, for a step that a CUDA graph records (the
 * readies and launches of the step, and finish_device, are then recorded
 * once and replayed; the host bookkeeping is back at its start after
 * finish_device). finish_device: the rest of the launches, the compute
 * stream's wait and, on the nccl path, the inf/nan count's copy, queued
 * with no host wait; on the staged path the whole finish (host work:
 * never recorded). finish_host: waits for the count (nccl: deadline,
 * lost rank named) and fills st. capturable: 1 on the nccl path, where
 * finish_device queues only device work. abandon: after a failed
 * recording, the bookkeeping back at the step's start. */
int tcomm_gpu_capturable(const tcomm_gpu_t *g);
tcomm_rc tcomm_gpu_finish_device(tcomm_gpu_t *g);
tcomm_rc tcomm_gpu_finish_host(tcomm_gpu_t *g, tcomm_fusion_stats *st);
void tcomm_gpu_abandon(tcomm_gpu_t *g);
/* A blocking all-reduce of count fp32 values in device memory, ordered
 * after the compute stream's work (BN statistics before an evaluation):
 * through host memory and tcomm_allreduce, on either path. */
tcomm_rc tcomm_gpu_allreduce(tcomm_gpu_t *g, float *dev, size_t count,
                             tcomm_wire wire, unsigned flags);
void tcomm_gpu_destroy(tcomm_gpu_t *g);

#endif
