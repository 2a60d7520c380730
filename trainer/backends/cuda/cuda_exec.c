/* trainer/backends/cuda/cuda_exec.c: the cuda backend's forward and
 * backward of every layer and the gradient fan-in sums, on the
 * descriptors and algorithms cuda_layers.c planned. Everything is queued
 * on the backend's stream, with no host wait (a step graph records these
 * calls); the loss is read later (cuda_graph.c). BatchNorm's calls,
 * legacy and Ex, are cuda_bn.c's.
 *
 * FC in cuBLAS's column-major terms: x (n x C row-major) is X, C x n;
 * W (k x C, OI) is Wc, C x k; y (n x k) is Y, k x n. Forward Y = Wc^T X,
 * dX = Wc dY, dWc = X dY^T. */
#include <math.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/backends/cuda/cuda_fuse.h"
#include "trainer/backends/cuda/cuda_internal.h"
#include "trainer/backends/cuda/cuda_kernels.h"
#include "trainer/backends/cuda/cuda_stem.h"
#include "trainer/engine/rng.h"

static const float _one = 1.0f, _zero = 0.0f;

static tcuda_layer *_d(teng_net *net, int li)
{
    return &((tcuda_net *)net->bkstate)->l[li];
}

static size_t _count(const teng_net *net, int id)
{
    return teng_tensor_count(net, id);
}

/* The padded stem's filter (cuda_stem.h): the fp16 OHWI weights with
 * zero taps on the padding channels, built in the temporary region; the
 * other convolutions' own working copy. */
static const void *_filter(teng_backend *bk, teng_net *net, int li)
{
    const tcuda_net *cn = net->bkstate;
    const teng_param *p = &net->p[net->l[li].param0];
    if (li != cn->stem)
        return p->work;
    int c = net->t[net->input].shape.c;
    uint16_t *w = _tcuda_tmp(net);
    /* a failed launch is reported by the convolution's check */
    tcuda_k_stem_pad(_tcuda(bk)->stream, p->work, w,
                     p->count / (size_t)c * (size_t)cn->stem_cp, c,
                     cn->stem_cp);
    return w;
}

static int _conv_fwd(teng_backend *bk, teng_net *net, int li)
{
    tcuda_impl *im = _tcuda(bk);
    teng_layer *l = &net->l[li];
    tcuda_layer *d = _d(net, li);
    const teng_param *p = &net->p[l->param0];
    /* Each direction runs with the math type its algorithm was chosen
     * with (cuda_tune.h): the descriptor carries one at a time. */
    TCUDA_DNN(cudnnSetConvolutionMathType(d->conv,
                                          (cudnnMathType_t)d->fwd.math));
    TCUDA_DNN(cudnnConvolutionForward(
        im->dnn, &_one, d->x, net->t[l->in[0]].data, d->w,
        _filter(bk, net, li), d->conv,
        (cudnnConvolutionFwdAlgo_t)d->fwd.algo, net->scratch, d->fwd.workspace,
        &_zero, d->y, net->t[l->out].data));
    if (l->bias)
        TCUDA_DNN(cudnnAddTensor(im->dnn, &_one, d->b, p[1].work, &_one, d->y,
                                 net->t[l->out].data));
    return TENG_OK;
}

/* The weight (and bias) gradients: cuDNN writes them in the weights'
 * type; in FP16 mode through the temporary region, then to fp32. */
static int _conv_bwd_params(teng_backend *bk, teng_net *net, int li)
{
    tcuda_impl *im = _tcuda(bk);
    teng_layer *l = &net->l[li];
    tcuda_layer *d = _d(net, li);
    const teng_param *p = &net->p[l->param0];
    const void *dy = net->t[l->out].grad;
    const tcuda_net *cn = net->bkstate;
    int stem = li == cn->stem, c = net->t[l->in[0]].shape.c;
    /* the padded stem's gradient has the padded filter's elements */
    size_t wn = stem ? p->count / (size_t)c * (size_t)cn->stem_cp : p->count;
    char *tmp = _tcuda_tmp(net);
    void *dw = im->half ? (void *)tmp : (void *)p->grad;
    void *db =
        im->half ? (void *)(tmp + TCUDA_ALIGN(2 * wn)) : (void *)p[1].grad;
    TCUDA_DNN(cudnnSetConvolutionMathType(d->conv,
                                          (cudnnMathType_t)d->bwf.math));
    TCUDA_DNN(cudnnConvolutionBackwardFilter(
        im->dnn, &_one, d->x, net->t[l->in[0]].data, d->y, dy, d->conv,
        (cudnnConvolutionBwdFilterAlgo_t)d->bwf.algo, net->scratch,
        d->bwf.workspace, &_zero, d->w, dw));
    if (stem) /* the padding channels' gradient is dropped */
        TCUDA_K(tcuda_k_stem_unpad(im->stream, dw, p->grad, p->count, c,
                                   cn->stem_cp, 1));
    else if (im->half)
        TCUDA_K(tcuda_k_to_f32(im->stream, dw, p->grad, p->count));
    if (!l->bias)
        return TENG_OK;
    TCUDA_DNN(cudnnConvolutionBackwardBias(im->dnn, &_one, d->y, dy, &_zero,
                                           d->b, db));
    if (im->half)
        TCUDA_K(tcuda_k_to_f32(im->stream, db, p[1].grad, p[1].count));
    return TENG_OK;
}

