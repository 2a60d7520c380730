/*
 * gpu_smoke.c: the GPU checks of tests/gpu, one program, one result table.
 *
 * It proves on a real GPU what the build can only compile elsewhere: the
 * kernels built for this device's SM run (fp16 wire with fp32 accumulation,
 * a reduction), cuBLAS SGEMM and a cuDNN convolution agree with a CPU
 * reference, and NCCL all-reduces on a one-rank communicator.
 * With no usable device it prints "SKIP: <reason>" and exits 77.
 * Later issues add rows here (the trainer's GPU backend, NCCL collectives).
 */
#include "config.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TORUS_HAVE_CUDNN
#include <cudnn.h>
#endif
#include <cublas_v2.h>
#ifdef TORUS_HAVE_NCCL
#include <nccl.h>
#endif

#include "tests/gpu/gpu_kernels.h"

#define ROWS_MAX 16
static struct {
    char name[40];
    int ok;
    char detail[120];
} _rows[ROWS_MAX];
static int _nrows;

static void _row(const char *name, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void _row(const char *name, int ok, const char *fmt, ...)
{
    va_list ap;
    if (_nrows == ROWS_MAX)
        return;
    snprintf(_rows[_nrows].name, sizeof(_rows[0].name), "%s", name);
    _rows[_nrows].ok = ok;
    va_start(ap, fmt);
    vsnprintf(_rows[_nrows].detail, sizeof(_rows[0].detail), fmt, ap);
    va_end(ap);
    _nrows++;
}

/* A CUDA call that fails ends the check it belongs to, with file:line. */
#define CUDA_OR(call, label)                                                  \
    do {                                                                      \
        cudaError_t _e = (call);                                              \
        if (_e != cudaSuccess) {                                              \
            fprintf(stderr, "gpu_smoke: %s:%d: %s: %s\n", __FILE__, __LINE__, \
                    #call, cudaGetErrorString(_e));                           \
            goto label;                                                       \
        }                                                                     \
    } while (0)

static float _frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void _check_fp16_wire(void)
{
    const size_t n = 1 << 20;
    const int k = 8;
    float *h = malloc(sizeof(float) * n * k), *acc = malloc(sizeof(float) * n);
    float *d_in = NULL, *d_acc = NULL;
    void *d_half = NULL;
    double maxerr = 0;
    unsigned seed = 1;

    for (size_t i = 0; i < n * k; i++)
        h[i] = _frand(&seed) *
               1000.0f; /* large: fp16 overflows without the 1/k pre-scale */
    CUDA_OR(cudaMalloc((void **)&d_in, sizeof(float) * n * k), out);
    CUDA_OR(cudaMalloc(&d_half, 2 * n * k), out);
    CUDA_OR(cudaMalloc((void **)&d_acc, sizeof(float) * n), out);
    CUDA_OR(cudaMemcpy(d_in, h, sizeof(float) * n * k, cudaMemcpyHostToDevice),
            out);
    if (gk_fp16_sum(d_in, d_half, d_acc, 1.0f / k, k, n) != 0)
        goto out;
    CUDA_OR(cudaMemcpy(acc, d_acc, sizeof(float) * n, cudaMemcpyDeviceToHost),
            out);
    for (size_t i = 0; i < n; i++) {
        double ref = 0;
        for (int j = 0; j < k; j++)
            ref += h[(size_t)j * n + i] / (double)k;
        double e = fabs(acc[i] - ref) / (fabs(ref) + 1.0);
        if (!(e <= maxerr)) /* also catches NaN */
            maxerr = isnan(e) ? INFINITY : e;
    }
    _row("fp16 wire, fp32 accumulate", maxerr < 2e-3,
         "8 x 1M values, max rel err %.2e", maxerr);
out:
    if (_nrows == 0 ||
        strcmp(_rows[_nrows - 1].name, "fp16 wire, fp32 accumulate") != 0)
        _row("fp16 wire, fp32 accumulate", 0, "CUDA error (see stderr)");
    cudaFree(d_in);
    cudaFree(d_half);
    cudaFree(d_acc);
    free(h);
    free(acc);
}

static void _check_reduce(void)
{
    const size_t n = 10000019;
    float *h = malloc(sizeof(float) * n), *d = NULL;
    double *d_sum = NULL, sum = 0, ref = 0;
    unsigned seed = 7;
    int done = 0;

    for (size_t i = 0; i < n; i++) {
        h[i] = _frand(&seed);
        ref += h[i];
    }
    CUDA_OR(cudaMalloc((void **)&d, sizeof(float) * n), out);
    CUDA_OR(cudaMalloc((void **)&d_sum, sizeof(double)), out);
    CUDA_OR(cudaMemcpy(d, h, sizeof(float) * n, cudaMemcpyHostToDevice), out);
    if (gk_sum(d, d_sum, n) != 0)
        goto out;
    CUDA_OR(cudaMemcpy(&sum, d_sum, sizeof(double), cudaMemcpyDeviceToHost),
            out);
    _row("reduction kernel", fabs(sum - ref) < 1e-6 * n, "sum %.6f vs %.6f",
         sum, ref);
    done = 1;
out:
    if (!done)
        _row("reduction kernel", 0, "CUDA error (see stderr)");
    cudaFree(d);
    cudaFree(d_sum);
    free(h);
}

static void _check_sgemm(void)
{
    const int m = 257, k = 129, n = 193;
    float *a = malloc(sizeof(float) * m * k),
          *b = malloc(sizeof(float) * k * n);
    float *c = malloc(sizeof(float) * m * n), *da = NULL, *db = NULL,
          *dc = NULL;
    const float one = 1.0f, zero = 0.0f;
    cublasHandle_t h = NULL;
    double maxerr = 0;
    unsigned seed = 3;
    int done = 0;

    for (int i = 0; i < m * k; i++)
        a[i] = _frand(&seed);
    for (int i = 0; i < k * n; i++)
        b[i] = _frand(&seed);
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
        goto out;
    cublasSetMathMode(h,
                      CUBLAS_PEDANTIC_MATH); /* no TF32: compare in true fp32 */
    CUDA_OR(cudaMalloc((void **)&da, sizeof(float) * m * k), out);
    CUDA_OR(cudaMalloc((void **)&db, sizeof(float) * k * n), out);
    CUDA_OR(cudaMalloc((void **)&dc, sizeof(float) * m * n), out);
    cudaMemcpy(da, a, sizeof(float) * m * k, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, sizeof(float) * k * n, cudaMemcpyHostToDevice);
    /* Column-major: C(m x n) = A(m x k) * B(k x n). */
    if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, m, db, k,
                    &zero, dc, m) != CUBLAS_STATUS_SUCCESS)
        goto out;
    CUDA_OR(cudaMemcpy(c, dc, sizeof(float) * m * n, cudaMemcpyDeviceToHost),
            out);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double ref = 0;
            for (int p = 0; p < k; p++)
                ref += (double)a[p * m + i] * b[j * k + p];
            double e = fabs(c[j * m + i] - ref);
            if (!(e <= maxerr))
                maxerr = isnan(e) ? INFINITY : e;
        }
    _row("cuBLAS SGEMM", maxerr < 1e-4, "257x129x193, max abs err %.2e",
         maxerr);
    done = 1;
