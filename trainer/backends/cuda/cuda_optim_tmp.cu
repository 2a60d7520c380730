/* trainer/backends/cuda/cuda_optim_tmp.cu: TEMPORARY stand-in for
 * cuda_optim.cu (the multi-tensor kernels another engineer writes behind
 * cuda_optim.h), so that the cuda-layers branch links and its GPU checks
 * can train. The lead drops this file, and its line in trainer/local.mk,
 * when cuda_optim.cu is merged.
 *
 * It honours cuda_optim.h's contract except "a fixed, small number of
 * kernels": it launches one kernel per param (sums of squares by atomic
 * fp32 adds, then one wait), which is correct but slow for 161 tensors.
 * Working copies in fp32 (the master itself) or fp16 (TENG_F16). */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

/* C headers without their own extern "C". */
extern "C" {
#include "common/torus_error.h"
}
#include "trainer/backends/cuda/cuda_math.h"
#include "trainer/backends/cuda/cuda_optim.h"

struct tcuda_optim {
    tcuda_optim_param *p;
    int np;
    cudaStream_t stream;
    float *dsum; /* device, np */
    float *hsum; /* pinned, np */
};

#define _FOR(i, n)                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

static unsigned _blocks(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

static __global__ void _sumsq(const float *x, size_t n, float *out)
{
    float s = 0.0f;
    _FOR(i, n) s += x[i] * x[i];
    atomicAdd(out, s);
}

static __global__ void _sgd(float *w, const float *g, float *v, size_t n, float lr,
                     float momentum, float wd)
{
    _FOR(i, n)
    {
        float vi = momentum * v[i] + lr * (g[i] + wd * w[i]);
        v[i] = vi;
        w[i] -= vi;
    }
}

static __global__ void _to_f16(const float *w, uint16_t *h, size_t n)
{
    _FOR(i, n) h[i] = tcuda_f16_from_f32(w[i]);
}

static int _err(cudaError_t e, const char *what)
{
    return e == cudaSuccess ? TENG_OK
                            : TORUS_FAIL(TENG_EBACKEND, "%s: %s", what,
                                         cudaGetErrorString(e));
}

extern "C" int tcuda_optim_create(const tcuda_optim_param *p, int np,
                                  void *stream, tcuda_optim **out)
{
    tcuda_optim *o = (tcuda_optim *)calloc(1, sizeof(*o));
    *out = NULL;
    if (!o)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    o->np = np;
    o->stream = (cudaStream_t)stream;
    o->p = (tcuda_optim_param *)calloc((size_t)np + 1, sizeof(*p));
    int rc = o->p ? TENG_OK : TORUS_FAIL(TENG_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < np; i++)
        if (p[i].work_dtype != TENG_F32 && p[i].work_dtype != TENG_F16)
            rc = TORUS_FAIL(TENG_EINVAL, "temporary optimizer kernels: fp32 "
                                         "or fp16 working copies only");
    if (!rc) {
        memcpy(o->p, p, sizeof(*p) * (size_t)np);
        rc = _err(cudaMalloc((void **)&o->dsum, sizeof(float) * (np + 1)),
                  "cudaMalloc");
    }
    if (!rc)
        rc = _err(cudaMallocHost((void **)&o->hsum, sizeof(float) * (np + 1)),
                  "cudaMallocHost");
    if (rc) {
        tcuda_optim_destroy(o);
        return rc;
    }
    *out = o;
    return TENG_OK;
}

extern "C" int tcuda_optim_sumsq(tcuda_optim *o, const void *buf, float *out)
{
    int rc = _err(cudaMemsetAsync(o->dsum, 0, sizeof(float) * o->np, o->stream),
                  "cudaMemsetAsync");
    for (int i = 0; !rc && i < o->np; i++) {
        const float *x = (const float *)((const char *)buf + o->p[i].offset);
        _sumsq<<<_blocks(o->p[i].count), 256, 0, o->stream>>>(x, o->p[i].count,
                                                              o->dsum + i);
        rc = _err(cudaGetLastError(), "sum of squares kernel");
    }
    if (!rc)
        rc = _err(cudaMemcpyAsync(o->hsum, o->dsum, sizeof(float) * o->np,
                                  cudaMemcpyDeviceToHost, o->stream),
                  "cudaMemcpyAsync");
    if (!rc)
        rc = _err(cudaStreamSynchronize(o->stream), "cudaStreamSynchronize");
    if (!rc)
        memcpy(out, o->hsum, sizeof(float) * o->np);
    return rc;
}

/* Param i's fp16 working copy := its rounded master. */
static int _refresh_one(tcuda_optim *o, int i)
{
    const tcuda_optim_param *p = &o->p[i];
    if (p->work_dtype == TENG_F32)
        return TENG_OK;
    _to_f16<<<_blocks(p->count), 256, 0, o->stream>>>(
        p->master, (uint16_t *)p->work, p->count);
    return _err(cudaGetLastError(), "working copy kernel");
}

extern "C" int tcuda_optim_sgd(tcuda_optim *o, void *vel,
                               const teng_sgd_args *a)
{
    for (int i = 0; i < o->np; i++) {
        const tcuda_optim_param *p = &o->p[i];
        _sgd<<<_blocks(p->count), 256, 0, o->stream>>>(
            p->master, p->grad, (float *)((char *)vel + p->offset), p->count,
            a[i].lr, a[i].momentum, a[i].wd);
        int rc = _err(cudaGetLastError(), "SGD kernel");
        if (rc || (rc = _refresh_one(o, i)))
            return rc;
    }
    return TENG_OK;
}

extern "C" int tcuda_optim_refresh(tcuda_optim *o)
{
    for (int i = 0; i < o->np; i++) {
        int rc = _refresh_one(o, i);
        if (rc)
            return rc;
    }
    return TENG_OK;
}

extern "C" void tcuda_optim_destroy(tcuda_optim *o)
{
    if (!o)
        return;
    if (o->dsum)
        cudaFree(o->dsum);
    if (o->hsum)
        cudaFreeHost(o->hsum);
    free(o->p);
    free(o);
}