static int _conv_bwd(teng_backend *bk, teng_net *net, int li)
{
    tcuda_impl *im = _tcuda(bk);
    teng_layer *l = &net->l[li];
    tcuda_layer *d = _d(net, li);
    const teng_param *p = &net->p[l->param0];
    const void *dy = net->t[l->out].grad;
    /* Weights first: their gradient is what the all-reduce waits on. */
    int rc = _conv_bwd_params(bk, net, li);
    if (rc)
        return rc;
    if (!l->in_grad[0])
        return TENG_OK;
    TCUDA_DNN(cudnnSetConvolutionMathType(d->conv,
                                          (cudnnMathType_t)d->bwd.math));
    TCUDA_DNN(cudnnConvolutionBackwardData(
        im->dnn, &_one, d->w, p->work, d->y, dy, d->conv,
        (cudnnConvolutionBwdDataAlgo_t)d->bwd.algo, net->scratch,
        d->bwd.workspace, &_zero, d->x, l->in_grad[0]));
    return TENG_OK;
}

/* C (m x n, ldc m) = op(A) op(B), column-major: cublasSgemm in FP32
 * mode; in FP16 mode fp16 A and B with fp32 accumulation, C in fp32 (c32)
 * or fp16. */
static int _gemm(teng_backend *bk, int ta, int tb, int m, int n, int k,
                 const void *a, int lda, const void *b, int ldb, void *c,
                 int c32)
{
    tcuda_impl *im = _tcuda(bk);
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (!im->half) {
        TCUDA_BLAS(cublasSgemm(im->blas, oa, ob, m, n, k, &_one, a, lda, b, ldb,
                               &_zero, c, m));
        return TENG_OK;
    }
    TCUDA_BLAS(cublasGemmEx(im->blas, oa, ob, m, n, k, &_one, a, CUDA_R_16F,
                            lda, b, CUDA_R_16F, ldb, &_zero, c,
                            c32 ? CUDA_R_32F : CUDA_R_16F, m,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return TENG_OK;
}

static int _fc_fwd(teng_backend *bk, teng_net *net, int li)
{
    tcuda_impl *im = _tcuda(bk);
    teng_layer *l = &net->l[li];
    const teng_param *p = &net->p[l->param0];
    int n = net->t[l->in[0]].shape.n, k = l->k;
    int c = (int)(_count(net, l->in[0]) / (size_t)n), rc;
    void *y = net->t[l->out].data;
    if ((rc = _gemm(bk, 1, 0, k, n, c, p->work, c, net->t[l->in[0]].data, c, y,
                    0)))
        return rc;
    if (l->bias)
        TCUDA_K(tcuda_k_bias_add(im->stream, im->half, y, p[1].work, n, k));
    return TENG_OK;
}

static int _fc_bwd(teng_backend *bk, teng_net *net, int li)
{
    tcuda_impl *im = _tcuda(bk);
    teng_layer *l = &net->l[li];
    const teng_param *p = &net->p[l->param0];
    int n = net->t[l->in[0]].shape.n, k = l->k;
    int c = (int)(_count(net, l->in[0]) / (size_t)n), rc;
    const void *dy = net->t[l->out].grad;
    /* The weight gradient is fp32 in both modes. */
    if ((rc = _gemm(bk, 0, 1, c, k, n, net->t[l->in[0]].data, c, dy, k, p->grad,
                    1)))
        return rc;
    if (l->bias)
        TCUDA_K(tcuda_k_bias_grad(im->stream, im->half, dy, p[1].grad, n, k));
    if (l->in_grad[0])
        return _gemm(bk, 0, 0, c, n, k, p->work, c, dy, k, l->in_grad[0], 0);
    return TENG_OK;
}

static uint64_t _dropout_key(const teng_net *net, int layer)
{
    /* The oneDNN backend's key: the same masks on both backends. */
    return teng_hash64(net->dropout_seed ^ teng_hash64(net->step) ^
                       ((uint64_t)layer << 48));
}

/* The logits in fp32: the tensor itself, or in FP16 mode its conversion
 * at the start of the temporary region (a failed launch is reported by
 * the next call's check). */
static const float *_logits(teng_backend *bk, teng_net *net,
                            const teng_layer *l)
{
    const void *z = net->t[l->in[0]].data;
    if (!_tcuda(bk)->half)
        return z;
    float *f = _tcuda_tmp(net);
    tcuda_k_to_f32(_tcuda(bk)->stream, z, f, _count(net, l->in[0]));
    return f;
}

/* dL/dlogits / global batch; in FP16 mode computed in fp32 after the
 * logits in the temporary region, then rounded to the fp16 gradient. */
static int _xent_bwd(teng_backend *bk, teng_net *net, int li)
{
    tcuda_impl *im = _tcuda(bk);
    teng_layer *l = &net->l[li];
    teng_shape s = net->t[l->in[0]].shape;
    size_t n = _count(net, l->in[0]);
    float *dz = im->half ? (float *)((char *)_tcuda_tmp(net) +
                                     TCUDA_ALIGN(sizeof(float) * n))
                         : (float *)l->in_grad[0];
    /* The device's loss-scale decision's value; an injected inf (a test's
     * overflow, teng_net_set_loss_scale) is the host's value. */
    if (net->loss_scale_dev && isfinite(net->loss_scale))
        TCUDA_K(tcuda_k_xent_dev(im->stream, _logits(bk, net, l), net->labels,
                                 s.n, s.c, l->smoothing,
                                 (double)net->global_batch, net->loss_scale_dev,
                                 l->ws, dz));
    else
        TCUDA_K(tcuda_k_xent(im->stream, _logits(bk, net, l), net->labels, s.n,
                             s.c, l->smoothing, teng_loss_norm(net), l->ws,
                             dz));
    int rc = _tcuda_labels_read(im);
    if (rc)
        return rc;
    if (im->half)
        TCUDA_K(tcuda_k_to_f16(im->stream, dz, l->in_grad[0], n));
    return TENG_OK;
}

/* The loss: per-row losses on the device and their copy to pinned host
 * memory, queued; no host wait here (a step graph records this call):
 * the engine's teng_net_loss waits and sums them (_tcuda_loss_sum). */
static int _xent_fwd(teng_backend *bk, teng_net *net, int li)
{
    tcuda_impl *im = _tcuda(bk);
    tcuda_net *cn = net->bkstate;
    teng_layer *l = &net->l[li];
    teng_shape s = net->t[l->in[0]].shape;
    if (s.n > cn->host_loss_n)
        return TORUS_FAIL(TENG_EINVAL, "batch %d above the planned %d", s.n,
                          cn->host_loss_n);
    TCUDA_K(tcuda_k_xent(im->stream, _logits(bk, net, l), net->labels, s.n, s.c,
                         l->smoothing, 1.0f, l->ws, NULL));
    int rc = _tcuda_labels_read(im);
    if (rc)
        return rc;
    TCUDA_RT(cudaMemcpyAsync(cn->host_loss, l->ws, sizeof(double) * s.n,
                             cudaMemcpyDeviceToHost, im->stream));
    return TENG_OK;
}

static int _dropout_fwd(teng_backend *bk, teng_net *net, int li, int training)
{
    tcuda_impl *im = _tcuda(bk);
    teng_layer *l = &net->l[li];
    teng_tensor *x = &net->t[l->in[0]], *y = &net->t[l->out];
    size_t n = _count(net, l->in[0]);
    /* FP16 is NHWC: masks hash the NCHW offsets, as the oneDNN backend's. */
    int chw[3] = {x->shape.c, x->shape.h, x->shape.w};
    if (training && l->p > 0.f)
        TCUDA_K(tcuda_k_dropout_fwd(im->stream, im->half, x->data, y->data,
                                    l->ws, n, l->p, _dropout_key(net, li),
                                    im->half, chw));
    else
        TCUDA_RT(cudaMemcpyAsync(y->data, x->data, _tcuda_esz(bk) * n,
                                 cudaMemcpyDeviceToDevice, im->stream));
    return TENG_OK;
}

int _tcuda_forward(teng_backend *bk, teng_net *net, int li, int training)
{
    tcuda_impl *im = _tcuda(bk);
    teng_layer *l = &net->l[li];
    tcuda_layer *d = _d(net, li);
    const tcuda_net *cn = net->bkstate;
    /* BN through the Ex calls (cuda_fuse.h): a BN fused into its add
     * waits for it. */
    switch (tcuda_bn_fwd_call(&cn->bn, li, training)) {
    case TCUDA_CALL_DEFERRED:
        return TENG_OK;
    case TCUDA_CALL_ADD_FUSED:
        return _tcuda_bn_add_relu_fwd(bk, net, li);
    case TCUDA_CALL_EX:
        return _tcuda_bn_ex_train(bk, net, li);
    default:
        break;
    }
    /* The input layer has no input, the loss layer no output. */
    void *x = l->in[0] >= 0 ? net->t[l->in[0]].data : NULL;
    void *y = l->out >= 0 ? net->t[l->out].data : NULL;
    switch (l->kind) {
    case TENG_L_INPUT:
        return TENG_OK;
    case TENG_L_CONV:
        return _conv_fwd(bk, net, li);
    case TENG_L_BN:
        return _tcuda_bn_fwd(bk, net, li, training);
    case TENG_L_RELU:
        TCUDA_DNN(cudnnActivationForward(im->dnn, d->act, &_one, d->x, x,
                                         &_zero, d->x, y));
        return TENG_OK;
    case TENG_L_MAXPOOL:
    case TENG_L_AVGPOOL:
    case TENG_L_GAP:
        TCUDA_DNN(cudnnPoolingForward(im->dnn, d->pool, &_one, d->x, x, &_zero,
                                      d->y, y));
        return TENG_OK;
    case TENG_L_FC:
        return _fc_fwd(bk, net, li);
    case TENG_L_ADD:
        TCUDA_K(tcuda_k_add(im->stream, im->half, x, net->t[l->in[1]].data, y,
                            _count(net, l->out), l->relu));
        return TENG_OK;
    case TENG_L_DROPOUT:
        return _dropout_fwd(bk, net, li, training);
    case TENG_L_XENT:
        return _xent_fwd(bk, net, li);
    default:
        return TORUS_FAIL(TENG_EINVAL, "unknown layer kind");
    }
}

static int _simple_bwd(teng_backend *bk, teng_net *net, int li)
{
    tcuda_impl *im = _tcuda(bk);
    teng_layer *l = &net->l[li];
    teng_tensor *x = &net->t[l->in[0]], *y = &net->t[l->out];
    tcuda_layer *d = _d(net, li);
    size_t n = _count(net, l->out);
    switch (l->kind) {
    case TENG_L_RELU:
        TCUDA_K(tcuda_k_relu_bwd(im->stream, im->half, y->data, y->grad,
                                 l->in_grad[0], n));
        return TENG_OK;
    case TENG_L_DROPOUT:
        if (l->p > 0.f)
            TCUDA_K(tcuda_k_dropout_bwd(im->stream, im->half, y->grad,
                                        l->in_grad[0], l->ws, n, l->p));
        else
            TCUDA_RT(cudaMemcpyAsync(l->in_grad[0], y->grad, _tcuda_esz(bk) * n,
                                     cudaMemcpyDeviceToDevice, im->stream));
        return TENG_OK;
    default: /* pooling */
        TCUDA_DNN(cudnnPoolingBackward(im->dnn, d->pool, &_one, d->y, y->data,
                                       d->y, y->grad, d->x, x->data, &_zero,
                                       d->x, l->in_grad[0]));
        return TENG_OK;
    }
}

int _tcuda_backward(teng_backend *bk, teng_net *net, int li)
{
    tcuda_impl *im = _tcuda(bk);
    teng_layer *l = &net->l[li];
    teng_tensor *y = l->out >= 0 ? &net->t[l->out] : NULL;
    switch (l->kind) {
    case TENG_L_INPUT:
        return TENG_OK;
    case TENG_L_CONV:
        return _conv_bwd(bk, net, li);
    case TENG_L_BN: {
        const tcuda_net *cn = net->bkstate;
        if (cn->bn.nex && cn->bn.bwd_ex[li])
            return _tcuda_bn_ex_bwd(bk, net, li);
        return _tcuda_bn_bwd(bk, net, li);
    }
    case TENG_L_FC:
        return _fc_bwd(bk, net, li);
    case TENG_L_ADD:
        /* In place: the output grad becomes the ReLU-masked grad that
         * both inputs share (see compile.c). */
        if (l->relu)
            TCUDA_K(tcuda_k_relu_bwd(im->stream, im->half, y->data, y->grad,
                                     y->grad, _count(net, l->out)));
        return TENG_OK;
    case TENG_L_XENT:
        return l->in_grad[0] ? _xent_bwd(bk, net, li) : TENG_OK;
    default:
        return l->in_grad[0] ? _simple_bwd(bk, net, li) : TENG_OK;
    }
}

int _tcuda_grad_sum(teng_backend *bk, teng_net *net, int tensor)
{
    teng_tensor *t = &net->t[tensor];
    TCUDA_K(tcuda_k_grad_sum(_tcuda(bk)->stream, _tcuda(bk)->half, t->contrib,
                             t->ncontrib, t->grad, _count(net, tensor)));
    return TENG_OK;
}
