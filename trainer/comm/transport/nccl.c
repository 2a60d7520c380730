/* transport/nccl.c: the NCCL transport (tcomm_nccl.h, and for the NCCL
 * algorithms transport/nccl_transport.h): what moves gradients in device
 * memory, and none of the algorithms (algo/nccl_allreduce.c composes
 * those from NCCL collectives on the communicators made here).
 *   - Communicators: world from a unique id rank 0 publishes through PMIx,
 *     then row, column, group, leaders and peers split from it.
 *   - The wire: one device buffer padded to a multiple of P (so every
 *     reduce-scatter divides evenly; the pad is zero and never copied
 *     back), and the staging onto it and off it on the communication
 *     stream, ordered after the producer stream by an event.
 *   - The waits: join, count and wait, with the deadline and the abort.
 *
 * A lost rank: NCCL's kernels wait for it forever, so the host never
 * blocks on the communication stream. tcomm_nccl_wait polls its event and
 * every communicator's ncclCommGetAsyncError, with the tcomm deadline
 * (tcomm_set_timeout / TCOMM_TIMEOUT) as the no-progress limit; on an
 * async error or at the deadline it aborts every communicator
 * (ncclCommAbort), then names the lost rank with the CPU path's search
 * over MPI (tc_find_lost_rank: the stuck ranks report, the one that never
 * does is named). */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "trainer/comm/core/comm.h"
#include "trainer/comm/tcomm_nccl.h"
#include "trainer/comm/transport/nccl_kernels.h"
#include "trainer/comm/transport/nccl_transport.h"
#include "trainer/comm/transport/transport.h"

#define CUDA_TRY(call) TC_CUDA_TRY(n->c->info.rank, call)
#define NCCL_TRY(call) TC_NCCL_TRY(n->c->info.rank, call)

static tcomm_rc _init(tcomm_nccl_t *n, int device)
{
    tcomm_t *c = n->c;
    int ndev = 0;
    CUDA_TRY(cudaGetDeviceCount(&ndev));
    if (ndev < 1)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT, "rank %d: no CUDA device",
                          c->info.rank);
    n->device = device >= 0 ? device : c->info.local_rank % ndev;
    CUDA_TRY(cudaSetDevice(n->device));
    /* One unique id, from rank 0, through the PMIx key-value store. */
    ncclUniqueId id;
    if (c->info.rank == 0) {
        NCCL_TRY(ncclGetUniqueId(&id));
        tcomm_rc rc = tcomm_pmix_put(c, "tcomm.nccl.id", &id, sizeof id);
        if (rc)
            return rc;
    }
    tcomm_rc rc = tcomm_pmix_fence(c);
    if (!rc)
        rc = tcomm_pmix_get(c, 0, "tcomm.nccl.id", &id, sizeof id);
    if (rc)
        return rc;
    NCCL_TRY(ncclCommInitRank(&n->world, c->info.size, id, c->info.rank));
    const tcomm_info *i = &c->info;
    NCCL_TRY(ncclCommSplit(n->world, i->row, i->col, &n->row, NULL));
    NCCL_TRY(ncclCommSplit(n->world, i->col, i->row, &n->col, NULL));
    NCCL_TRY(ncclCommSplit(n->world, i->group, i->rank, &n->group, NULL));
    NCCL_TRY(ncclCommSplit(n->world,
                           i->group_rank == 0 ? 0 : NCCL_SPLIT_NOCOLOR,
                           i->group, &n->leaders, NULL));
    NCCL_TRY(ncclCommSplit(n->world, i->group_rank, i->group, &n->peers, NULL));
    CUDA_TRY(cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&n->done, cudaEventDisableTiming));
    CUDA_TRY(cudaMalloc((void **)&n->d_bad, sizeof *n->d_bad));
    CUDA_TRY(cudaMallocHost((void **)&n->h_bad, sizeof *n->h_bad));
    CUDA_TRY(cudaMemsetAsync(n->d_bad, 0, sizeof *n->d_bad, n->stream));
    return TCOMM_OK;
}

tcomm_rc tcomm_nccl_init(tcomm_t *c, int device, tcomm_nccl_t **out)
{
    tcomm_nccl_t *n = calloc(1, sizeof *n);
    if (!n)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for the NCCL transport");
    n->c = c;
    tcomm_rc rc = _init(n, device);
    if (rc) {
        tcomm_nccl_finalize(n);
        return rc;
    }
    *out = n;
    return TCOMM_OK;
}

