/* trainer/backends/cuda/cuda_backend.c: the cuDNN/cuBLAS GPU backend:
 * device, stream and library handles, device memory, the canonical I/O
 * (plain copies: the backend keeps NCHW/OIHW), the optimizer ops through
 * the multi-tensor kernels of tcuda_optim.h, and the descriptor the
 * registry lists (tcuda_backend_desc). The layers are in cuda_layers.c.
 *
 * Host syncs: upload, download, tensor/param I/O and sync wait for the
 * stream (cudaStreamSynchronize, never the whole device); they serve I/O,
 * not the step's kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "trainer/backends/cuda/cuda_internal.h"
#include "trainer/backends/cuda/cuda_kernels.h"
#include "trainer/backends/cuda/cuda_stem.h"
#include "trainer/backends/cuda/cuda_layout.h"
#include "trainer/backends/cuda/tcuda.h"

static void *_alloc(teng_backend *bk, size_t bytes)
{
    void *p = NULL;
    /* Arenas are allocated once at compile: zero-filling them here (and
     * waiting for it) costs nothing per step. */
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
        return NULL;
    if (cudaMemsetAsync(p, 0, bytes ? bytes : 1, _tcuda(bk)->stream) !=
            cudaSuccess ||
        cudaStreamSynchronize(_tcuda(bk)->stream) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void _free(teng_backend *bk, void *p)
{
    /* Work queued on the arena must finish before its memory goes. */
    cudaStreamSynchronize(_tcuda(bk)->stream);
    cudaFree(p);
}

/* In stream order, and complete on return: the host buffer may go. */
static int _copy(teng_backend *bk, void *dst, const void *src, size_t n,
                 enum cudaMemcpyKind kind)
{
    cudaStream_t s = _tcuda(bk)->stream;
    TCUDA_RT(cudaMemcpyAsync(dst, src, n, kind, s));
    TCUDA_RT(cudaStreamSynchronize(s));
    return TENG_OK;
}

static int _upload(teng_backend *bk, void *dst, const void *src, size_t n)
{
    return _copy(bk, dst, src, n, cudaMemcpyHostToDevice);
}

static int _download(teng_backend *bk, void *dst, const void *src, size_t n)
{
    return _copy(bk, dst, src, n, cudaMemcpyDeviceToHost);
}

static int _sync(teng_backend *bk)
{
    TCUDA_RT(cudaStreamSynchronize(_tcuda(bk)->stream));
    return TENG_OK;
}

/* The padded stem's input (cuda_stem.h): fp32 NCHW staged, fp16 NHWC
 * unpadded after it in the temporary region, then padded (and back). */
static int _input_io_padded(teng_backend *bk, teng_net *net, void *dev,
                            float *host, int to_device)
{
    tcuda_impl *im = _tcuda(bk);
    const tcuda_net *cn = net->bkstate;
    size_t n = teng_tensor_count(net, net->input);
    teng_shape s = net->t[net->input].shape;
    int chw[3] = {s.c, s.h, s.w}, rc;
    float *stage = _tcuda_tmp(net);
    uint16_t *h16 = (uint16_t *)((char *)stage + TCUDA_ALIGN(sizeof(float) * n));
    if (to_device) {
        if ((rc = _upload(bk, stage, host, sizeof(float) * n)))
            return rc;
        TCUDA_K(tcuda_k_to_f16_nhwc(im->stream, stage, h16, n, chw));
        TCUDA_K(tcuda_k_stem_pad(im->stream, h16, dev,
                                 n / (size_t)s.c * (size_t)cn->stem_cp, s.c,
                                 cn->stem_cp));
        return _sync(bk);
    }
    TCUDA_K(tcuda_k_stem_unpad(im->stream, dev, h16, n, s.c, cn->stem_cp, 0));
    TCUDA_K(tcuda_k_to_f32_nchw(im->stream, h16, stage, n, chw));
    return _download(bk, host, stage, sizeof(float) * n);
}

/* FP32 mode: the canonical layout, I/O is a copy. FP16 mode: fp32 NCHW
 * staged in the scratch arena's temporary region, converted on the device
 * to fp16 NHWC (and back); the padded stem's input: _input_io_padded. */
static int _tensor_io(teng_backend *bk, teng_net *net, int id, int grad,
                      float *host, int to_device)
{
    tcuda_impl *im = _tcuda(bk);
    const tcuda_net *cn = net->bkstate;
    void *dev = grad ? net->t[id].grad : net->t[id].data;
    if (cn && cn->stem >= 0 && id == net->input && !grad)
        return _input_io_padded(bk, net, dev, host, to_device);
    size_t n = teng_tensor_count(net, id);
    teng_shape s = net->t[id].shape;
    int chw[3] = {s.c, s.h, s.w}, rc;
    float *stage = im->half ? _tcuda_tmp(net) : dev;
    if (to_device) {
        if ((rc = _upload(bk, stage, host, sizeof(float) * n)) || !im->half)
            return rc;
        TCUDA_K(tcuda_k_to_f16_nhwc(im->stream, stage, dev, n, chw));
        return _sync(bk);
    }
    if (im->half)
        TCUDA_K(tcuda_k_to_f32_nchw(im->stream, dev, stage, n, chw));
    return _download(bk, host, stage, sizeof(float) * n);
}

/* FP16 mode keeps weights OHWI: the image shape {C, H, W} a weight's rows
 * are laid out over, and 1; 0 where the backend layout is the canonical
 * one (FP32 mode, vectors, 1 x 1 images). */
static int _param_chw(teng_backend *bk, const teng_net *net, int id, int chw[3])
{
    const teng_param *p = &net->p[id];
    const teng_layer *l = &net->l[p->layer];
    if (!_tcuda(bk)->half || p->kind != TENG_P_WEIGHT)
        return 0;
    if (l->kind == TENG_L_CONV) {
        chw[0] = p->dims[1];
        chw[1] = p->dims[2];
        chw[2] = p->dims[3];
    } else if (l->kind == TENG_L_FC) {
        teng_shape s = net->t[l->in[0]].shape;
        chw[0] = s.c;
        chw[1] = s.h;
        chw[2] = s.w;
    } else
        return 0;
    return chw[1] * chw[2] > 1;
}

/* Masters, gradients and optimizer state are fp32 in both modes; in FP16
 * mode weights change layout on the host (I/O only, never in a step). */
static int _param_io(teng_backend *bk, teng_net *net, int id, void *dev,
                     float *host, int to_device)
{
    size_t n = net->p[id].count, bytes = sizeof(float) * n;
    int chw[3], rc;
    if (!_param_chw(bk, net, id, chw))
        return to_device ? _upload(bk, dev, host, bytes)
                         : _download(bk, host, dev, bytes);
    size_t rows = n / ((size_t)chw[0] * chw[1] * chw[2]);
    float *tmp = malloc(bytes);
    if (!tmp)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    if (to_device) {
        tcuda_relayout(host, tmp, rows, chw[0], chw[1], chw[2], 1);
        rc = _upload(bk, dev, tmp, bytes);
    } else if (!(rc = _download(bk, tmp, dev, bytes)))
        tcuda_relayout(tmp, host, rows, chw[0], chw[1], chw[2], 0);
    free(tmp);
    return rc;
}

static int _optim(const teng_net *net)
{
    const tcuda_net *cn = net->bkstate;
    if (!cn || !cn->optim)
        return TORUS_FAIL(TENG_ESTATE, "cuda optimizer ops before bind");
    return TENG_OK;
}

static int _param_sumsq(teng_backend *bk, teng_net *net, const void *buf,
                        float *out)
{
    int rc = _optim(net);
    (void)bk;
    if (!rc)
        rc = tcuda_optim_sumsq(((tcuda_net *)net->bkstate)->optim, buf, out);
    return rc;
}

static int _sgd(teng_backend *bk, teng_net *net, void *vel,
                const teng_sgd_args *a)
{
    int rc = _optim(net);
    (void)bk;
    if (!rc)
        rc = tcuda_optim_sgd(((tcuda_net *)net->bkstate)->optim, vel, a);
    return rc;
}

/* The device step (teng.h): the inf/nan count of the gradients as they
 * are now (after the exchange: the sums, the same on every rank), then
 * the update and the decision, whose loss comes from the loss layer's
 * per-row losses (cuda_exec.c keeps them in its workspace). */
static int _dstep_open(teng_backend *bk, teng_net *net,
                       const teng_tensor_hyper *h, const teng_dstep_config *c,
                       const teng_dstep_state *s, const double **scale)
{
    int rc = _optim(net);
    (void)bk;
    tcuda_optim *o = rc ? NULL : ((tcuda_net *)net->bkstate)->optim;
    if (!rc && !(rc = tcuda_optim_device_open(o, h, c, s)))
        *scale = tcuda_optim_scale(o);
    return rc;
}

static int _dstep(teng_backend *bk, teng_net *net, void *vel, double lr,
                  unsigned parts)
{
    int rc = _optim(net);
    (void)bk;
    if (rc)
        return rc;
    tcuda_optim *o = ((tcuda_net *)net->bkstate)->optim;
    const double *rows = NULL;
    int n = 0;
    if (net->loss_layer >= 0) {
        /* Read after the whole backward and the update: only the plan's
         * late workspace is still this layer's then (backend.h). */
        const teng_layer *l = &net->l[net->loss_layer];
        if (!(rows = teng_net_late_ws(net, net->loss_layer)))
            return TENG_EINVAL;
        n = net->t[l->in[0]].shape.n;
    }
    if ((parts & TENG_DSTEP_BEGIN) && (rc = tcuda_optim_step_begin(o, lr)))
        return rc;
    if ((parts & TENG_DSTEP_QUEUE) &&
        ((rc = tcuda_optim_count_nonfinite(o)) ||
         (rc = tcuda_optim_step_queue(o, vel, rows, n, net->batch))))
        return rc;
    return (parts & TENG_DSTEP_END) ? tcuda_optim_step_end(o) : TENG_OK;
}

static int _dstep_read(teng_backend *bk, teng_net *net, teng_dstep_state *s,
                       int reset_window)
{
    int rc = _optim(net);
    (void)bk;
    return rc ? rc
              : tcuda_optim_ls_read(((tcuda_net *)net->bkstate)->optim, s,
                                    reset_window);
}

/* FP16 mode: the working copies follow the masters. */
static int _refresh(teng_backend *bk, teng_net *net)
{
    int rc = _optim(net);
    (void)bk;
    if (!rc)
        rc = tcuda_optim_refresh(((tcuda_net *)net->bkstate)->optim);
    return rc;
}

static void _destroy(teng_backend *bk)
{
    tcuda_impl *im = _tcuda(bk);
    if (im) {
        if (im->stream)
            cudaStreamSynchronize(im->stream);
        _tcuda_input_close(im);
        if (im->blas)
            cublasDestroy(im->blas);
        cudaFree(im->blas_ws);
        if (im->dnn)
            cudnnDestroy(im->dnn);
        if (im->stream)
            cudaStreamDestroy(im->stream);
        if (bk->opts.verbose)
            torus_note("cuda: convolution algorithms: %lu measured, %lu "
                       "from the tune cache, %lu from cuDNN's heuristics",
                       im->tune.tuned, im->tune.cached, im->tune.heuristic);
        tcuda_tune_close(&im->tune);
        free(im);
    }
    free(bk);
}

static const teng_backend_ops _ops = {
    .name = "cuda",
    .host_memory = 0,
    .destroy = _destroy,
    .alloc = _alloc,
    .free = _free,
    .upload = _upload,
    .download = _download,
    .sync = _sync,
    .plan = _tcuda_plan,
    .bind = _tcuda_bind,
    .release = _tcuda_release,
    .forward = _tcuda_forward,
    .backward = _tcuda_backward,
    .bwd_reads = _tcuda_bwd_reads,
    .grad_sum = _tcuda_grad_sum,
    .tensor_io = _tensor_io,
    .param_io = _param_io,
    .param_sumsq = _param_sumsq,
    .sgd_update = _sgd,
    .dstep_open = _dstep_open,
    .dstep = _dstep,
    .dstep_read = _dstep_read,
    .refresh_work = NULL, /* FP32: every working copy is its master */
    .input_stage = _tcuda_input_stage,
    .input_use = _tcuda_input_use,
    .host_alloc = _tcuda_host_alloc,
    .upload_labels = _tcuda_labels,
    .host_free = _tcuda_host_free,
    .loss_sum = _tcuda_loss_sum,
    .graph_begin = _tcuda_graph_begin,
    .graph_end = _tcuda_graph_end,
    .graph_launch = _tcuda_graph_launch,
    .graph_free = _tcuda_graph_free,
};

enum { TCUDA_BLAS_WS = 32 << 20 };

/* Device, stream, handles; the handles work on the stream. */
static int _open(tcuda_impl *im, int device)
{
    TCUDA_RT(cudaSetDevice(device));
    TCUDA_RT(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking));
    TCUDA_DNN(cudnnCreate(&im->dnn));
    TCUDA_DNN(cudnnSetStream(im->dnn, im->stream));
    TCUDA_BLAS(cublasCreate(&im->blas));
    TCUDA_BLAS(cublasSetStream(im->blas, im->stream));
    /* Before any capture: cuBLAS's own workspace would be allocated on
     * first use, which a stream capture forbids. 32 MiB is what cuBLAS
     * asks for on Hopper (4 MiB before it). */
    TCUDA_RT(cudaMalloc(&im->blas_ws, TCUDA_BLAS_WS));
    TCUDA_BLAS(cublasSetWorkspace(im->blas, im->blas_ws, TCUDA_BLAS_WS));
    int rc = _tcuda_input_open(im);
    if (rc)
        return rc;
    /* FP32 mode: true FP32 (no TF32), as it is checked against oneDNN;
     * FP16 mode: tensor cores. */
    TCUDA_BLAS(cublasSetMathMode(im->blas, im->half ? CUBLAS_DEFAULT_MATH
                                                    : CUBLAS_PEDANTIC_MATH));
    return TENG_OK;
}

