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
 * arenas (sizes only shrink below the compiled max batch).
 */
#ifndef TORUS_TRAINER_BACKEND_H
#define TORUS_TRAINER_BACKEND_H

#include <stddef.h>

#include "trainer/engine/engine.h"

typedef struct teng_backend_opts {
    int threads; /* CPU worker threads; 0: library default */
    int device;  /* GPU ordinal */
    int verbose;
} teng_backend_opts;

/* Arguments of the fused momentum-SGD update (see trainer/optim). */
typedef struct teng_sgd_args {
    float lr;       /* this param's learning rate (LARS trust included) */
    float momentum; /* already multiplied by the momentum correction */
    float wd;       /* weight decay lambda, added as lambda*w to g */
} teng_sgd_args;

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
     * means all of them. */
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

    /* Optimizer kernels on device buffers of n floats. */
    int (*sumsq)(teng_backend *bk, const float *x, size_t n, float *out);
    int (*sgd_update)(teng_backend *bk, float *w, const float *g, float *v,
                      size_t n, const teng_sgd_args *a);
} teng_backend_ops;

struct teng_backend {
    const teng_backend_ops *ops;
    teng_backend_opts opts;
    /* The native queue all of this backend's work goes to, in order
     * (dnnl_stream_t here, cudaStream_t on the GPU): libraries that must
     * order their work with it, such as the gradient all-reduce in the
     * gradient hook, take it from here. */
    void *stream;
    char err[256];
    void *impl;
};

/* Opens a backend by name ("dnnl", later "cuda"); "auto" picks the best
 * one built in. Returns TENG_OK or TENG_EINVAL with a message in err. */
int teng_backend_open(const char *name, const teng_backend_opts *opts,
                      teng_backend **out, char *err, size_t errlen);
void teng_backend_close(teng_backend *bk);
/* Names of the backends compiled in, comma separated. */
const char *teng_backend_list(void);

#endif
