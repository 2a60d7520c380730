/*
 * gpu_smoke.c: the GPU checks of tests/gpu, one program, one result table.
 *
 * It proves on a real GPU what the build can only compile elsewhere: the
 * NCCL transport's own kernels (trainer/comm/transport/nccl_kernels.cu, the shipped
 * source, built for this device's SM) pack fp32 gradients to each wire with
 * the 1/world pre-scale, zero the padding and unpack while counting inf/nan;
 * cuBLAS SGEMM and a cuDNN convolution agree with a CPU reference; and NCCL
 * applies a reduction on a one-rank communicator that must change the data
 * (a pre-multiplied sum by 3 of the packed fp16 buffer), so the row fails if
 * the all-reduce does nothing. A row is PASS, FAIL or SKIP (a library that
 * was not built): a skipped row is counted as skipped, never as passed.
 * Exit 1 if any row failed, else 0. With no usable device it prints
 * "SKIP: <reason>" and exits 77.
 */
#include "config.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef TORUS_HAVE_CUDNN
#include <cudnn.h>
#endif
#include <cublas_v2.h>
#ifdef TORUS_HAVE_NCCL
#include <nccl.h>
#endif

#include "trainer/comm/transport/nccl_kernels.h"
#include "trainer/comm/tcomm.h"

/* A row's result: a check's condition (0 or 1) is FAIL or PASS. */
enum { ROW_FAIL = 0, ROW_PASS = 1, ROW_SKIP = 2 };
static const char *const _result[] = {"FAIL", "PASS", "SKIP"};

#define ROWS_MAX 16
static struct {
    char name[40];
    int result;
    char detail[120];
} _rows[ROWS_MAX];
static int _nrows;

static void _row(const char *name, int result, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void _row(const char *name, int result, const char *fmt, ...)
{
    va_list ap;
    if (_nrows == ROWS_MAX)
        return;
    snprintf(_rows[_nrows].name, sizeof(_rows[0].name), "%s", name);
    _rows[_nrows].result = result;
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

/* Host copies of n values packed to `wire` with `scale` by the shipped
 * kernel, padded to npad, and unpacked again: back[npad], *bad the inf/nan
 * count of the first n. 0, or -1 on a CUDA error (reported on stderr). */
static int _wire_round_trip(const float *x, size_t n, size_t npad, float scale,
                            int wire, float *back, unsigned long long *bad)
{
    float *d_x = NULL, *d_back = NULL;
    void *d_w = NULL;
    unsigned long long *d_bad = NULL;
    size_t esize = wire == TCOMM_WIRE_FP32 ? 4 : 2;
    int rc = -1;

    CUDA_OR(cudaMalloc((void **)&d_x, sizeof(float) * n), out);
    CUDA_OR(cudaMalloc(&d_w, sizeof(float) * npad), out);
    CUDA_OR(cudaMalloc((void **)&d_back, sizeof(float) * npad), out);
    CUDA_OR(cudaMalloc((void **)&d_bad, sizeof *d_bad), out);
    CUDA_OR(cudaMemset(d_bad, 0, sizeof *d_bad), out);
    CUDA_OR(cudaMemcpy(d_x, x, sizeof(float) * n, cudaMemcpyHostToDevice), out);
    CUDA_OR(tcomm_cuda_pack(d_x, d_w, n, npad, scale, wire, 0), out);
    /* Unpack the padding too, so that its zeros are checked. */
    CUDA_OR(tcomm_cuda_unpack(d_w, d_back, n, wire, d_bad, 0), out);
    CUDA_OR(tcomm_cuda_unpack((const char *)d_w + n * esize, d_back + n,
                              npad - n, wire, d_bad, 0),
            out);
    CUDA_OR(
        cudaMemcpy(back, d_back, sizeof(float) * npad, cudaMemcpyDeviceToHost),
        out);
    CUDA_OR(cudaMemcpy(bad, d_bad, sizeof *bad, cudaMemcpyDeviceToHost), out);
    rc = 0;
out:
    cudaFree(d_x);
    cudaFree(d_w);
    cudaFree(d_back);
    cudaFree(d_bad);
    return rc;
}

/* Largest relative error of back[i] against x[i] * scale over finite x,
 * NaN-safe (a NaN makes it infinite). */
static double _max_rel_err(const float *x, const float *back, size_t n,
                           float scale)
{
    double maxerr = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            continue;
        double ref = (double)x[i] * scale;
        double e = fabs(back[i] - ref) / (fabs(ref) + 1e-6);
        if (!(e <= maxerr))
            maxerr = isnan(e) ? INFINITY : e;
    }
    return maxerr;
}

/* One wire through the shipped pack/unpack kernels: values up to 1e5 (past
 * fp16's 65504) pre-scaled by 1/8 come back within the wire's rounding
 * (tol, relative), the padding is zero, and the one NaN and one inf planted
 * are the 2 counted. fp16 also without the pre-scale: every value past
 * 65519 must then count as an overflow. */
static void _check_wire(const char *name, int wire, double tol)
{
    const size_t n = (1 << 20) + 3, npad = n + 13;
    float *x = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * npad);
    unsigned long long bad = 0, over = 0;
    size_t pad_wrong = 0, big = 0;
    unsigned seed = 1;
    int unscaled_ok = 1;
    double err;

    for (size_t i = 0; i < n; i++)
        x[i] = _frand(&seed) * 2e5f;
    x[5] = NAN;
    x[n - 2] = INFINITY;
    if (_wire_round_trip(x, n, npad, 0.125f, wire, back, &bad))
        goto fail;
    err = _max_rel_err(x, back, n, 0.125f);
    for (size_t i = n; i < npad; i++)
        pad_wrong += back[i] != 0.0f;
    if (wire == TCOMM_WIRE_FP16) {
        for (size_t i = 0; i < n; i++)
            big += isfinite(x[i]) && fabsf(x[i]) >= 65520.0f;
        if (_wire_round_trip(x, n, npad, 1.0f, wire, back, &over))
            goto fail;
        over -= 2; /* the NaN and inf planted */
        unscaled_ok = big > 0 && over == big;
    }
    _row(name, err <= tol && pad_wrong == 0 && bad == 2 && unscaled_ok,
         "rel err %.1e (max %.0e), pad %zu bad, inf/nan %llu of 2, "
         "unscaled overflows %llu of %zu",
         err, tol, pad_wrong, bad, over, big);
    free(x);
    free(back);
    return;
fail:
    _row(name, ROW_FAIL, "CUDA error (see stderr)");
    free(x);
    free(back);
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
/* NCCL on one rank, on the fp16 buffer the shipped pack kernel makes: a
 * pre-multiplied sum by 3 (ncclRedOpCreatePreMulSum), which a one-rank
 * all-reduce can only pass by applying it; unpacked by the shipped kernel
 * and compared with 3 * x / 8 within fp16's rounding of both steps. */
static void _check_nccl(void)
{
    const size_t n = 1 << 20;
    const uint16_t three = 0x4200; /* 3.0 in IEEE half */
    ncclComm_t comm = NULL;
    ncclRedOp_t op;
    int dev = 0, ver = 0, have_op = 0, done = 0;
    float *h = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * n);
    float *d_x = NULL, *d_back = NULL;
    void *d_w = NULL;
    unsigned long long *d_bad = NULL, bad = 0;
    unsigned seed = 11;
    double err;

    for (size_t i = 0; i < n; i++)
        h[i] = _frand(&seed) * 1e5f;
    ncclGetVersion(&ver);
    if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess)
        goto out;
    if (ncclRedOpCreatePreMulSum(&op, (void *)&three, ncclHalf,
                                 ncclScalarHostImmediate, comm) != ncclSuccess)
        goto out;
    have_op = 1;
    CUDA_OR(cudaMalloc((void **)&d_x, sizeof(float) * n), out);
    CUDA_OR(cudaMalloc((void **)&d_back, sizeof(float) * n), out);
    CUDA_OR(cudaMalloc(&d_w, 2 * n), out);
    CUDA_OR(cudaMalloc((void **)&d_bad, sizeof *d_bad), out);
    CUDA_OR(cudaMemset(d_bad, 0, sizeof *d_bad), out);
    CUDA_OR(cudaMemcpy(d_x, h, sizeof(float) * n, cudaMemcpyHostToDevice), out);
    CUDA_OR(tcomm_cuda_pack(d_x, d_w, n, n, 0.125f, TCOMM_WIRE_FP16, 0), out);
    if (ncclAllReduce(d_w, d_w, n, ncclHalf, op, comm, 0) != ncclSuccess)
        goto out;
    CUDA_OR(tcomm_cuda_unpack(d_w, d_back, n, TCOMM_WIRE_FP16, d_bad, 0), out);
    CUDA_OR(cudaMemcpy(back, d_back, sizeof(float) * n, cudaMemcpyDeviceToHost),
            out);
    CUDA_OR(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost), out);
    err = _max_rel_err(h, back, n, 0.375f);
    /* Two fp16 roundings (the pack, the product): 2^-11 each. */
    _row("NCCL fp16 premul-sum x3", err <= 1e-3 && bad == 0,
         "NCCL %d, 1 rank, 1M halves, rel err %.1e (max 1e-3), inf/nan %llu",
         ver, err, bad);
    done = 1;
