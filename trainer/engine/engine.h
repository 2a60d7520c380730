/* engine.h: the torus tensor and layer engine (public API, prefix teng_).
 *
 * A network is a list of layers in forward order that read and write
 * tensors named by small integer ids. Models are built with the teng_add_*
 * calls below, then teng_net_compile() hands the whole graph to a backend
 * (oneDNN on the CPU today, CUDA later), which picks memory layouts and
 * creates its primitives once. Every byte the net needs per step lives in
 * arenas allocated at compile time:
 *   - params:  all weights, one contiguous device buffer, forward order;
 *   - grads:   the same layout as params, so a gradient bucket for the
 *              all-reduce is simply a byte range of this buffer;
 *   - stats:   BN running mean/var (per-worker, averaged before evaluation);
 *   - acts:    forward activations, fwd->bwd workspaces and activation
 *              gradients, placed by their lifetimes over one step (a
 *              tensor lives until the last forward or backward that reads
 *              it), so memory of dead activations carries gradients;
 *   - scratch: the transient scratchpad shared by all primitives.
 * Nothing is allocated per step. Pointers are device pointers: the engine
 * never dereferences them; only the backend does.
 *
 * Errors: functions return TENG_OK (0) or a negative teng_status and leave
 * a message with the source location in teng_net_error().
 */
#ifndef TORUS_TRAINER_ENGINE_H
#define TORUS_TRAINER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    TENG_OK = 0,
    TENG_EINVAL = -1,   /* bad argument or graph */
    TENG_ENOMEM = -2,   /* arena or host allocation failed */
    TENG_EBACKEND = -3, /* the backend library refused */
    TENG_ESTATE = -4,   /* call out of order (e.g. run before compile) */
} teng_status;

typedef enum {
    TENG_L_INPUT,
    TENG_L_CONV,
    TENG_L_BN,
    TENG_L_RELU,
    TENG_L_MAXPOOL,
    TENG_L_AVGPOOL,
    TENG_L_GAP, /* global average pool */
    TENG_L_FC,
    TENG_L_ADD, /* residual add, optional fused ReLU */
    TENG_L_DROPOUT,
    TENG_L_XENT, /* softmax cross-entropy, optional label smoothing */
    TENG_L_NKINDS
} teng_layer_kind;

typedef enum {
    TENG_P_WEIGHT,
    TENG_P_BIAS,
    TENG_P_GAMMA,
    TENG_P_BETA,
} teng_param_kind;

/* Logical shape, always NCHW; fully connected outputs have h = w = 1. */
typedef struct {
    int n, c, h, w;
} teng_shape;

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

typedef struct teng_param {
    char name[48];
    int layer;
    teng_param_kind kind;
    int ndims;
    int dims[4];       /* canonical layout: OIHW, OI, or C */
    size_t count;      /* logical element count */
    size_t bytes;      /* backend layout size (may include zero padding) */
    size_t offset;     /* byte offset in the params and grads arenas */
    int is_bn_or_bias; /* excluded from LARS and weight decay by default */
    float *data;       /* device pointers */
    float *grad;
} teng_param;

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
    void *in_grad[2]; /* where backward writes dL/d(in[i]); NULL: skip */
    void *bk;         /* backend private state */
    /* outputs of the loss layer */
    double loss_sum; /* sum over the local batch of per-sample losses */
} teng_layer;

typedef struct teng_backend teng_backend;
typedef struct teng_net teng_net;

/* Called after each layer's backward with that layer's index: the seam
 * where gradient buckets start their all-reduce while backward goes on.
 * Params are laid out in forward order, so buckets fill from the end of
 * the grads arena towards its start. Return nonzero to abort backward. */
typedef int (*teng_grad_hook)(void *ctx, teng_net *net, int layer);

/* Where the grads arena comes from when not from the backend: bytes of
 * zero-filled, 64-byte aligned host memory that the engine never frees,
 * or NULL for the backend's own (see teng_net_set_grads_alloc). */
typedef void *(*teng_grads_alloc)(void *ctx, size_t bytes);

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
    int global_batch; /* loss normaliser kn (remark 3) */
    int compiled;
    uint64_t dropout_seed;
    uint64_t step; /* advances dropout masks */
    /* arenas (device memory) */
    void *params, *grads, *stats, *acts, *scratch;
    size_t params_bytes, stats_bytes, acts_bytes, scratch_bytes;
    int no_reuse;         /* keep every activation readable after forward */
    size_t scratch_cap;   /* allocated scratch (plan may ask for more) */
    int32_t *labels;      /* device, max_batch entries, in acts */
    int32_t *host_labels; /* host copies for top-k without per-step malloc */
    float *host_logits;
    teng_backend *bk;
    void *bkstate; /* backend's per-net state */
    double *prof;  /* if set: 2 * nl seconds, forward and backward
                    * per layer, accumulated (syncs every layer) */
    teng_grad_hook grad_hook;
    void *grad_hook_ctx;
    teng_grads_alloc grads_alloc; /* host backends: grads arena from here */
    void *grads_alloc_ctx;
    int grads_external; /* grads came from grads_alloc */
    char err[256];
};