static int _create_mode(const teng_backend_opts *opts, int half,
                        teng_backend **out)
{
    int ndev = 0;
    teng_backend *bk = calloc(1, sizeof(*bk));
    tcuda_impl *im = calloc(1, sizeof(*im));
    *out = NULL;
    if (!bk || !im) {
        free(bk);
        free(im);
        return TORUS_FAIL(TENG_ENOMEM, "cuda backend: out of memory");
    }
    /* The FP16 mode's ops: FP32's, with the working copies refreshed. */
    im->ops = _ops;
    if (half) {
        im->ops.name = "cuda-fp16";
        im->ops.refresh_work = _refresh;
    }
    bk->ops = &im->ops;
    bk->opts = *opts;
    bk->impl = im;
    im->device = opts->device;
    im->half = half;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    int rc =
        e != cudaSuccess ? TORUS_FAIL(TENG_EBACKEND, "no usable GPU: %s",
                                      cudaGetErrorString(e))
        : opts->device < 0 || opts->device >= ndev
            ? TORUS_FAIL(TENG_EINVAL, "device %d does not exist (%d visible)",
                         opts->device, ndev)
            : _open(im, opts->device);
    if (!rc)
        rc = _tcuda_tune_open(bk);
    if (rc) {
        _destroy(bk);
        return torus_error_prefix(rc, "cuda backend");
    }
    bk->stream = im->stream;
    *out = bk;
    return TENG_OK;
}