out:
    if (!done)
        _row("cuBLAS SGEMM", 0, "cuBLAS/CUDA error");
    if (h)
        cublasDestroy(h);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    free(a);
    free(b);
    free(c);
}

#ifdef TORUS_HAVE_CUDNN
static void _check_cudnn(void)
{
    /* N=2, C=3, 9x9 input, K=4 3x3 filters, pad 1, stride 1: NCHW fp32. */
    enum { N = 2, C = 3, H = 9, W = 9, K = 4, R = 3 };
    static float x[N * C * H * W], w[K * C * R * R], y[N * K * H * W];
    cudnnHandle_t h = NULL;
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    cudnnFilterDescriptor_t wd = NULL;
    cudnnConvolutionDescriptor_t cd = NULL;
    float *dx = NULL, *dw = NULL, *dy = NULL;
    const float one = 1.0f, zero = 0.0f;
    double maxerr = 0;
    unsigned seed = 5;
    int done = 0;

    for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++)
        x[i] = _frand(&seed);
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
        w[i] = _frand(&seed);
    if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS)
        goto out;
    cudnnCreateTensorDescriptor(&xd);
    cudnnCreateTensorDescriptor(&yd);
    cudnnCreateFilterDescriptor(&wd);
    cudnnCreateConvolutionDescriptor(&cd);
    cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H,
                               W);
    cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, H,
                               W);
    cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R,
                               R);
    cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1,
                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH);
    CUDA_OR(cudaMalloc((void **)&dx, sizeof(x)), out);
    CUDA_OR(cudaMalloc((void **)&dw, sizeof(w)), out);
    CUDA_OR(cudaMalloc((void **)&dy, sizeof(y)), out);
    cudaMemcpy(dx, x, sizeof(x), cudaMemcpyHostToDevice);
    cudaMemcpy(dw, w, sizeof(w), cudaMemcpyHostToDevice);
    /* IMPLICIT_GEMM needs no workspace, so no algorithm search here. */
    if (cudnnConvolutionForward(h, &one, xd, dx, wd, dw, cd,
                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL,
                                0, &zero, yd, dy) != CUDNN_STATUS_SUCCESS)
        goto out;
    CUDA_OR(cudaMemcpy(y, dy, sizeof(y), cudaMemcpyDeviceToHost), out);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) {
                    double ref = 0;
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++)
                            for (int s = 0; s < R; s++) {
                                int ii = i + r - 1, jj = j + s - 1;
                                if (ii < 0 || jj < 0 || ii >= H || jj >= W)
                                    continue;
                                ref +=
                                    (double)x[((n * C + c) * H + ii) * W + jj] *
                                    w[((k * C + c) * R + r) * R + s];
                            }
                    double e = fabs(y[((n * K + k) * H + i) * W + j] - ref);
                    if (!(e <= maxerr))
                        maxerr = isnan(e) ? INFINITY : e;
                }
    _row("cuDNN conv fwd", maxerr < 1e-4,
         "cuDNN %zu, 3x3 conv, max abs err %.2e", cudnnGetVersion(), maxerr);
    done = 1;
