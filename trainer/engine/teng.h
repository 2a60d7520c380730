/* teng.h: the torus tensor and layer engine (public API, prefix teng_).
 *
 * A network is a list of layers in forward order that read and write
 * tensors named by small integer ids. Models are built with the teng_add_*
 * calls below, then teng_net_compile() hands the whole graph to a backend
 * (oneDNN on the CPU today, CUDA later), which picks memory layouts and
 * creates its primitives once. Every byte the net needs per step lives in
 * arenas allocated at compile time:
 *   - params:  all weights (their fp32 master copies, see below), one
 *              contiguous device buffer, forward order;
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
 * Errors (common/torus_error.h): functions return TENG_OK (0) or a
 * teng_status and record the message, with its source location, in
 * torus_error_msg(), the one accessor (included here). The codes are
 * negative, unlike other modules', because the teng_add_* calls return a
 * tensor id >= 0 on success.
 *
 * The net is opaque above the engine: models, the optimizer and
 * torus-train see it through the accessors below. Its definition is in
 * trainer/engine/graph.h, for the engine, its backends and their tests.
 *
 * Params: master and working copies. Every param has
 *   - a MASTER copy: fp32, in the params arena. The optimizer updates it,
 *     checkpoints save it, teng_param_read/write move it;
 *   - a WORKING copy: what forward and backward read, in the param's dtype.
 *     With dtype TENG_F32 (the CPU, today always) it is the master itself,
 *     the same buffer. A GPU backend may plan f16/bf16 working copies; it
 *     then refreshes them from the master after every update.
 * Gradients are fp32 and laid out like the master (the grads arena).
 */
#ifndef TORUS_TRAINER_ENGINE_H
#define TORUS_TRAINER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/torus_error.h"

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

/* Element type of a param's working copy (the master is always fp32). */
typedef enum {
    TENG_F32,
    TENG_F16,  /* declared for the GPU backend */
    TENG_BF16, /* declared for the GPU backend */
} teng_dtype;

/* Logical shape, always NCHW; fully connected outputs have h = w = 1. */
typedef struct {
    int n, c, h, w;
} teng_shape;

/* A param tensor (read-only above the engine: teng_net_param()). */
typedef struct teng_param {
    char name[48];
    int layer;
    teng_param_kind kind;
    int ndims;
    int dims[4];       /* canonical layout: OIHW, OI, or C */
    size_t count;      /* logical element count */
    size_t bytes;      /* backend layout size of the master (may include
                        * zero padding); the grad has the same */
    size_t offset;     /* byte offset in the params and grads arenas */
    int is_bn_or_bias; /* excluded from LARS and weight decay by default */
    teng_dtype dtype;  /* of the working copy */
    float *master;     /* device pointers: the fp32 master copy, */
    void *work;        /* the working copy (== master when TENG_F32), */
    float *grad;       /* and the fp32 gradient */
} teng_param;

/* What a layer is, for modules above the engine (teng_net_layer_info). */
typedef struct {
    teng_layer_kind kind;
    const char *name;
    int param0, nparam; /* its params: [param0, param0 + nparam) */
    int zero_gamma;     /* BN: gamma starts at 0 */
} teng_layer_info;

typedef struct teng_backend teng_backend;
typedef struct teng_net teng_net;

/* How to open a backend (trainer/backends/tbackends.h). */
typedef struct teng_backend_opts {
    int threads; /* CPU worker threads; 0: library default */
    int device;  /* GPU ordinal */
    int verbose;
    /* A backend that measures its algorithms (cuda): the file it caches
     * them in; NULL or "": its default, "none": no file. */
    const char *tune_cache;
} teng_backend_opts;

/* Called after each layer's backward with that layer's index: the seam
 * where gradient buckets start their all-reduce while backward goes on.
 * Params are laid out in forward order, so buckets fill from the end of
 * the grads arena towards its start. Return nonzero to abort backward. */
typedef int (*teng_grad_hook)(void *ctx, teng_net *net, int layer);

/* Where the grads arena comes from when not from the backend: bytes of
 * zero-filled, 64-byte aligned host memory that the engine never frees,
 * or NULL for the backend's own (see teng_net_set_grads_alloc). */