static int _create(const teng_backend_opts *opts, teng_backend **out)
{
    return _create_mode(opts, 0, out);
}

static int _create16(const teng_backend_opts *opts, teng_backend **out)
{
    return _create_mode(opts, 1, out);
}

int tcuda_device_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

int tcuda_device_memory(const teng_backend *bk, size_t *used, size_t *total)
{
    size_t fr = 0, all = 0;
    /* Both modes share _alloc: the way to know a backend is this one. */
    if (!bk || bk->ops->alloc != _alloc ||
        cudaSetDevice(((const tcuda_impl *)bk->impl)->device) != cudaSuccess ||
        cudaMemGetInfo(&fr, &all) != cudaSuccess)
        return -1;
    *used = all - fr;
    *total = all;
    return 0;
}

int tcuda_fastpath_get(const teng_backend *bk, tcuda_fastpath *out)
{
    if (!bk || bk->ops->alloc != _alloc)
        return -1;
    *out = ((const tcuda_impl *)bk->impl)->fast;
    return 0;
}

int tcuda_tune_export(const teng_backend *bk, char **text, size_t *len)
{
    if (!bk || bk->ops->alloc != _alloc)
        return -1;
    return tcuda_tune_text(&((const tcuda_impl *)bk->impl)->tune, text, len)
               ? -1
               : 0;
}

int tcuda_tune_import(teng_backend *bk, const char *text, size_t len)
{
    if (!bk || bk->ops->alloc != _alloc || !_tcuda(bk)->tune.tune)
        return -1;
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, text, len);
    copy[len] = 0;
    tcuda_tune_load_text(&_tcuda(bk)->tune, "from rank 0", copy);
    free(copy);
    return 0;
}

static int _probe(void)
{
    return tcuda_device_count() > 0;
}

static const char *const _aliases[] = {"gpu", NULL};

const teng_backend_desc tcuda_backend_desc = {
    .name = "cuda",
    .aliases = _aliases,
    .probe = _probe,
    .create = _create,
};

const teng_backend_desc tcuda_backend_fp16_desc = {
    .name = "cuda-fp16",
    .aliases = NULL,
    .probe = _probe,
    .create = _create16,
};
