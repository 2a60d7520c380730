/* trainer/backends/cuda/cuda_layers.c: every engine layer on cuDNN,
 * cuBLAS and the backend's kernels (cuda_kernels.h), FP32, NCHW.
 *
 * plan() builds each layer's cuDNN descriptors at the batch, picks each
 * convolution's three algorithms (through the algorithm cache: cuDNN is
 * asked once per shape) and sizes the scratch arena to the largest
 * workspace any of them needs, so no call of a step allocates. bind()
 * builds the optimizer plan on the arena pointers. forward()/backward()
 * only queue work on the backend's stream, with no host wait; the loss is
 * read when the engine asks for it (cuda_graph.c).
 *
 * Precision: in FP32 mode convolutions run with CUDNN_FMA_MATH and cuBLAS
 * in pedantic FP32 (no TF32), so the mode matches the oneDNN backend
 * within FP32 rounding; in FP16 mode with tensor-op math on fp16 data,
 * accumulating in fp32. BN statistics are FP32 in both (cuDNN's spatial
 * BN, whose running variance is the unbiased one, as
 * teng_host_bn_running's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "trainer/backends/cuda/cuda_fuse.h"
#include "trainer/backends/cuda/cuda_internal.h"
#include "trainer/backends/cuda/cuda_kernels.h"
#include "trainer/engine/rng.h"

static int _einval(const char *msg)
{
    return TORUS_FAIL(TENG_EINVAL, "%s", msg);
}

/* The activations' (and fp16 working copies') cuDNN type. */
static cudnnDataType_t _dt(teng_backend *bk)
{
    return _tcuda(bk)->half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

static int _tensor4(cudnnTensorDescriptor_t *d, cudnnTensorFormat_t fmt,
                    cudnnDataType_t dt, int n, int c, int h, int w)
{
    if (!*d)
        TCUDA_DNN(cudnnCreateTensorDescriptor(d));
    TCUDA_DNN(cudnnSetTensor4dDescriptor(*d, fmt, dt, n, c, h, w));
    return TENG_OK;
}

static int _tshape(teng_backend *bk, cudnnTensorDescriptor_t *d, teng_shape s)
{
    return _tensor4(d, _tcuda_fmt(bk), _dt(bk), s.n, s.c, s.h, s.w);
}

/* The scratch arena's temporary region holds at least bytes. */
static void _tmp_need(teng_net *net, size_t bytes)
{
    tcuda_net *cn = net->bkstate;
    if (bytes > cn->tmp_bytes)
        cn->tmp_bytes = bytes;
}

/* ---- convolution algorithms (cuda_tune.h) ---- */

static int _algo(teng_backend *bk, const teng_layer *l, teng_shape si,
                 tcuda_layer *d, int dir, tcuda_algo_val *out)
{
    tcuda_impl *im = _tcuda(bk);
    tcuda_algo_key key = {
        dir,   si.n,  si.c,  si.h,  si.w,  l->k,         l->kh,
        l->kw, l->sh, l->sw, l->ph, l->pw, (int)_dt(bk), (int)_tcuda_fmt(bk)};
    im->tune_layer = d;
    int rc = tcuda_tune_resolve(&im->tune, &key, out);
    im->tune_layer = NULL;
    if (rc || !bk->opts.verbose)
        return rc;
    torus_note("cuda: %s %dx%dx%dx%d k%d %dx%d/%d: algo %d, math %d, %zu B",
               dir == TCUDA_FWD        ? "fwd"
               : dir == TCUDA_BWD_DATA ? "bwd-data"
                                       : "bwd-filter",
               si.n, si.c, si.h, si.w, l->k, l->kh, l->kw, l->sh, out->algo,
               out->math, out->workspace);
    return TENG_OK;
}

/* After a plan: the counters of the run's summary, and the file written
 * when something was measured (its problems are said, not errors). */
static void _tune_done(tcuda_impl *im)
{
    im->fast.conv_tuned = im->tune.tuned;
    im->fast.conv_cached = im->tune.cached;
    im->fast.conv_heuristic = im->tune.heuristic;
    tcuda_tune_save(&im->tune);
}

/* ---- plan ---- */

/* Tensors, filter and convolution; the output must be the engine's. */
static int _conv_descs(teng_backend *bk, teng_net *net, tcuda_layer *d, int li)
{
    teng_layer *l = &net->l[li];
    teng_shape si = _tcuda_in_shape(net, li), so = net->t[l->out].shape;
    int n, c, h, w, rc;
    if ((rc = _tshape(bk, &d->x, si)) || (rc = _tshape(bk, &d->y, so)))
        return rc;
    TCUDA_DNN(cudnnCreateFilterDescriptor(&d->w));
    TCUDA_DNN(cudnnSetFilter4dDescriptor(d->w, _dt(bk), _tcuda_fmt(bk), l->k,
                                         si.c, l->kh, l->kw));
    TCUDA_DNN(cudnnCreateConvolutionDescriptor(&d->conv));
    /* Accumulation in fp32 in both modes. */
    TCUDA_DNN(cudnnSetConvolution2dDescriptor(
        d->conv, l->ph, l->pw, l->sh, l->sw, 1, 1, CUDNN_CROSS_CORRELATION,
        CUDNN_DATA_FLOAT));
    TCUDA_DNN(cudnnSetConvolutionMathType(
        d->conv, _tcuda(bk)->half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    TCUDA_DNN(cudnnGetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &n, &c,
                                                    &h, &w));
    if (n != so.n || c != so.c || h != so.h || w != so.w)
        return _einval("cuDNN's convolution output shape is not the "
                       "engine's");
    if (l->bias &&
        (rc = _tensor4(&d->b, _tcuda_fmt(bk), _dt(bk), 1, l->k, 1, 1)))
        return rc;
    return TENG_OK;
}

static int _plan_conv(teng_backend *bk, teng_net *net, tcuda_layer *d, int li)
{
    teng_layer *l = &net->l[li];
    teng_shape si = _tcuda_in_shape(net, li); /* the stem's: padded */
    int rc;
    if ((rc = _conv_descs(bk, net, d, li)) ||
        (rc = _algo(bk, l, si, d, TCUDA_FWD, &d->fwd)) ||
        (rc = _algo(bk, l, si, d, TCUDA_BWD_FILTER, &d->bwf)))
        return rc;
    if (net->t[l->in[0]].needs_grad &&
        (rc = _algo(bk, l, si, d, TCUDA_BWD_DATA, &d->bwd)))
        return rc;
    size_t ws = d->fwd.workspace > d->bwf.workspace ? d->fwd.workspace
                                                    : d->bwf.workspace;
    ws = ws > d->bwd.workspace ? ws : d->bwd.workspace;
    if (ws > net->scratch_bytes)
        net->scratch_bytes = ws;
    /* FP16: cuDNN writes the weight and bias gradients in fp16, converted
     * to the fp32 grads after. */
    size_t wcount = (size_t)l->k * si.c * l->kh * l->kw;
    if (_tcuda(bk)->half)
        _tmp_need(net, TCUDA_ALIGN(2 * wcount) + TCUDA_ALIGN(2 * (size_t)l->k));
    return TENG_OK;
}

static int _relu_desc(tcuda_layer *d)
{
    TCUDA_DNN(cudnnCreateActivationDescriptor(&d->act));
    TCUDA_DNN(cudnnSetActivationDescriptor(d->act, CUDNN_ACTIVATION_RELU,
                                           CUDNN_NOT_PROPAGATE_NAN, 0.0));
    return TENG_OK;
}

static int _plan_bn(teng_backend *bk, teng_net *net, tcuda_layer *d, int li)
{
    teng_layer *l = &net->l[li];
    teng_tensor *x = &net->t[l->in[0]];
    int rc;
    if (!x->needs_grad)
        return _einval("batch norm directly on the data input");
    if (l->eps < CUDNN_BN_MIN_EPSILON)
        return _einval("batch norm epsilon below cuDNN's minimum");
    if ((rc = _tshape(bk, &d->x, x->shape)))
        return rc;
    TCUDA_DNN(cudnnCreateTensorDescriptor(&d->b));
    TCUDA_DNN(
        cudnnDeriveBNTensorDescriptor(d->b, d->x, CUDNN_BATCHNORM_SPATIAL));
    if (l->relu && (rc = _relu_desc(d)))
        return rc;
    /* Workspace: the batch mean and 1/std that backward reuses. */
    d->ws_off[0] = 0;
    d->ws_off[1] = TCUDA_ALIGN(sizeof(float) * (size_t)x->shape.c);
    l->ws_bytes = 2 * d->ws_off[1];
    /* The fused ReLU's masked gradient goes through scratch: the output
     * gradient may be shared (a residual's), so it is not masked in place. */
    if (l->relu)
        _tmp_need(net, _tcuda_esz(bk) * teng_tensor_count(net, l->in[0]));
    return TENG_OK;
}

static int _plan_pool(teng_backend *bk, tcuda_layer *d, teng_net *net, int li)
{
    teng_layer *l = &net->l[li];
    int rc;
    cudnnPoolingMode_t mode = l->kind == TENG_L_MAXPOOL
                                  ? CUDNN_POOLING_MAX
                                  : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    if ((rc = _tshape(bk, &d->x, net->t[l->in[0]].shape)) ||
        (rc = _tshape(bk, &d->y, net->t[l->out].shape)))
        return rc;
    TCUDA_DNN(cudnnCreatePoolingDescriptor(&d->pool));
    TCUDA_DNN(cudnnSetPooling2dDescriptor(d->pool, mode,
                                          CUDNN_NOT_PROPAGATE_NAN, l->kh, l->kw,
                                          l->ph, l->pw, l->sh, l->sw));
    return TENG_OK;
}

static int _plan_layer(teng_backend *bk, teng_net *net, tcuda_layer *d, int li)
{
    teng_layer *l = &net->l[li];
    teng_shape s = net->t[l->in[0] >= 0 ? l->in[0] : l->out].shape;
    l->ws_bytes = 0;
    switch (l->kind) {
    case TENG_L_INPUT:
    case TENG_L_FC:
    case TENG_L_ADD:
        return TENG_OK;
    case TENG_L_CONV:
        return _plan_conv(bk, net, d, li);
    case TENG_L_BN:
        return _plan_bn(bk, net, d, li);
    case TENG_L_RELU: {
        int rc = _tshape(bk, &d->x, s);
        return rc ? rc : _relu_desc(d);
    }
    case TENG_L_MAXPOOL:
    case TENG_L_AVGPOOL:
    case TENG_L_GAP:
        return _plan_pool(bk, d, net, li);
    case TENG_L_DROPOUT: /* the mask: a byte per element */
        l->ws_bytes = TCUDA_ALIGN(teng_tensor_count(net, l->in[0]));
        return TENG_OK;
    case TENG_L_XENT: /* per-row losses */
        if (s.h != 1 || s.w != 1)
            return _einval("cross-entropy logits must come from a fully "
                           "connected layer (N x K)");
        l->ws_bytes = TCUDA_ALIGN(sizeof(double) * (size_t)s.n);
        /* FP16: fp32 logits and their fp32 gradient. */
        if (_tcuda(bk)->half)
            _tmp_need(net, 2 * TCUDA_ALIGN(sizeof(float) * s.n * (size_t)s.c));
        return TENG_OK;
    default:
        return _einval("unknown layer kind");
    }
}

/* The pinned host buffer the loss comes back through. */
static int _plan_loss(teng_net *net, tcuda_net *cn)
{
    if (net->loss_layer < 0)
        return TENG_OK;
    int n = net->t[net->l[net->loss_layer].in[0]].shape.n;
    TCUDA_RT(cudaMallocHost((void **)&cn->host_loss, sizeof(double) * n));
    memset(cn->host_loss, 0, sizeof(double) * n); /* before any forward */
    cn->host_loss_n = n;
    return TENG_OK;
}

/* FP16 mode: which params the layers read in fp16 (convolution weights
 * and biases, FC weights; BN scale and shift and the FC bias stay fp32). */
static teng_dtype _param_dtype(teng_backend *bk, const teng_net *net,
                               const teng_param *p)
{
    teng_layer_kind k = net->l[p->layer].kind;
    if (!_tcuda(bk)->half)
        return TENG_F32;
    if (k == TENG_L_CONV || (k == TENG_L_FC && p->kind == TENG_P_WEIGHT))
        return TENG_F16;
    return TENG_F32;
}

/* Tensor and param sizes in the mode's layout; FP16 tensor I/O stages
 * fp32 through the temporary region. */
static void _plan_sizes(teng_backend *bk, teng_net *net)
{
    const tcuda_net *cn = net->bkstate;
    for (int i = 0; i < net->nt; i++) {
        size_t n = teng_tensor_count(net, i);
        net->t[i].bytes = _tcuda_esz(bk) * n;
        if (_tcuda(bk)->half)
            _tmp_need(net, sizeof(float) * n);
    }
    /* The padded input: its I/O stages fp32 NCHW, then fp16 NHWC
     * unpadded (cuda_backend.c). */
    if (cn->stem >= 0) {
        size_t n = teng_tensor_count(net, net->input);
        int c = net->t[net->input].shape.c;
        net->t[net->input].bytes = 2 * (n / (size_t)c * (size_t)cn->stem_cp);
        _tmp_need(net, TCUDA_ALIGN(sizeof(float) * n) + 2 * n);
    }
    for (int i = 0; i < net->np; i++) {
        net->p[i].bytes = sizeof(float) * net->p[i].count;
        net->p[i].dtype = _param_dtype(bk, net, &net->p[i]);
    }
}

int _tcuda_plan(teng_backend *bk, teng_net *net, int batch)
{
    (void)batch; /* the shapes carry it */
    tcuda_net *cn = calloc(1, sizeof(*cn));
    if (!cn)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    net->bkstate = cn;
    cn->l = calloc((size_t)net->nl, sizeof(*cn->l));
    if (!cn->l)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    net->scratch_bytes = 0;
    tcuda_switches sw;
    tcuda_switches_getenv(&sw, _tcuda(bk)->half);
    cn->stem = tcuda_stem_plan(net, &sw, &cn->stem_cp);
    for (int i = 0; i < net->nl; i++) {
        int rc = _plan_layer(bk, net, &cn->l[i], i);
        if (rc)
            return torus_error_prefix(rc, "layer '%s'", net->l[i].name);
    }
    _tune_done(_tcuda(bk));
    _plan_sizes(bk, net);
    int rc = _tcuda_plan_bn(bk, net);
    if (rc)
        return rc;
    cn->tmp_off = TCUDA_ALIGN(net->scratch_bytes);
    net->scratch_bytes = cn->tmp_off + cn->tmp_bytes;
    return _plan_loss(net, cn);
}

/* ---- BN through the Ex calls (cuda_fuse.h, tcuda_bn_plan) ---- */

/* cuDNN's sizes for the Ex calls of BN layer b in its planned mode: the
 * larger of the forward's and backward's workspace, and the reserve
 * space; a status other than success when cuDNN does not offer the
 * forward for these shapes (the BN then runs the legacy calls). *bwd = 0
 * when it does not offer the backward (the forward stays Ex, the backward
 * runs the legacy call). */
static cudnnStatus_t _ex_sizes(teng_backend *bk, teng_net *net, int b,
                               size_t *ws, size_t *reserve, int *bwd)
{
    tcuda_net *cn = net->bkstate;
    const tcuda_layer *d = &cn->l[b];
    cudnnHandle_t h = _tcuda(bk)->dnn;
    const cudnnBatchNormMode_t m = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
    int mode = cn->bn.plan[b], add = mode == TCUDA_BN_EX_ADD_ACT;
    cudnnBatchNormOps_t ops = _tcuda_bn_ops(mode);
    cudnnActivationDescriptor_t act = mode == TCUDA_BN_EX ? NULL : cn->relu;
    /* The size queries get every tensor's descriptor, the ones these ops
     * do not read too (as PyTorch asks them); dz only with the add. */
    cudnnTensorDescriptor_t z = add ? d->x : NULL;
    size_t bws = 0;
    cudnnStatus_t s = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        h, m, ops, d->x, d->x, d->x, d->b, act, ws);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, m, ops, act,
                                                                 d->x, reserve);
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    *bwd = cudnnGetBatchNormalizationBackwardExWorkspaceSize(
               h, m, ops, d->x, d->x, d->x, z, d->x, d->b, act, &bws) ==
           CUDNN_STATUS_SUCCESS;
    if (*bwd && bws > *ws)
        *ws = bws;
    return CUDNN_STATUS_SUCCESS;
}