typedef void *(*teng_grads_alloc)(void *ctx, size_t bytes);

/* One param's momentum-SGD update (see trainer/optim/topt.h):
 *   v = momentum * v + lr * (g + wd * w);  w = w - v. */
typedef struct teng_sgd_args {
    float lr;       /* this param's learning rate (LARS trust included) */
    float momentum; /* already multiplied by the momentum correction */
    float wd;       /* weight decay lambda, added as lambda*w to g */
} teng_sgd_args;

/* ---- building ---- */
int teng_net_create(teng_net **out);
void teng_net_destroy(teng_net *net);
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
/* Loss scaling for mixed precision: backward starts from the loss's
 * gradient times scale (> 0; 1 by default; INFINITY makes every gradient
 * inf/nan, which the tests use to inject an overflow), so every gradient
 * comes out scaled; the optimizer divides it out again
 * (topt_sgd_step_scaled). The loss value itself is not scaled. */
void teng_net_set_loss_scale(teng_net *net, double scale);
/* A device double (the cuda backend's memory) that the loss backward reads
 * the scale from when it runs, instead of the value above (NULL: the
 * value above again). Backends with host arenas ignore it. */
void teng_net_set_loss_scale_dev(teng_net *net, const double *dev);
int teng_net_set_input(teng_net *net, const float *nchw);
int teng_net_set_labels(teng_net *net, const int32_t *labels);
/* The 8-bit input path: the data input from n (= the batch) u8 NHWC images
 * px of the input's C x H x W, mirrored where flips[i] != 0 and normalised
 * per channel as data/read/tdata_norm.h says (the loader's defer_flip
 * batches and tdata_loader_norm's constants give its float batches, bit
 * for bit). In two halves so that a GPU backend copies the next batch on a
 * copy stream while the current step runs: stage starts the copy into
 * slot 0 or 1 and returns; use waits for it and writes the input tensor;
 * px and flips must stay unchanged in between. Without the backend's
 * input path the engine does both on the host (a copy, then the
 * normalisation and the upload). */
int teng_net_stage_input_u8(teng_net *net, int slot, const uint8_t *px,
                            const uint8_t *flips, int n);
int teng_net_use_input_u8(teng_net *net, int slot, const float scale[3],
                          const float bias[3]);
/* 1 when the backend does the 8-bit input path itself (a GPU backend). */
int teng_backend_has_input_u8(const teng_backend *bk);
/* Host memory for buffers the backend copies from asynchronously
 * (page-locked on a GPU backend, plain otherwise); NULL when out of
 * memory. */
void *teng_backend_host_alloc(teng_backend *bk, size_t bytes);
void teng_backend_host_free(teng_backend *bk, void *p);
int teng_net_forward(teng_net *net, int training);
/* Backward from the loss layer, or from the last tensor's grad as set by
 * teng_tensor_write(..., grad=1, ...) when the net has no loss. */
int teng_net_backward(teng_net *net);
int teng_net_sync(teng_net *net);
/* Mean per-sample loss of the last forward (local batch); on a backend
 * that leaves it on the device, this waits for it (NAN if that fails). */
double teng_net_loss(const teng_net *net);
/* Step graphs (a GPU backend's; engine/run.c): 1 when the backend offers
 * them. teng_net_graph_begin starts recording the forward and backward
 * calls (and hooks) that follow, which then queue nothing that runs;
 * teng_net_graph_end turns the recording into *g, or fails; either way
 * the training step count is back where teng_net_graph_begin found it
 * (nothing ran: the replay, or the eager forward after a failure,
 * advances it).
 * teng_net_graph_replay runs g as one training forward and backward would
 * (the dropout step advances alike) on the current input, labels and
 * params: the same shapes, loss scale and global batch as when recorded,
 * which the caller keeps (or records again). teng_net_graph_free after
 * the work that uses g is done (teng_net_sync). */
typedef struct teng_graph teng_graph;
int teng_net_graph_supported(const teng_net *net);
/* Changes whenever the backend plans the net again (teng_net_set_batch
 * to another batch): a graph recorded before is stale then. */
