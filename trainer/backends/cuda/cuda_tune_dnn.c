/* trainer/backends/cuda/cuda_tune_dnn.c: cuDNN behind tcuda_tune_ops (see
 * cuda_tune.h): the measurement (cudnnFindConvolution*AlgorithmEx on
 * buffers of the shape, under the workspace limit), the heuristics
 * (cudnnGetConvolution*Algorithm_v7) and the workspace of an algorithm,
 * each for the layer whose descriptors tcuda_impl.tune_layer points at
 * while cuda_layers.c resolves its keys; and the tuner's opening (the
 * device's key, the switches, the file).
 *
 * Contract: the measurement allocates its buffers (input, filter,
 * output, workspace) with cudaMalloc and frees them before it returns;
 * the workspace is the limit, or less when the device has less free (a
 * quarter of what is free), and cuDNN only times algorithms that fit it.
 * Each call is a cuDNN version of one of the three table entries; nothing
 * here decides: cuda_tune.c does. Find and the Ex calls are deprecated in
 * cuDNN 9 but present in 9.x; a graph-API version can replace this file
 * without touching cuda_tune.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/backends/cuda/cuda_internal.h"

#define _NPERF 16

/* Copies cuDNN's perf results into r[0..n). */
#define _COPY(perf, n, r)                                                  \
    for (int i = 0; i < (n); i++)                                          \
        (r)[i] = (tcuda_tune_result)                                       \
        {                                                                  \
            (int)(perf)[i].algo, (perf)[i].status == CUDNN_STATUS_SUCCESS, \
                (int)(perf)[i].mathType,                                   \
                (perf)[i].determinism == CUDNN_DETERMINISTIC,              \
                (perf)[i].memory, (perf)[i].time                           \
        }

/* Element counts of x, w and y of the layer being tuned. */
static int _counts(const tcuda_layer *d, const tcuda_algo_key *key,
                   size_t cnt[3])
{
    int n, c, h, w;
    if (cudnnGetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &n, &c, &h,
                                              &w))
        return -1;
    cnt[0] = (size_t)key->n * key->c * key->h * key->w;
    cnt[1] = (size_t)key->k * key->c * key->kh * key->kw;
    cnt[2] = (size_t)n * c * h * w;
    return 0;
}

/* The measurement on fresh buffers: the results' count, or -1. */
static int _find_on(tcuda_impl *im, const tcuda_algo_key *key, void *x, void *w,
                    void *y, void *ws, size_t wsb, tcuda_tune_result *r,
                    int max)
{
    const tcuda_layer *d = im->tune_layer;
    int n = 0;
    if (max > _NPERF)
        max = _NPERF;
    if (key->dir == TCUDA_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[_NPERF];
        if (cudnnFindConvolutionForwardAlgorithmEx(im->dnn, d->x, x, d->w, w,
                                                   d->conv, d->y, y, max, &n, p,
                                                   ws, wsb))
            return -1;
        _COPY(p, n, r);
    } else if (key->dir == TCUDA_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[_NPERF];
        if (cudnnFindConvolutionBackwardDataAlgorithmEx(im->dnn, d->w, w, d->y,
                                                        y, d->conv, d->x, x,
                                                        max, &n, p, ws, wsb))
            return -1;
        _COPY(p, n, r);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[_NPERF];
        if (cudnnFindConvolutionBackwardFilterAlgorithmEx(
                im->dnn, d->x, x, d->y, y, d->conv, d->w, w, max, &n, p, ws,
                wsb))
            return -1;
        _COPY(p, n, r);
    }
    return n;
}

static int _find(void *ctx, const tcuda_algo_key *key, tcuda_tune_result *r,
                 int max)
{
    tcuda_impl *im = ctx;
    size_t cnt[3], esz = im->half ? 2 : 4, fr = 0, all = 0;
    void *x = NULL, *w = NULL, *y = NULL, *ws = NULL;
    int n = -1;
    if (_counts(im->tune_layer, key, cnt))
        return -1;
    size_t wsb = im->tune.ws_max;
    if (cudaMemGetInfo(&fr, &all) == cudaSuccess && fr / 4 < wsb)
        wsb = fr / 4;
    if (cudaMalloc(&x, cnt[0] * esz) == cudaSuccess &&
        cudaMalloc(&w, cnt[1] * esz) == cudaSuccess &&
        cudaMalloc(&y, cnt[2] * esz) == cudaSuccess &&
        (!wsb || cudaMalloc(&ws, wsb) == cudaSuccess) &&
        cudaMemsetAsync(x, 0, cnt[0] * esz, im->stream) == cudaSuccess &&
        cudaMemsetAsync(w, 0, cnt[1] * esz, im->stream) == cudaSuccess &&
        cudaMemsetAsync(y, 0, cnt[2] * esz, im->stream) == cudaSuccess)
        n = _find_on(im, key, x, w, y, ws, wsb, r, max);
    /* FP32 mode is true FP32: a result of another math type (TF32 by
     * default math on tensor-core GPUs) is not usable. */
    for (int i = 0; !im->half && i < n; i++)
        if (r[i].math != CUDNN_FMA_MATH)
            r[i].ok = 0;
    cudaStreamSynchronize(im->stream);
    cudaFree(x);
    cudaFree(w);
    cudaFree(y);
    cudaFree(ws);
    cudaGetLastError(); /* a failed cudaMalloc is answered here, not later */
    return n;
}

