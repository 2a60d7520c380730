/* tcomm_nccl.h: the NCCL transport of libtcomm, for gradients in device
 * memory (built only when configure finds NCCL; TORUS_HAVE_NCCL).
 *
 * Communicators: world from a unique id that rank 0 publishes through
 * PMIx, then row, column, group, group leaders and group peers split from
 * it with ncclCommSplit, matching the host communicators of the tcomm_t.
 * Every reduction runs on the handle's own communication stream: it waits
 * for the producer stream through an event and the consumer waits for it
 * through another, so gradients reduce while backward continues on the
 * compute stream, with no device-wide synchronisation. Kernels cast fp32
 * to the wire (pre-scaled by 1/world) and back, and count inf/nan.
 * The transport (init, reserve, the waits) is transport/nccl.c; the
 * all-reduce algorithms over it (tcomm_nccl_allreduce) are
 * algo/nccl_allreduce.c. */
#ifndef TORUS_TCOMM_NCCL_H
#define TORUS_TCOMM_NCCL_H

#include <cuda_runtime_api.h>

#include "trainer/comm/tcomm.h"

typedef struct tcomm_nccl tcomm_nccl_t;

/* Collective over the tcomm_t's world. device = the CUDA device to use
 * (-1: the local rank modulo the visible devices). */
tcomm_rc tcomm_nccl_init(tcomm_t *c, int device, tcomm_nccl_t **out);
void tcomm_nccl_finalize(tcomm_nccl_t *n);

/* Enqueue an all-reduce of count fp32 values at device pointer x, after
 * the work already queued on producer (may be 0: the legacy stream).
 * Calls on one handle run in call order. */
tcomm_rc tcomm_nccl_allreduce(tcomm_nccl_t *n, float *x, size_t count,
                              tcomm_algo algo, tcomm_wire wire, unsigned flags,
                              cudaStream_t producer);
/* The same, with ev[0] and ev[1] (timing events, or ev NULL) recorded on
 * the communication stream around this reduction's own work (cast,
 * collectives, cast back): cudaEventElapsedTime of the pair, once the
 * reduction is done, is its device time. Recorded as external event
 * nodes when a CUDA graph records the call, so a replay times it too. */
tcomm_rc tcomm_nccl_allreduce_timed(tcomm_nccl_t *n, float *x, size_t count,
                                    tcomm_algo algo, tcomm_wire w,
                                    unsigned flags, cudaStream_t producer,
                                    const cudaEvent_t *ev);

/* Size the device wire buffer for reductions of up to count values, so
 * that no later call grows it (growing waits for the stream). */
tcomm_rc tcomm_nccl_reserve(tcomm_nccl_t *n, size_t count, tcomm_wire wire);

/* Make consumer wait (on the device) for every reduction enqueued so far.
 * With nonfinite non-NULL, also wait on this thread until they are done
 * and return the number of inf/nan elements in their results: the wait
 * polls the stream's event and NCCL's async errors with the tcomm
 * deadline (tcomm_set_timeout, TCOMM_TIMEOUT); a lost peer aborts every
 * NCCL communicator (ncclCommAbort) and fails with TCOMM_ERR_TIMEOUT or
 * TCOMM_ERR_TRANSPORT naming the lost rank ("rank 3 is lost or stalled"),
 * found as on the CPU path. The handle is unusable after that. */
tcomm_rc tcomm_nccl_wait(tcomm_nccl_t *n, cudaStream_t consumer,
                         size_t *nonfinite);
/* tcomm_nccl_wait in two halves, for a step that a CUDA graph records.
 * join: consumer waits (on the device) for every reduction enqueued so
 * far, then copies their inf/nan count to pinned host memory and clears
 * it, all queued on consumer, with no host wait (so it may be recorded).
 * count: waits on this thread, as tcomm_nccl_wait does (deadline, NCCL
 * async errors, lost rank named), for consumer's work queued so far, and
 * returns the count that the last join copied. */
tcomm_rc tcomm_nccl_join(tcomm_nccl_t *n, cudaStream_t consumer);
tcomm_rc tcomm_nccl_count(tcomm_nccl_t *n, cudaStream_t consumer,
                          size_t *nonfinite);

#endif