unsigned teng_net_plan_id(const teng_net *net);
int teng_net_graph_begin(teng_net *net);
int teng_net_graph_end(teng_net *net, teng_graph **g);
int teng_net_graph_replay(teng_net *net, teng_graph *g);
void teng_net_graph_free(teng_net *net, teng_graph *g);
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
/* Debug: fill every buffer of the activations arena with NaN bytes (0xff:
 * a NaN in fp32, fp16 and fp64) as soon as its planned lifetime ends, so
 * that anything reading a buffer past its plan reads NaN instead of
 * another buffer's bytes; a run whose results match a run without it
 * read nothing outside the plan. Costs a fill per buffer per step. Also
 * on when TENG_POISON=1 is in the environment at compile. Not applied
 * while a step graph records. */
void teng_net_set_poison(teng_net *net, int on);

/* ---- data in canonical layouts (NCHW tensors, OIHW/OI/C params) ---- */
int teng_tensor_write(teng_net *net, int id, int grad, const float *src);
int teng_tensor_read(teng_net *net, int id, int grad, float *dst);
size_t teng_tensor_count(const teng_net *net, int id);
int teng_param_write(teng_net *net, int id, int grad, const float *src);
int teng_param_read(teng_net *net, int id, int grad, float *dst);
int teng_stats_write(teng_net *net, int id, const float *src);
int teng_stats_read(teng_net *net, int id, float *dst);

/* Top-1 and top-5 hits of the last forward against the labels. */
int teng_net_topk(teng_net *net, int *top1, int *top5);

/* ---- what the net holds (accessors for modules above the engine) ---- */
int teng_net_nparams(const teng_net *net);
const teng_param *teng_net_param(const teng_net *net, int id);
int teng_net_layer_info(const teng_net *net, int layer, teng_layer_info *out);
teng_shape teng_tensor_shape(const teng_net *net, int id);
int teng_net_batch(const teng_net *net);
/* BN running statistics: how many vectors, and each one's length. */
int teng_net_nstats(const teng_net *net);
size_t teng_stats_count(const teng_net *net, int id);
/* The whole stats arena (device memory, nfloats floats), e.g. for one
 * all-reduce of every rank's statistics. */
void *teng_net_stats_buffer(teng_net *net, size_t *nfloats);
size_t teng_net_acts_bytes(const teng_net *net);
/* Bytes of backend memory the net holds: its arenas and the optimizer
 * state allocated through it (device memory on a GPU backend). */
size_t teng_net_alloc_bytes(const teng_net *net);
/* Dropout masks hash (seed, step, layer, element); the step advances
 * with every training forward and is saved in checkpoints. */
void teng_net_set_dropout_seed(teng_net *net, uint64_t seed);
uint64_t teng_net_dropout_step(const teng_net *net);
void teng_net_set_dropout_step(teng_net *net, uint64_t step);
const char *teng_backend_name(const teng_backend *bk);
/* 1 when the backend records step graphs (teng_net_graph_begin). */
int teng_backend_graph_supported(const teng_backend *bk);
/* The backend's native queue (a cudaStream_t for the cuda backend) that
 * every launch of a step goes to, for work that must order itself after
 * it (the GPU gradient exchange); and whether its arenas are host memory
 * (0: device memory, which host code must not touch). */
void *teng_backend_stream(const teng_backend *bk);
int teng_backend_host_memory(const teng_backend *bk);
void teng_backend_close(teng_backend *bk);

/* ---- what an optimizer needs (run by the backend, on device) ----
 * Every call covers all params at once, so that a device backend runs a
 * few kernels per step and the host sees no per-tensor round trip.
 * Optimizer state (e.g. momentum) is a device buffer laid out like the
 * master params: param i's state lies at its offset. */
int teng_optstate_alloc(teng_net *net, void **state);
void teng_optstate_free(teng_net *net, void *state);
/* Param id's slice of state <-> canonical layout (checkpoints). */
int teng_optstate_read(teng_net *net, const void *state, int id, float *dst);
int teng_optstate_write(teng_net *net, void *state, int id, const float *src);
/* out[i] = the sum of squares of param i's master weights (grad = 0) or
 * of its gradient (grad = 1), fp32; out holds teng_net_nparams() floats
 * of host memory. */