/* The BN's reserve space goes after its saved statistics, in its own
 * layer workspace (the engine's arena, kept from forward to backward).
 * Nonzero when a re-plan (another batch) would need more than the
 * compiled workspace: the BN then runs the legacy calls. */
static int _ex_reserve(teng_net *net, int b, size_t rs)
{
    tcuda_layer *d = &((tcuda_net *)net->bkstate)->l[b];
    size_t off = TCUDA_ALIGN(net->l[b].ws_bytes);
    if (net->compiled && off + TCUDA_ALIGN(rs) > net->l[b].ws_cap)
        return 1;
    d->rs_off = off;
    d->rs_bytes = rs;
    net->l[b].ws_bytes = off + TCUDA_ALIGN(rs);
    return 0;
}

/* Sizes each Ex BN's calls; one cuDNN declines runs legacy, said once. */
static void _ex_size_all(teng_backend *bk, teng_net *net)
{
    tcuda_net *cn = net->bkstate;
    for (int b = 0; b < net->nl; b++) {
        int bwd = 0;
        size_t ws = 0, rs = 0;
        if (!tcuda_bn_is_ex(cn->bn.plan[b]))
            continue;
        cudnnStatus_t s = _ex_sizes(bk, net, b, &ws, &rs, &bwd);
        if (s != CUDNN_STATUS_SUCCESS || _ex_reserve(net, b, rs)) {
            _tcuda_bn_declined(bk, net, b,
                               s != CUDNN_STATUS_SUCCESS
                                   ? "the Ex BatchNorm sizes"
                                   : "the Ex reserve space (re-plan)",
                               s != CUDNN_STATUS_SUCCESS
                                   ? (int)s
                                   : (int)CUDNN_STATUS_NOT_SUPPORTED);
            tcuda_bn_decline(&cn->bn, b, 1);
            continue;
        }
        if (!bwd) /* the forward stays Ex, the backward is legacy */
            tcuda_bn_decline(&cn->bn, b, 0);
        cn->ex_ws = ws > cn->ex_ws ? ws : cn->ex_ws;
    }
}

