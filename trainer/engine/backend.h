/* backend.h: the interface a compute backend implements for the engine.
 *
 * The engine owns the graph, the arena plan and the order of execution; a
 * backend owns device memory, memory layouts, primitives/kernels and its
 * stream (oneDNN stream on the CPU, a CUDA stream on the GPU). All buffer
 * arguments are device pointers into arenas allocated through alloc().
 *
 * Lifecycle for a net: plan(batch) sets every tensor's and param's byte
 * size and every layer's ws_bytes and the scratch size; the engine then
 * allocates the arenas and sets the pointers; bind() creates whatever the
 * backend needs to run on those pointers (oneDNN primitives and memory
 * objects, cuDNN descriptors); forward()/backward() then only launch work.
 * A batch change calls release(), plan() and bind() again on the same
 * arenas (sizes only shrink below the compiled max batch); the params keep
 * the layout of the compile (their values stay in the arenas), which a
 * backend whose layout choice depends on the batch keeps in
 * net->bkfixed.
 *
 * A backend reaches the engine through the descriptor it exports
 * (teng_backend_desc); the registry above the engine
 * (trainer/backends/registry.c) lists them, so the engine includes no
 * backend's header. Errors follow common/torus_error.h: a failing op
 * returns a teng_status after TORUS_FAIL, and the engine adds the layer or
 * the call in front (torus_error_prefix).
 */
#ifndef TORUS_TRAINER_BACKEND_H
#define TORUS_TRAINER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/engine/graph.h"

/* bwd_reads bit: the layer's workspace is read after the backward. */
#define TENG_READS_WS_LATE 16u

