/* graph.h: the definition of a net (layers, tensors, params, arenas),
 * shared by the engine, its backends (which read the graph and set the
 * planned sizes) and the engine's own tests. Modules above the engine do
 * not include it: to them teng_net is opaque (teng.h's accessors).
 */
#ifndef TORUS_TRAINER_ENGINE_GRAPH_H
#define TORUS_TRAINER_ENGINE_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/engine/arena.h"
#include "trainer/engine/teng.h"

typedef struct teng_tensor {
    teng_shape shape; /* at the current batch */
    int producer;     /* layer index */
    int nconsumers;
    int needs_grad; /* 0 only for the data input */
    size_t bytes;   /* backend layout size at the current batch */
    size_t cap;     /* bytes at the compiled max batch (allocated) */
    void *data;     /* device pointer into the acts arena */
    void *grad;     /* device pointer: the summed dL/dtensor */
    int ncontrib;   /* >1: grad is summed from these before use */
    void *contrib[4];
    int gbuf; /* gradient buffer id (engine planning) */
} teng_tensor;

typedef struct teng_layer {
    teng_layer_kind kind;
    char name[40];
    int in[2];
    int nin;
    int out;
    /* hyper-parameters */
    int k, kh, kw, sh, sw, ph, pw, bias; /* conv / fc / pooling */
    int relu;                            /* BN, ADD: fused ReLU */
    int zero_gamma;      /* BN ends a residual branch: gamma starts at 0 */
    float eps, momentum; /* BN */
    float p;             /* dropout probability */
    float smoothing;     /* xent label smoothing */
    int param0, nparam;  /* params [param0, param0+nparam) */
    int stat0;           /* BN: running mean at stats[stat0], var at stat0+1 */
    /* planned by the backend */
    size_t ws_bytes; /* forward->backward workspace, in the acts arena */
    size_t ws_cap;   /* ws_bytes at the compiled max batch */
    void *ws;
    int ws_late;      /* ws lives to the end of the step (TENG_READS_WS_LATE) */
    int ws_buf;       /* ws's buffer in the net's acts plan; -1: none */
    void *in_grad[2]; /* where backward writes dL/d(in[i]); NULL: skip */
    void *bk;         /* backend private state */
    /* outputs of the loss layer */
    double loss_sum; /* sum over the local batch of per-sample losses */
} teng_layer;

struct teng_net {
    teng_tensor *t;
    int nt, cap_t;
    teng_layer *l;
    int nl, cap_l;
    teng_param *p;
    int np, cap_p;
    int nstats;       /* BN running statistics vectors */
    size_t *stat_off; /* byte offsets in the stats arena */
    int *stat_len;
    int input;      /* the data input tensor */
    int input_grad; /* compute dL/dinput too (gradient checks) */
    int loss_layer; /* -1: none (backward seeded by the caller) */
    int max_batch, batch;
    int global_batch;  /* loss normaliser kn (remark 3) */
    double loss_scale; /* the loss gradient is multiplied by this (1) */
    /* Device memory holding the loss scale as a double, which a device
     * loss backward reads at run time instead of loss_scale (so a
     * recorded step graph follows a scale the device changes); NULL: use
     * loss_scale. Only a backend with device arenas reads it. */
    const double *loss_scale_dev;
    /* the device step (teng_net_dstep_open), kept for a rebind */
    int dstep_on;
    teng_tensor_hyper *dstep_h;
    teng_dstep_config dstep_c;
    int compiled;
    uint64_t dropout_seed;
    uint64_t step;        /* advances dropout masks */
    unsigned plans;       /* backend plans so far (compile, set_batch) */
    int capturing;        /* between teng_net_graph_begin and _end */
    uint64_t graph_step0; /* step at teng_net_graph_begin */
    /* arenas (device memory) */
    void *params, *grads, *stats, *acts, *scratch;
    size_t params_bytes, stats_bytes, acts_bytes, scratch_bytes;
    int no_reuse; /* keep every activation readable after forward */
    /* The acts arena's plan as compiled: each buffer's bytes, lifetime (in
     * the step's time axis, compile.c) and offset; what the poison mode
     * walks and the liveness tests read. */
    teng_interval *acts_iv;
    int acts_niv;
    int poison; /* fill each acts buffer with NaN once its lifetime ends */
    void *poison_src; /* host NaN bytes, for backends without host memory */
    size_t poison_cap;
    size_t scratch_cap;   /* allocated scratch (plan may ask for more) */
    int32_t *labels;      /* device, max_batch entries, in acts */
    int32_t *host_labels; /* host copies for top-k without per-step malloc */
    float *host_logits;
    teng_backend *bk;
    void *bkstate; /* backend's per-net state */
    /* What the backend fixed at compile and a batch change must keep (the
     * params' layouts: the params, grads and optimizer state arenas hold
     * values in them); malloc()ed by the backend, free()d by
     * teng_net_free. NULL: the backend's layouts never depend on the
     * batch. */
    void *bkfixed;
    double *prof; /* if set: 2 * nl seconds, forward and backward
                   * per layer, accumulated (syncs every layer) */
    teng_grad_hook grad_hook;
    void *grad_hook_ctx;
    teng_grads_alloc grads_alloc; /* host backends: grads arena from here */
    void *grads_alloc_ctx;
    int grads_external; /* grads came from grads_alloc */
    float *host_sumsq;  /* np floats: teng_net_grads_finite's buffer */
    size_t alloc_bytes; /* asked of bk->ops->alloc so far, net of frees */
    /* the host fallback of the 8-bit input path (engine/input.c) */
    uint8_t *in_px[2]; /* staged images, then their flips */
    size_t in_cap[2];
    int in_n[2];   /* images staged in each slot (0: none) */
    float *in_f32; /* the normalised batch, canonical NCHW */
    size_t in_f32_cap;
};

/* What the loss layer's backward divides (softmax - target) by: the
 * global batch over the loss scale. With a power-of-two scale the
 * division is exact, so the scaled gradients are exactly scale times the
 * unscaled ones (barring overflow and underflow). */
static inline float teng_loss_norm(const teng_net *net)
{
    return (float)((double)net->global_batch / net->loss_scale);
}

/* For code that embeds a net (the engine's tests): initialise and free
 * one in place; everyone else uses teng_net_create/teng_net_destroy. */
int teng_net_init(teng_net *net);
void teng_net_free(teng_net *net);

#endif
