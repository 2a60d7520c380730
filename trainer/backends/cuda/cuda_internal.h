/* trainer/backends/cuda/cuda_internal.h: state shared by the cuda
 * backend's source files (cuda_backend.c: device, memory, I/O, optimizer
 * ops; cuda_layers.c: the layers; cuda_util.c: the error helpers that all
 * of them call).
 *
 * The backend owns one device, one non-blocking stream (bk->stream) that
 * every call of a step goes to, one cuDNN and one cuBLAS handle bound to
 * that stream, and the convolution algorithm cache (cuda_algo.h), which
 * outlives nets. Per net (net->bkstate) it keeps, per layer, the cuDNN
 * descriptors and chosen algorithms built at plan, and the optimizer plan
 * (tcuda_optim.h) built at bind. Two modes: FP32 (backend "cuda": NCHW
 * tensors and OIHW/OI/C params, the canonical layouts, every one fp32, so
 * I/O is a plain copy) and FP16 ("cuda-fp16": NHWC activations and their
 * gradients in fp16, convolution and FC weights in OHWI with fp16 working
 * copies of their fp32 masters, tensor cores; BN parameters, statistics,
 * every gradient of a param, and the loss in fp32; tensor I/O converts
 * layout and type on the device through the scratch arena, param I/O the
 * layout on the host; cuda_layout.h has the index maths).
 *
 * The scratch arena: [0, ws) the largest convolution workspace, then at
 * tmp_off a temporary region (tmp_bytes) that one call at a time uses:
 * the BN+ReLU masked gradient, the fp16 weight and bias gradients before
 * their conversion to fp32, fp32 logits and their gradient, and the fp32
 * staging of tensor I/O in FP16 mode. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_INTERNAL_H
#define TORUS_TRAINER_BACKENDS_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "trainer/backends/cuda/cuda_algo.h"
#include "trainer/backends/cuda/cuda_fuse.h"
#include "trainer/backends/cuda/cuda_tune.h"
#include "trainer/backends/cuda/tcuda_fastpath.h"
#include "trainer/backends/cuda/tcuda_optim.h"
#include "trainer/engine/backend.h"

typedef struct {
    teng_backend_ops ops; /* the mode's: FP16 adds refresh_work */
    int device;
    int half; /* FP16 mode */
    cudaStream_t stream;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    /* cuBLAS's workspace, ours (cublasSetWorkspace): a step recorded as a
     * graph must not have cuBLAS allocate one while capturing. */
    void *blas_ws;
    /* convolution algorithms: measured, cached in the tune file, or
     * cuDNN's heuristics (cuda_tune.h; cuDNN's side in cuda_tune_dnn.c,
     * which reads the descriptors of tune_layer while a layer's keys are
     * resolved at plan) */
    tcuda_tuner tune;
    const struct tcuda_layer *tune_layer;
    /* what the fast paths did (tcuda_fastpath.h), for the run's summary */
    tcuda_fastpath fast;
    int said_bn; /* a BN fallback was said (once per process) */
    /* the 8-bit input path (cuda_input.c) */
    cudaStream_t copy;
    cudaEvent_t copied[2], used[2];
    uint8_t *stage[2]; /* device staging: images, then their flips */
    size_t stage_cap[2];
    int stage_n[2];
    /* labels (cuda_input.c, _tcuda_labels): two pinned slots, each
     * copied to the device labels on the copy stream */
    int32_t *lab_host[2];
    size_t lab_cap[2]; /* labels each slot holds */
    cudaEvent_t lab_copied[2], lab_free;
    int lab_live[2], lab_slot;
} tcuda_impl;

typedef struct tcuda_layer {
    cudnnTensorDescriptor_t x, y, b; /* input, output, bias/BN params */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnPoolingDescriptor_t pool;
    cudnnActivationDescriptor_t act;
    tcuda_algo_val fwd, bwd, bwf; /* conv: forward, data, filter */
    size_t ws_off[2];             /* BN: saved mean, saved 1/std */
    size_t rs_off, rs_bytes;      /* fused BN: cuDNN's reserve space */
} tcuda_layer;

typedef struct {
    tcuda_layer *l;     /* per layer */
    double *host_loss;  /* pinned: the loss layer's per-row losses */
    int host_loss_n;    /* rows it holds */
    tcuda_optim *optim; /* from bind to release */
    size_t tmp_off;     /* the scratch arena's temporary region */
    size_t tmp_bytes;
    /* Each BN's calls (cuda_fuse.h, tcuda_bn_state), FP16 mode,
     * training only: the plan, what runs now, the fused chains. The Ex
     * calls' workspace (ex_ws) sits at the start of the scratch arena;
     * each Ex BN's reserve space in its own layer workspace (rs_off),
     * which the engine keeps from the BN's forward to its backward.
     * relu: the ReLU descriptor of the activation ops. */
    tcuda_bn_state bn;
    cudnnActivationDescriptor_t relu;
    size_t ex_ws;
    /* The padded stem (cuda_stem.h, tcuda_stem_plan): the convolution
     * that reads the data input on stem_cp channels, or -1. */
    int stem, stem_cp;
} tcuda_net;

static inline tcuda_impl *_tcuda(teng_backend *bk)
{
    return bk->impl;
}

/* Offsets inside the workspaces and the scratch arena. */
#define TCUDA_ALIGN(n) (((n) + 255) & ~(size_t)255)

