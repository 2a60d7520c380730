/* transport/nccl_transport.h: the NCCL transport's face to the NCCL
 * algorithms (layer transport; built only where configure finds NCCL).
 * transport/nccl.c owns the handle: the communicators (world and the ones
 * split from it), the communication stream, the padded device wire buffer,
 * the staging of fp32 gradients onto that wire and back, and the waits
 * with their deadline and abort. The algorithms (algo/nccl_allreduce.c)
 * choose which NCCL collectives run on which of these communicators; they
 * enqueue them on n->stream between tc_nccl_stage_in and tc_nccl_stage_out
 * and touch nothing else of the handle.
 *
 * Why the NCCL algorithms are not built from send/recv like the host ones
 * (transport.h): docs/ARCHITECTURE.md, "Algorithms and transports". */
#ifndef TORUS_TCOMM_TRANSPORT_NCCL_TRANSPORT_H
#define TORUS_TCOMM_TRANSPORT_NCCL_TRANSPORT_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "trainer/comm/core/comm.h"
#include "trainer/comm/tcomm_nccl.h"

/* The communicators match the tcomm_t's host groups: row and col are the
 * grid's, group the TORUS_GROUP group, leaders its member 0 of every
 * group (NULL elsewhere), peers the equal-index members of all groups. */
struct tcomm_nccl {
    tcomm_t *c;
    int device;
    ncclComm_t world, row, col, group, leaders, peers;
    cudaStream_t stream; /* every collective of the handle runs here */
    cudaEvent_t ready, done;
    void *wire; /* npad wire values of the bucket being reduced */
    size_t wire_bytes;
    unsigned long long *d_bad, *h_bad; /* device counter, pinned host copy */
    int aborted;                       /* communicators aborted: unusable */
};

/* Return TCOMM_ERR_TRANSPORT naming the rank, the call and NCCL's reason. */
#define TC_NCCL_TRY(rank, call)                                               \
    do {                                                                      \
        ncclResult_t _r = (call);                                             \
        if (_r != ncclSuccess)                                                \
            return TORUS_FAIL(TCOMM_ERR_TRANSPORT, "rank %d: %s: %s", (rank), \
                              #call, ncclGetErrorString(_r));                 \
    } while (0)

/* The wire holds count values padded with zeros to a multiple of the world
 * size, so that every reduce-scatter over world, a row or a group divides
 * it evenly; the pad is never copied back. */
static inline size_t tc_nccl_padded(const tcomm_nccl_t *n, size_t count)
{
    size_t P = (size_t)n->c->info.size;
    return (count + P - 1) / P * P;
}

/* NCCL's datatype for the wire format w. */
static inline ncclDataType_t tc_nccl_type(tcomm_wire w)
{
    return w == TCOMM_WIRE_FP16   ? ncclFloat16
           : w == TCOMM_WIRE_BF16 ? ncclBfloat16
                                  : ncclFloat32;
}

/* TCOMM_OK, or TCOMM_ERR_TRANSPORT once the communicators were aborted. */
tcomm_rc tc_nccl_alive(const tcomm_nccl_t *n);

/* Onto the wire, on n->stream: wait for the work queued on producer, grow
 * the wire buffer to npad = tc_nccl_padded(n, count) values of w, record
 * ev[0] (ev may be NULL), then cast x[0..count) times scale to the wire
 * with a zero pad. */
tcomm_rc tc_nccl_stage_in(tcomm_nccl_t *n, const float *x, size_t count,
                          float scale, tcomm_wire w, cudaStream_t producer,
                          const cudaEvent_t *ev);
/* Off the wire, on n->stream: widen the result back into x, adding its
 * inf/nan to the handle's count, record ev[1] (ev may be NULL) and the
 * handle's done event. */
tcomm_rc tc_nccl_stage_out(tcomm_nccl_t *n, float *x, size_t count,
                           tcomm_wire w, const cudaEvent_t *ev);

#endif