void tcomm_nccl_finalize(tcomm_nccl_t *n)
{
    if (!n)
        return;
    /* After an abort the stream may hold kernels that never end: no sync,
     * and the communicators are gone already. */
    if (n->stream && !n->aborted)
        cudaStreamSynchronize(n->stream);
    ncclComm_t *cs[] = {&n->row,     &n->col,   &n->group,
                        &n->leaders, &n->peers, &n->world};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        if (*cs[i] && !n->aborted)
            ncclCommDestroy(*cs[i]);
    cudaFree(n->wire);
    cudaFree(n->d_bad);
    cudaFreeHost(n->h_bad);
    if (n->ready)
        cudaEventDestroy(n->ready);
    if (n->done)
        cudaEventDestroy(n->done);
    if (n->stream)
        cudaStreamDestroy(n->stream);
    free(n);
}

/* The device wire buffer grown to bytes. Growing is rare (first bucket
 * of each size): wait for users of the old buffer on our stream only. */
static tcomm_rc _wire_reserve(tcomm_nccl_t *n, size_t bytes)
{
    if (bytes <= n->wire_bytes)
        return TCOMM_OK;
    CUDA_TRY(cudaStreamSynchronize(n->stream));
    cudaFree(n->wire);
    n->wire = NULL;
    CUDA_TRY(cudaMalloc(&n->wire, bytes));
    n->wire_bytes = bytes;
    return TCOMM_OK;
}

tcomm_rc tcomm_nccl_reserve(tcomm_nccl_t *n, size_t count, tcomm_wire w)
{
    return _wire_reserve(n, tc_nccl_padded(n, count) * tcomm_wire_bytes(w));
}

tcomm_rc tc_nccl_stage_in(tcomm_nccl_t *n, const float *x, size_t count,
                          float scale, tcomm_wire w, cudaStream_t producer,
                          const cudaEvent_t *ev)
{
    size_t npad = tc_nccl_padded(n, count);
    tcomm_rc rc = _wire_reserve(n, npad * tcomm_wire_bytes(w));
    if (rc)
        return rc;
    CUDA_TRY(cudaEventRecord(n->ready, producer));
    CUDA_TRY(cudaStreamWaitEvent(n->stream, n->ready, 0));
    if (ev)
        CUDA_TRY(cudaEventRecordWithFlags(ev[0], n->stream,
                                          cudaEventRecordExternal));
    CUDA_TRY((cudaError_t)tcomm_cuda_pack(x, n->wire, count, npad, scale,
                                          (int)w, n->stream));
    return TCOMM_OK;
}

tcomm_rc tc_nccl_stage_out(tcomm_nccl_t *n, float *x, size_t count,
                           tcomm_wire w, const cudaEvent_t *ev)
{
    CUDA_TRY((cudaError_t)tcomm_cuda_unpack(n->wire, x, count, (int)w, n->d_bad,
                                            n->stream));
    if (ev)
        CUDA_TRY(cudaEventRecordWithFlags(ev[1], n->stream,
                                          cudaEventRecordExternal));
    CUDA_TRY(cudaEventRecord(n->done, n->stream));
    return TCOMM_OK;
}

/* The first asynchronous error of any of our communicators. */
static ncclResult_t _async_error(tcomm_nccl_t *n, const char **which)
{
    ncclComm_t cs[] = {n->world, n->row,     n->col,
                       n->group, n->leaders, n->peers};
    static const char *names[] = {"world", "row",     "column",
                                  "group", "leaders", "peers"};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        ncclResult_t r = ncclSuccess;
        if (cs[i] && ncclCommGetAsyncError(cs[i], &r) != ncclSuccess)
            r = ncclInternalError;
        if (r != ncclSuccess && r != ncclInProgress) {
            *which = names[i];
            return r;
        }
    }
    return ncclSuccess;
}

/* Every communicator aborted, so no kernel of ours waits on a lost peer
 * any more; the handle is unusable after this. */
static void _abort_all(tcomm_nccl_t *n)
{
    ncclComm_t *cs[] = {&n->row,     &n->col,   &n->group,
                        &n->leaders, &n->peers, &n->world};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        if (*cs[i]) {
            ncclCommAbort(*cs[i]);
            *cs[i] = NULL;
        }
    n->aborted = 1;
}