/* ---- building ---- */
int teng_net_init(teng_net *net);
void teng_net_free(teng_net *net);
const char *teng_net_error(const teng_net *net);
const char *teng_strerror(int status);

/* Each returns the output tensor id, or a negative teng_status. */
int teng_add_input(teng_net *net, int c, int h, int w);
int teng_add_conv(teng_net *net, const char *name, int x, int k, int ksize,
                  int stride, int pad, int bias);
int teng_add_bn(teng_net *net, const char *name, int x, int relu,
                int zero_gamma);
int teng_add_relu(teng_net *net, const char *name, int x);
int teng_add_maxpool(teng_net *net, const char *name, int x, int ksize,
                     int stride, int pad);
int teng_add_avgpool(teng_net *net, const char *name, int x, int ksize,
                     int stride, int pad);
int teng_add_gap(teng_net *net, const char *name, int x);
int teng_add_fc(teng_net *net, const char *name, int x, int k, int bias);
int teng_add_residual(teng_net *net, const char *name, int a, int b, int relu);
int teng_add_dropout(teng_net *net, const char *name, int x, float p);
/* Returns the layer index of the loss (not a tensor id). */
int teng_add_xent(teng_net *net, const char *name, int logits, float smoothing);

/* ---- compiling and running ---- */
int teng_net_compile(teng_net *net, teng_backend *bk, int max_batch);
/* Changes the local batch (<= max_batch) without touching the arenas. */
int teng_net_set_batch(teng_net *net, int batch);
/* Loss is summed over the local batch and divided by this (remark 3). */
void teng_net_set_global_batch(teng_net *net, int global_batch);
int teng_net_set_input(teng_net *net, const float *nchw);
int teng_net_set_labels(teng_net *net, const int32_t *labels);
int teng_net_forward(teng_net *net, int training);
/* Backward from the loss layer, or from the last tensor's grad as set by
 * teng_tensor_write(..., grad=1, ...) when the net has no loss. */
int teng_net_backward(teng_net *net);
int teng_net_sync(teng_net *net);
/* Mean per-sample loss of the last forward (local batch). */
double teng_net_loss(const teng_net *net);
void teng_net_set_grad_hook(teng_net *net, teng_grad_hook fn, void *ctx);
/* Before compile: take the grads arena from fn (host-memory backends only;
 * a device backend allocates its own) instead of the backend, e.g. memory
 * that the ranks of a node share (tcomm_shared_alloc), so that the
 * gradient all-reduce can work where the gradients lie. */
void teng_net_set_grads_alloc(teng_net *net, teng_grads_alloc fn, void *ctx);
/* Before compile: also compute the gradient of the data input. */
void teng_net_set_input_grad(teng_net *net, int on);
/* Before compile: give every activation its own memory so any tensor can
 * be read after forward (tests, debugging); costs memory. By default only
 * tensors nobody consumes (outputs) are guaranteed readable. */
void teng_net_set_no_reuse(teng_net *net, int on);

/* ---- data in canonical layouts (NCHW tensors, OIHW/OI/C params) ---- */
int teng_tensor_write(teng_net *net, int id, int grad, const float *src);
int teng_tensor_read(teng_net *net, int id, int grad, float *dst);
size_t teng_tensor_count(const teng_net *net, int id);
int teng_param_write(teng_net *net, int id, int grad, const float *src);
int teng_param_read(teng_net *net, int id, int grad, float *dst);
/* Any device buffer laid out like param id (e.g. optimizer state at the
 * param's offset in a params-sized buffer) <-> canonical layout. */
int teng_buffer_write(teng_net *net, int id, void *dev, const float *src);
int teng_buffer_read(teng_net *net, int id, const void *dev, float *dst);
int teng_stats_write(teng_net *net, int id, const float *src);
int teng_stats_read(teng_net *net, int id, float *dst);

/* Top-1 and top-5 hits of the last forward against the labels. */
int teng_net_topk(teng_net *net, int *top1, int *top5);

size_t teng_net_param_count(const teng_net *net);
/* Elements of the largest param or BN statistics vector (at least 1): a
 * host buffer this big holds any of them for the canonical accessors. */
size_t teng_net_largest_buffer(const teng_net *net);
void teng_net_summary(const teng_net *net, void *file);

#endif