/* FP16 mode: each BN's mode (tcuda_bn_plan, under the switches
 * TCUDA_BN_EX and TCUDA_FUSE), less the Ex calls cuDNN declines. The
 * scratch arena grows to the largest Ex call's workspace. */
int _tcuda_plan_bn(teng_backend *bk, teng_net *net)
{
    tcuda_net *cn = net->bkstate;
    tcuda_switches sw;
    tcuda_switches_getenv(&sw, _tcuda(bk)->half);
    int rc = tcuda_bn_state_open(&cn->bn, net, &sw);
    if (rc)
        return rc;
    if (!cn->bn.nex)
        return TENG_OK;
    TCUDA_DNN(cudnnCreateActivationDescriptor(&cn->relu));
    TCUDA_DNN(cudnnSetActivationDescriptor(cn->relu, CUDNN_ACTIVATION_RELU,
                                           CUDNN_NOT_PROPAGATE_NAN, 0.0));
    _ex_size_all(bk, net);
    if (cn->ex_ws > net->scratch_bytes)
        net->scratch_bytes = cn->ex_ws;
    return TENG_OK;
}

/* ---- bind and release ---- */

int _tcuda_bind(teng_backend *bk, teng_net *net)
{
    tcuda_net *cn = net->bkstate;
    tcuda_optim_param *op = calloc((size_t)net->np + 1, sizeof(*op));
    if (!op)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    for (int i = 0; i < net->np; i++) {
        const teng_param *p = &net->p[i];
        op[i] = (tcuda_optim_param){p->master, p->work,   p->dtype,
                                    p->grad,   p->offset, p->count};
    }
    int rc = tcuda_optim_create(op, net->np, _tcuda(bk)->stream, &cn->optim);
    free(op);
    /* The fused backward reads y where the engine kept it (cuda_fuse.h). */
    for (int b = 0; cn->bn.nfused && b < net->nl; b++)
        if (cn->bn.deferred[b] && cn->bn.bwd_ex[b] &&
            !tcuda_fuse_bwd_ok(net, b, cn->bn.add_of[b]))
            tcuda_bn_decline(&cn->bn, b, 0);
    return rc ? torus_error_prefix(rc, "optimizer plan") : TENG_OK;
}