typedef struct teng_backend_ops {
    const char *name;
    int host_memory; /* arenas are plain host memory (teng_grads_alloc) */
    void (*destroy)(teng_backend *bk);
    /* Device memory, zero-filled and first-touched at allocation. */
    void *(*alloc)(teng_backend *bk, size_t bytes);
    void (*free)(teng_backend *bk, void *ptr);
    int (*upload)(teng_backend *bk, void *dst, const void *src, size_t n);
    int (*download)(teng_backend *bk, void *dst, const void *src, size_t n);
    int (*sync)(teng_backend *bk);

    int (*plan)(teng_backend *bk, teng_net *net, int batch);
    int (*bind)(teng_backend *bk, teng_net *net);
    void (*release)(teng_backend *bk, teng_net *net);
    int (*forward)(teng_backend *bk, teng_net *net, int layer, int training);
    int (*backward)(teng_backend *bk, teng_net *net, int layer);
    /* Which of the layer's tensors its backward reads: bit j for in[j],
     * bit 2 for out (everything else may be reused after forward). NULL
     * means all of them. Bit 3 with bit 2: the out a residual add may
     * still overwrite in place (its result is what the backward reads
     * there: a BN whose forward runs fused into the add's); the storage
     * then lives to this layer's backward. Bit 4 (TENG_READS_WS_LATE):
     * the backend reads the layer's workspace after the whole backward
     * (a device step reading the per-row losses): the workspace then
     * lives to the end of the step, and teng_net_late_ws hands it out;
     * any workspace read after its layer's backward must say so here, or
     * the planner gives its memory to gradients written later. */
    unsigned (*bwd_reads)(teng_backend *bk, const teng_net *net, int layer);
    /* t->grad = sum of t->contrib[0..ncontrib) (contrib[0] may be grad). */
    int (*grad_sum)(teng_backend *bk, teng_net *net, int tensor);

    /* Canonical layout <-> backend layout. tensor_io: grad selects the
     * gradient. param_io: dev is any buffer in param id's layout (the
     * param, its gradient, optimizer state). */
    int (*tensor_io)(teng_backend *bk, teng_net *net, int id, int grad,
                     float *host, int to_device);
    int (*param_io)(teng_backend *bk, teng_net *net, int id, void *dev,
                    float *host, int to_device);

    /* Optimizer kernels, each over every param of the net in one call (a
     * GPU backend: one segmented kernel, not one launch per tensor).
     * param_sumsq: out[i] = sum of squares, in fp32, of param i's slice
     * of buf, a buffer laid out like the params arena (the master weights
     * or the grads); out is host memory of net->np floats.
     * sgd_update: for every param i, the update of teng_sgd_args on its
     * master weights, gradient and slice of vel with a[i]; then refresh
     * the working copies that are not the master. */
    int (*param_sumsq)(teng_backend *bk, teng_net *net, const void *buf,
                       float *out);
    int (*sgd_update)(teng_backend *bk, teng_net *net, void *vel,
                      const teng_sgd_args *a);
    /* After the engine wrote master weights (initialisation, a restored
     * checkpoint): refresh the working copies. NULL when every working
     * copy is its master (dtype TENG_F32). */
    int (*refresh_work)(teng_backend *bk, teng_net *net);
    /* Optional device step (teng.h, teng_net_dstep_*; NULL: none).
     * dstep_open returns in *scale the device double the loss backward
     * reads; dstep_read waits for the last decision's copy. */
    int (*dstep_open)(teng_backend *bk, teng_net *net,
                      const teng_tensor_hyper *h, const teng_dstep_config *c,
                      const teng_dstep_state *s, const double **scale);
    int (*dstep)(teng_backend *bk, teng_net *net, void *vel, double lr,
                 unsigned parts);
    int (*dstep_read)(teng_backend *bk, teng_net *net, teng_dstep_state *s,
                      int reset_window);
    /* Optional: queue the copy of n labels (host memory, checked) to
     * net->labels, ordered after the work queued so far and before the
     * work queued next, and return without waiting for it (labels may be
     * reused at once). NULL: upload. */
    int (*upload_labels)(teng_backend *bk, teng_net *net, const int32_t *labels,
                         int n);

    /* Optional 8-bit input path (NULL: the engine normalises on the host,
     * engine/input.c). input_stage: start copying n u8 NHWC images (px)
     * and their n flip bytes to the device's staging slot `slot` (0 or 1)
     * on a copy stream, and return at once; px and flips stay unchanged
     * until input_use of that slot returns. input_use: wait for that copy
     * (the host too, so px may be reused after it), then normalise and
     * mirror the slot into the data input tensor on bk->stream with
     * data/read/tdata_norm.h's maths and scale/bias per channel.
     * host_alloc/host_free: page-locked host memory the copies can read
     * asynchronously (the loader's batch buffers). */
    int (*input_stage)(teng_backend *bk, teng_net *net, int slot,
                       const uint8_t *px, const uint8_t *flips, int n);
    int (*input_use)(teng_backend *bk, teng_net *net, int slot,
                     const float *scale, const float *bias);
    void *(*host_alloc)(teng_backend *bk, size_t bytes);
    void (*host_free)(teng_backend *bk, void *p);

    /* Optional: a loss the forward left on the device (no host wait in
     * the forward). loss_sum waits for it and sums the per-sample losses
     * of the last forward into *sum. NULL: the forward set loss_sum. */
    int (*loss_sum)(teng_backend *bk, const teng_net *net, double *sum);
    /* Optional step graphs (NULL: not offered). graph_begin: from here
     * to graph_end, the work queued on bk->stream (and on streams that
     * join it) is recorded, not run, and nothing may wait for it on the
     * host. graph_end: the recording as an executable graph in *graph, or
     * an error (the recording is dropped, the stream usable again).
     * graph_launch: runs it on bk->stream, after the work queued there.
     * graph_free: after the work that uses it is done. */
    int (*graph_begin)(teng_backend *bk);
    int (*graph_end)(teng_backend *bk, void **graph);
    int (*graph_launch)(teng_backend *bk, void *graph);
    void (*graph_free)(teng_backend *bk, void *graph);
} teng_backend_ops;

struct teng_backend {
    const teng_backend_ops *ops;
    teng_backend_opts opts;
    /* The native queue all of this backend's work goes to, in order
     * (dnnl_stream_t here, cudaStream_t on the GPU): libraries that must
     * order their work with it, such as the gradient all-reduce in the
     * gradient hook, take it from here. */
    void *stream;
    void *impl;
};

/* For a backend: the workspace of `layer` that it reads after the whole
 * backward, which its bwd_reads declared with TENG_READS_WS_LATE and the
 * plan keeps live to the end of the step. NULL, after TORUS_FAIL naming
 * the layer, when the layer has no workspace or did not declare it: a
 * late reader must take its pointer from here, so that an undeclared
 * read fails instead of reading memory the planner gave to others. */
void *teng_net_late_ws(const teng_net *net, int layer);

/* What a backend exports to the registry. */
typedef struct teng_backend_desc {
    const char *name;           /* "dnnl"; later "cudnn" */
    const char *const *aliases; /* NULL-terminated, or NULL ("cpu") */
    /* 1 if the backend can run here (a device is present); NULL: always. */
    int (*probe)(void);
    /* A new backend; TENG_OK or a teng_status after TORUS_FAIL. */
    int (*create)(const teng_backend_opts *opts, teng_backend **out);
} teng_backend_desc;

#endif