/* The mode's layout of activations and filters. */
static inline cudnnTensorFormat_t _tcuda_fmt(teng_backend *bk)
{
    return _tcuda(bk)->half ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

/* Bytes of an activation element in the backend's mode. */
static inline size_t _tcuda_esz(teng_backend *bk)
{
    return _tcuda(bk)->half ? 2 : 4;
}

/* The shape layer li's first input has on the device: the data input
 * padded for the stem (cuda_stem.h), else the engine's. */
static inline teng_shape _tcuda_in_shape(const teng_net *net, int li)
{
    const tcuda_net *cn = net->bkstate;
    teng_shape s = net->t[net->l[li].in[0]].shape;
    if (cn && cn->stem >= 0 && net->l[li].in[0] == net->input)
        s.c = cn->stem_cp;
    return s;
}

/* cuDNN's ops for a BN mode (cuda_fuse.h, tcuda_bn_mode). */
static inline cudnnBatchNormOps_t _tcuda_bn_ops(int mode)
{
    return mode == TCUDA_BN_EX_ADD_ACT ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
           : mode == TCUDA_BN_EX_ACT   ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION
                                       : CUDNN_BATCHNORM_OPS_BN;
}

/* The temporary region of the scratch arena (see above). */
static inline void *_tcuda_tmp(const teng_net *net)
{
    return (char *)net->scratch + ((const tcuda_net *)net->bkstate)->tmp_off;
}

/* Records "what: error string" (TORUS_FAIL with the caller's file:line)
 * and returns TENG_EBACKEND (cuda_util.c, below every other file). */
int _tcuda_fail_rt(const char *file, int line, const char *what, int err);
int _tcuda_fail_dnn(const char *file, int line, const char *what, int st);
int _tcuda_fail_blas(const char *file, int line, const char *what, int st);

/* Returns fail(file, line, what, status) from the caller when call's
 * status of type T is not ok: one shape for the checks below. `what` is
 * the call as written, stringified before its macros expand. */
#define _TCUDA_CHECK(T, ok, fail, what, call)                \
    do {                                                     \
        T _st = (call);                                      \
        if (_st != (ok))                                     \
            return fail(__FILE__, __LINE__, what, (int)_st); \
    } while (0)
#define TCUDA_RT(call) \
    _TCUDA_CHECK(cudaError_t, cudaSuccess, _tcuda_fail_rt, #call, call)
#define TCUDA_DNN(call)                                                       \
    _TCUDA_CHECK(cudnnStatus_t, CUDNN_STATUS_SUCCESS, _tcuda_fail_dnn, #call, \
                 call)
#define TCUDA_BLAS(call)                                                  \
    _TCUDA_CHECK(cublasStatus_t, CUBLAS_STATUS_SUCCESS, _tcuda_fail_blas, \
                 #call, call)
/* A kernel launcher's result (cuda_kernels.h): 0 or a cudaError_t. */
#define TCUDA_K(call) _TCUDA_CHECK(int, 0, _tcuda_fail_rt, #call, call)

/* The most workspace one convolution algorithm may ask for. */
#define TCUDA_WS_MAX ((size_t)1 << 30)

/* The tuner of bk (cuda_tune_dnn.c): the device's key, TCUDA_TUNE,
 * TCUDA_DETERMINISTIC=1, the file of opts.tune_cache (NULL or "": the
 * default under the user's cache folder; "none": no file). */
int _tcuda_tune_open(teng_backend *bk);

/* Layer lifecycle (cuda_layers.c). */
int _tcuda_plan(teng_backend *bk, teng_net *net, int batch);
/* The BN plan (cuda_layers.c), and the BN calls (cuda_exec.c): the Ex
 * seam (a fused chain's forward, an Ex BN's forward and backward) and
 * the once-said decline. */
int _tcuda_plan_bn(teng_backend *bk, teng_net *net);
int _tcuda_bn_fwd(teng_backend *bk, teng_net *net, int b, int training);
int _tcuda_bn_bwd(teng_backend *bk, teng_net *net, int b);
int _tcuda_bn_add_relu_fwd(teng_backend *bk, teng_net *net, int li);
int _tcuda_bn_ex_train(teng_backend *bk, teng_net *net, int b);
int _tcuda_bn_ex_bwd(teng_backend *bk, teng_net *net, int b);
void _tcuda_bn_declined(teng_backend *bk, const teng_net *net, int b,
                        const char *what, int status);
int _tcuda_bind(teng_backend *bk, teng_net *net);
void _tcuda_release(teng_backend *bk, teng_net *net);
int _tcuda_forward(teng_backend *bk, teng_net *net, int layer, int training);
int _tcuda_backward(teng_backend *bk, teng_net *net, int layer);
int _tcuda_grad_sum(teng_backend *bk, teng_net *net, int tensor);
unsigned _tcuda_bwd_reads(teng_backend *bk, const teng_net *net, int layer);

/* Step graphs and the deferred loss (cuda_graph.c). */
int _tcuda_graph_begin(teng_backend *bk);
int _tcuda_graph_end(teng_backend *bk, void **graph);
int _tcuda_graph_launch(teng_backend *bk, void *graph);
void _tcuda_graph_free(teng_backend *bk, void *graph);
int _tcuda_loss_sum(teng_backend *bk, const teng_net *net, double *sum);

/* The 8-bit input path (cuda_input.c): its stream, events and staging. */
int _tcuda_input_open(tcuda_impl *im);
void _tcuda_input_close(tcuda_impl *im);
int _tcuda_input_stage(teng_backend *bk, teng_net *net, int slot,
                       const uint8_t *px, const uint8_t *flips, int n);
int _tcuda_input_use(teng_backend *bk, teng_net *net, int slot,
                     const float *scale, const float *bias);
void *_tcuda_host_alloc(teng_backend *bk, size_t bytes);
int _tcuda_labels(teng_backend *bk, teng_net *net, const int32_t *labels,
                  int n);
/* After a kernel that reads net->labels (the loss): the next label copy
 * waits for this point of the compute stream only. */
int _tcuda_labels_read(tcuda_impl *im);
void _tcuda_host_free(teng_backend *bk, void *p);

#endif