out:
    if (!done)
        _row("cuDNN conv fwd", 0, "cuDNN/CUDA error");
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dy);
    if (cd)
        cudnnDestroyConvolutionDescriptor(cd);
    if (wd)
        cudnnDestroyFilterDescriptor(wd);
    if (xd)
        cudnnDestroyTensorDescriptor(xd);
    if (yd)
        cudnnDestroyTensorDescriptor(yd);
    if (h)
        cudnnDestroy(h);
}
#endif

#ifdef TORUS_HAVE_NCCL
static void _check_nccl(void)
{
    const size_t n = 1 << 22;
    ncclComm_t comm = NULL;
    int dev = 0, ver = 0, done = 0;
    float *d = NULL, *h = malloc(sizeof(float) * n),
          *back = malloc(sizeof(float) * n);
    cudaStream_t st = NULL;
    unsigned seed = 11;
    size_t wrong = 0;

    for (size_t i = 0; i < n; i++)
        h[i] = _frand(&seed);
    ncclGetVersion(&ver);
    if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess)
        goto out;
    CUDA_OR(cudaStreamCreate(&st), out);
    CUDA_OR(cudaMalloc((void **)&d, sizeof(float) * n), out);
    cudaMemcpy(d, h, sizeof(float) * n, cudaMemcpyHostToDevice);
    if (ncclAllReduce(d, d, n, ncclFloat, ncclSum, comm, st) != ncclSuccess)
        goto out;
    CUDA_OR(cudaStreamSynchronize(st), out);
    CUDA_OR(cudaMemcpy(back, d, sizeof(float) * n, cudaMemcpyDeviceToHost),
            out);
    for (size_t i = 0; i < n; i++)
        wrong += back[i] != h[i];
    _row("NCCL all-reduce (1 rank)", wrong == 0,
         "NCCL %d, 16 MiB in place, %zu wrong", ver, wrong);
    done = 1;
out:
    if (!done)
        _row("NCCL all-reduce (1 rank)", 0, "NCCL/CUDA error");
    if (comm)
        ncclCommDestroy(comm);
    if (st)
        cudaStreamDestroy(st);
    cudaFree(d);
    free(h);
    free(back);
}
#endif

int main(void)
{
    int count = 0, fails = 0;
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceCount(&count);

    if (e != cudaSuccess || count == 0) {
        printf("SKIP: no usable CUDA device here (%s); the GPU checks run on a "
               "lent GPU machine via tests/gpu/run\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    cudaGetDeviceProperties(&prop, 0);
    _row("device", 1, "%s, sm_%d%d, %.0f GiB", prop.name, prop.major,
         prop.minor, prop.totalGlobalMem / 1073741824.0);
    _check_fp16_wire();
    _check_reduce();
    _check_sgemm();
#ifdef TORUS_HAVE_CUDNN
    _check_cudnn();
#else
    _row("cuDNN conv fwd", 1, "SKIP: built without cuDNN");
#endif
#ifdef TORUS_HAVE_NCCL
    _check_nccl();
#else
    _row("NCCL all-reduce (1 rank)", 1, "SKIP: built without NCCL");
#endif
    printf("\n%-28s %-6s %s\n", "check", "result", "detail");
    for (int i = 0; i < _nrows; i++) {
        printf("%-28s %-6s %s\n", _rows[i].name, _rows[i].ok ? "PASS" : "FAIL",
               _rows[i].detail);
        fails += !_rows[i].ok;
    }
    printf("%d passed, %d failed\n", _nrows - fails, fails);
    return fails ? 1 : 0;
}