static void _release_layer(tcuda_layer *d)
{
    if (d->x)
        cudnnDestroyTensorDescriptor(d->x);
    if (d->y)
        cudnnDestroyTensorDescriptor(d->y);
    if (d->b)
        cudnnDestroyTensorDescriptor(d->b);
    if (d->w)
        cudnnDestroyFilterDescriptor(d->w);
    if (d->conv)
        cudnnDestroyConvolutionDescriptor(d->conv);
    if (d->pool)
        cudnnDestroyPoolingDescriptor(d->pool);
    if (d->act)
        cudnnDestroyActivationDescriptor(d->act);
}

void _tcuda_release(teng_backend *bk, teng_net *net)
{
    tcuda_net *cn = net->bkstate;
    if (!cn)
        return;
    /* Queued work may still use the plan's buffers. */
    cudaStreamSynchronize(_tcuda(bk)->stream);
    if (cn->optim)
        tcuda_optim_destroy(cn->optim);
    for (int i = 0; cn->l && i < net->nl; i++)
        _release_layer(&cn->l[i]);
    if (cn->host_loss)
        cudaFreeHost(cn->host_loss);
    if (cn->relu)
        cudnnDestroyActivationDescriptor(cn->relu);
    tcuda_bn_state_close(&cn->bn);
    free(cn->l);
    free(cn);
    net->bkstate = NULL;
}

unsigned _tcuda_bwd_reads(teng_backend *bk, const teng_net *net, int li)
{
    const tcuda_net *cn = net->bkstate;
    (void)bk;
    return tcuda_bwd_reads(net, cn ? cn->bn.deferred : NULL, li);
}