out:
    if (!done)
        _row("NCCL fp16 premul-sum x3", ROW_FAIL, "NCCL/CUDA error");
    if (have_op)
        ncclRedOpDestroy(op, comm);
    if (comm)
        ncclCommDestroy(comm);
    cudaFree(d_x);
    cudaFree(d_back);
    cudaFree(d_w);
    cudaFree(d_bad);
    free(h);
    free(back);
}
#endif

int main(void)
{
    int count = 0, tally[3] = {0};
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceCount(&count);

    if (e != cudaSuccess || count == 0) {
        printf("SKIP: no usable CUDA device here (%s); the GPU checks run on a "
               "lent GPU machine via tests/gpu/run\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    cudaGetDeviceProperties(&prop, 0);
    _row("device", ROW_PASS, "%s, sm_%d%d, %.0f GiB", prop.name, prop.major,
         prop.minor, prop.totalGlobalMem / 1073741824.0);
    _check_wire("wire fp16 pack/unpack", TCOMM_WIRE_FP16, 5e-4);
    _check_wire("wire bf16 pack/unpack", TCOMM_WIRE_BF16, 4e-3);
    _check_wire("wire fp32 pack/unpack", TCOMM_WIRE_FP32, 0);
    _check_sgemm();
#ifdef TORUS_HAVE_CUDNN
    _check_cudnn();
#else
    _row("cuDNN conv fwd", ROW_SKIP, "built without cuDNN");
#endif
#ifdef TORUS_HAVE_NCCL
    _check_nccl();
#else
    _row("NCCL fp16 premul-sum x3", ROW_SKIP, "built without NCCL");
#endif
    printf("\n%-28s %-6s %s\n", "check", "result", "detail");
    for (int i = 0; i < _nrows; i++) {
        printf("%-28s %-6s %s\n", _rows[i].name, _result[_rows[i].result],
               _rows[i].detail);
        tally[_rows[i].result]++;
    }
    printf("%d passed, %d failed, %d skipped\n", tally[ROW_PASS],
           tally[ROW_FAIL], tally[ROW_SKIP]);
    return tally[ROW_FAIL] ? 1 : 0;
}