/* The error after an async error (r, in communicator which) or the
 * deadline (r == ncclSuccess): abort, then name the lost rank as the CPU
 * path does. */
static tcomm_rc _lost(tcomm_nccl_t *n, ncclResult_t r, const char *which,
                      double limit)
{
    tcomm_t *c = n->c;
    _abort_all(n);
    int lost = c->singleton ? -1 : tc_find_lost_rank(c, -1);
    char who[32];
    c->peer_lost = 1;
    if (lost < 0)
        snprintf(who, sizeof who, "a rank");
    else
        snprintf(who, sizeof who, "rank %d", lost);
    if (r != ncclSuccess)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: %s is lost (NCCL reports '%s' in the %s "
                          "communicator); NCCL communicators aborted",
                          c->info.rank, who, ncclGetErrorString(r), which);
    return TORUS_FAIL(TCOMM_ERR_TIMEOUT,
                      "rank %d: %s is lost or stalled: no progress for %.0f s "
                      "(this rank waits in NCCL's gradient all-reduce on the "
                      "communication stream); NCCL communicators aborted",
                      c->info.rank, who, limit);
}

/* Wait for ev with the deadline, checking NCCL's async errors: the host
 * never blocks in a CUDA call that a lost peer could hold forever. */
static tcomm_rc _poll(tcomm_nccl_t *n, cudaEvent_t ev)
{
    double limit = n->c->timeout_s, start = tcomm_wtime();
    for (unsigned long spin = 0;; spin++) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess)
            return TCOMM_OK;
        if (e != cudaErrorNotReady)
            return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                              "rank %d: waiting for the NCCL stream: %s",
                              n->c->info.rank, cudaGetErrorString(e));
        const char *which = "";
        ncclResult_t r = _async_error(n, &which);
        if (r != ncclSuccess)
            return _lost(n, r, which, limit);
        if (limit > 0 && tcomm_wtime() - start > limit)
            return _lost(n, ncclSuccess, "", limit);
        /* Spin briefly (the usual case: done within the step), then nap
         * so a long wait costs no CPU. */
        if (spin > 1000) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Not after an abort: the communicators are gone. */
tcomm_rc tc_nccl_alive(const tcomm_nccl_t *n)
{
    return n->aborted ? TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                                   "rank %d: the NCCL communicators were "
                                   "aborted",
                                   n->c->info.rank)
                      : TCOMM_OK;
}

tcomm_rc tcomm_nccl_wait(tcomm_nccl_t *n, cudaStream_t consumer,
                         size_t *nonfinite)
{
    tcomm_rc rc = tc_nccl_alive(n);
    if (rc)
        return rc;
    if (nonfinite) {
        rc = tcomm_nccl_join(n, consumer);
        return rc ? rc : tcomm_nccl_count(n, consumer, nonfinite);
    }
    CUDA_TRY(cudaEventRecord(n->done, n->stream));
    CUDA_TRY(cudaStreamWaitEvent(consumer, n->done, 0));
    return TCOMM_OK;
}

tcomm_rc tcomm_nccl_join(tcomm_nccl_t *n, cudaStream_t consumer)
{
    tcomm_rc rc = tc_nccl_alive(n);
    if (rc)
        return rc;
    CUDA_TRY(cudaEventRecord(n->done, n->stream));
    CUDA_TRY(cudaStreamWaitEvent(consumer, n->done, 0));
    CUDA_TRY(cudaMemcpyAsync(n->h_bad, n->d_bad, sizeof *n->h_bad,
                             cudaMemcpyDeviceToHost, consumer));
    CUDA_TRY(cudaMemsetAsync(n->d_bad, 0, sizeof *n->d_bad, consumer));
    return TCOMM_OK;
}

tcomm_rc tcomm_nccl_count(tcomm_nccl_t *n, cudaStream_t consumer,
                          size_t *nonfinite)
{
    tcomm_rc rc = tc_nccl_alive(n);
    if (rc)
        return rc;
    CUDA_TRY(cudaEventRecord(n->done, consumer));
    rc = _poll(n, n->done);
    if (!rc)
        *nonfinite = (size_t)*n->h_bad;
    return rc;
}
