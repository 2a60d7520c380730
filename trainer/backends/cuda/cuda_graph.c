/* cuda_graph.c: the cuda backend's step graphs and its deferred loss
 * (engine/backend.h: graph_begin/_end/_launch/_free, loss_sum).
 *
 * A graph records what the engine queues on the backend's stream between
 * graph_begin and graph_end (a training forward and backward, and what the
 * gradient hook queues on streams that wait on it and join it again, such
 * as NCCL's), and replays it with one cudaGraphLaunch. The capture mode is
 * thread-local: only this thread's calls that are unsafe in a capture (a
 * stream or device wait, cudaMalloc) are refused and end the capture,
 * which is what catches a host wait left in the step; the data loader's
 * threads, which allocate page-locked batches through host_alloc while a
 * step is recorded, are not affected, as they would be in the global
 * mode. A capture that fails leaves the stream as it was: graph_end
 * returns the error, and the caller runs eagerly. Each recording and
 * each launch counts in the backend's fast-path counters. */
#include "common/torus_error.h"
#include "trainer/backends/cuda/cuda_internal.h"

int _tcuda_graph_begin(teng_backend *bk)
{
    TCUDA_RT(cudaStreamBeginCapture(_tcuda(bk)->stream,
                                    cudaStreamCaptureModeThreadLocal));
    return TENG_OK;
}

int _tcuda_graph_end(teng_backend *bk, void **graph)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaError_t e = cudaStreamEndCapture(_tcuda(bk)->stream, &g);
    if (e == cudaSuccess && !g)
        e = cudaErrorStreamCaptureInvalidated;
    /* Should a library allocate inside the recording (an allocation
     * node), each launch frees the last launch's first. */
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(&x, g,
                                 cudaGraphInstantiateFlagAutoFreeOnLaunch);
    if (g)
        cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* capture errors are not sticky */
        return _tcuda_fail_rt(__FILE__, __LINE__, "recording the step graph",
                              (int)e);
    }
    *graph = x;
    _tcuda(bk)->fast.graph_capture++;
    return TENG_OK;
}

int _tcuda_graph_launch(teng_backend *bk, void *graph)
{
    TCUDA_RT(cudaGraphLaunch((cudaGraphExec_t)graph, _tcuda(bk)->stream));
    _tcuda(bk)->fast.graph_replay++;
    return TENG_OK;
}

void _tcuda_graph_free(teng_backend *bk, void *graph)
{
    (void)bk;
    if (graph)
        cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

/* The loss layer's forward queued its per-row losses' copy to pinned host
 * memory (cuda_exec.c); here the one wait, then the sum in row order (as
 * teng_host_xent does). */
int _tcuda_loss_sum(teng_backend *bk, const teng_net *net, double *sum)
{
    const tcuda_net *cn = net->bkstate;
    const teng_layer *l = &net->l[net->loss_layer];
    int n = net->t[l->in[0]].shape.n;
    TCUDA_RT(cudaStreamSynchronize(_tcuda(bk)->stream));
    *sum = 0.0;
    for (int i = 0; i < n && i < cn->host_loss_n; i++)
        *sum += cn->host_loss[i];
    return TENG_OK;
}