int teng_param_sumsq(teng_net *net, int grad, float *out);
/* Sets *finite to 0 when the gradients hold an inf or a nan (or their sum
 * of squares overflows fp32), else 1: one teng_param_sumsq. */
int teng_net_grads_finite(teng_net *net, int *finite);
/* One fused momentum-SGD update of every param's master copy (and its
 * working copy) with its own args[i] and its slice of state. */
int teng_net_sgd_update(teng_net *net, void *state, const teng_sgd_args *args);

/* ---- the device step (a backend with device arenas: cuda) ----
 * The whole update on the device with no host wait: the inf/nan count of
 * the (summed) gradients, LARS norms, each tensor's arguments, the update
 * (nothing changes when the count is not 0), the loss-scale decision and
 * the loss of applied steps, summed for the progress line. The host reads
 * the decisions' state when it wants a host value (teng_net_dstep_read).
 * Per-tensor constants (optimizer config, fixed for the run): */
typedef struct {
    float wd; /* 0 on a tensor excluded from decay */
    int lars; /* LARS scales this tensor */
    float eta, eps;
} teng_tensor_hyper;
/* The loss-scale machine (topt_loss_scale_config) and the momentum. */
typedef struct {
    double min_scale, max_scale, growth, backoff;
    long interval;
    int dynamic;     /* backing off cures an overflow (--max-nonfinite) */
    double momentum; /* before the momentum correction */
    int correction;  /* momentum *= lr / the last applied step's lr */
} teng_dstep_config;
/* What the device decided (topt_loss_scale_state and more). */
typedef struct {
    double scale;           /* the loss scale the next step runs at */
    double used;            /* the one the last decided step ran at */
    long clean;             /* clean steps in a row */
    long overflows;         /* steps skipped in all */
    long skipped;           /* skips in a row that did not back the scale off */
    long worst;             /* the longest such run so far */
    long decided;           /* steps decided in all */
    unsigned long long bad; /* the last decided step's inf/nan count */
    double prev_lr;         /* the last applied step's lr (0: none) */
    double loss_sum;        /* the window: summed loss of applied steps */
    long applied;           /* and their number */
} teng_dstep_state;
/* 1 when the backend has the device step. */
int teng_net_dstep_supported(const teng_net *net);
/* Turn it on (h: teng_net_nparams() entries) with state s (the start or a
 * checkpoint's); also points the loss backward at the device's scale
 * (teng_net_set_loss_scale_dev). Blocking; kept across teng_net_set_batch
 * (the state goes through the host at a rebind). */
int teng_net_dstep_open(teng_net *net, const teng_tensor_hyper *h,
                        const teng_dstep_config *c, const teng_dstep_state *s);
/* Queue the step's update at learning rate lr on optimizer state vel
 * (teng_optstate_alloc), after the backward and the exchange: parts
 * TENG_DSTEP_ALL. In three parts for a step graph: BEGIN (host: hands lr
 * over; before the step's launch), QUEUE (device work only, the same
 * every step: a step graph may record it; vel), END (host: after the
 * step's launch). Each step runs BEGIN, QUEUE (or the graph holding it)
 * and END, in that order. */
enum {
    TENG_DSTEP_BEGIN = 1,
    TENG_DSTEP_QUEUE = 2,
    TENG_DSTEP_END = 4,
    TENG_DSTEP_ALL = 7
};
int teng_net_dstep(teng_net *net, void *vel, double lr, unsigned parts);
/* Wait for the last queued step's decision; *s = the state; with
 * reset_window, the window's loss sum and count start again at 0. */
int teng_net_dstep_read(teng_net *net, teng_dstep_state *s, int reset_window);

size_t teng_net_param_count(const teng_net *net);
/* Elements of the largest param or BN statistics vector (at least 1): a
 * host buffer this big holds any of them for the canonical accessors. */
size_t teng_net_largest_buffer(const teng_net *net);
void teng_net_summary(const teng_net *net, void *file);

#endif