/* The first usable heuristic choice, preferring the mode's math: FP32
 * FMA kernels (no TF32) in FP32 mode, tensor cores in FP16 mode. */
static int _pick(int n, const int *algo, const int *status, const size_t *mem,
                 const int *math, int want, size_t ws_max, tcuda_algo_val *out)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (status[i] == CUDNN_STATUS_SUCCESS && mem[i] <= ws_max &&
                (pass || math[i] == want)) {
                *out = (tcuda_algo_val){algo[i], mem[i], math[i]};
                return 0;
            }
    return -1;
}

/* Asks cuDNN's heuristics; fills the arrays _pick reads. */
#define _ASK(fn, type, ...)                    \
    do {                                       \
        type perf[_NPERF];                     \
        if (fn(__VA_ARGS__, _NPERF, &n, perf)) \
            return -1;                         \
        for (int i = 0; i < n; i++) {          \
            algo[i] = (int)perf[i].algo;       \
            status[i] = (int)perf[i].status;   \
            mem[i] = perf[i].memory;           \
            math[i] = (int)perf[i].mathType;   \
        }                                      \
    } while (0)

static int _heuristic(void *ctx, const tcuda_algo_key *key, tcuda_algo_val *out)
{
    tcuda_impl *im = ctx;
    const tcuda_layer *d = im->tune_layer;
    int n = 0, algo[_NPERF], status[_NPERF], math[_NPERF];
    size_t mem[_NPERF];
    if (key->dir == TCUDA_FWD)
        _ASK(cudnnGetConvolutionForwardAlgorithm_v7,
             cudnnConvolutionFwdAlgoPerf_t, im->dnn, d->x, d->w, d->conv, d->y);
    else if (key->dir == TCUDA_BWD_DATA)
        _ASK(cudnnGetConvolutionBackwardDataAlgorithm_v7,
             cudnnConvolutionBwdDataAlgoPerf_t, im->dnn, d->w, d->y, d->conv,
             d->x);
    else
        _ASK(cudnnGetConvolutionBackwardFilterAlgorithm_v7,
             cudnnConvolutionBwdFilterAlgoPerf_t, im->dnn, d->x, d->y, d->conv,
             d->w);
    return _pick(n, algo, status, mem, math,
                 im->half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH,
                 im->tune.ws_max, out);
}

/* The mode's math on the layer's convolution descriptor. */
static cudnnMathType_t _mode_math(const tcuda_impl *im)
{
    return im->half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
}

static int _workspace(void *ctx, const tcuda_algo_key *key, int algo, int math,
                      size_t *bytes)
{
    tcuda_impl *im = ctx;
    const tcuda_layer *d = im->tune_layer;
    cudnnStatus_t st;
    /* FP32 mode is true FP32: an entry asking for tensor cores (TF32) is
     * not taken, whatever the file says. */
    if ((!im->half && math != CUDNN_FMA_MATH) ||
        cudnnSetConvolutionMathType(d->conv, (cudnnMathType_t)math))
        return -1;
    if (key->dir == TCUDA_FWD)
        st = cudnnGetConvolutionForwardWorkspaceSize(
            im->dnn, d->x, d->w, d->conv, d->y, (cudnnConvolutionFwdAlgo_t)algo,
            bytes);
    else if (key->dir == TCUDA_BWD_DATA)
        st = cudnnGetConvolutionBackwardDataWorkspaceSize(
            im->dnn, d->w, d->y, d->conv, d->x,
            (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    else
        st = cudnnGetConvolutionBackwardFilterWorkspaceSize(
            im->dnn, d->x, d->y, d->conv, d->w,
            (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    cudnnSetConvolutionMathType(d->conv, _mode_math(im));
    return st == CUDNN_STATUS_SUCCESS ? 0 : -1;
}

/* "0" turns a switch off; unset or anything else leaves it on. */
static int _on(const char *name)
{
    const char *v = getenv(name);
    return !(v && !strcmp(v, "0"));
}

int _tcuda_tune_open(teng_backend *bk)
{
    tcuda_impl *im = _tcuda(bk);
    struct cudaDeviceProp p;
    tcuda_tune_device dev = {{0}, 0, (long)cudnnGetVersion()};
    const tcuda_tune_ops ops = {im,
                                _find,
                                _heuristic,
                                _workspace,
                                {CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                 CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT},
                                CUDNN_FMA_MATH + 1};
    char def[4096];
    const char *path = bk->opts.tune_cache,
               *det = getenv("TCUDA_DETERMINISTIC");
    TCUDA_RT(cudaGetDeviceProperties(&p, im->device));
    snprintf(dev.gpu, sizeof dev.gpu, "%.63s", p.name);
    dev.sms = p.multiProcessorCount;
    if (!path || !*path)
        path = tcuda_tune_default_path(def, sizeof def) ? NULL : def;
    else if (!strcmp(path, "none"))
        path = NULL;
    return tcuda_tune_open(&im->tune, path, &dev, &ops, _on("TCUDA_TUNE"),
                           det && !strcmp(det, "1"), TCUDA_WS_MAX);
}
