/* trainer/backends/cuda/cuda_kernels.cu: the cuda backend's own kernels
 * (see cuda_kernels.h). Grid-stride loops over elements or rows; the
 * maths of each element is one call into cuda_math.h, shared with the
 * CPU tests. */
#include "trainer/backends/cuda/cuda_kernels.h"
#include "trainer/backends/cuda/cuda_math.h"

#include <cuda_runtime.h>

#define _THREADS 256

static unsigned _blocks(size_t n)
{
    size_t b = (n + _THREADS - 1) / _THREADS;
    /* Enough blocks to fill any GPU; the loops stride over the rest. */
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

#define _FOR(i, n)                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

static int _launched(void)
{
    return (int)cudaGetLastError();
}

__global__ void _add(const float *a, const float *b, float *y, size_t n,
                     int relu)
{
    _FOR(i, n) y[i] = tcuda_add(a[i], b[i], relu);
}

extern "C" int tcuda_k_add(void *stream, const float *a, const float *b,
                           float *y, size_t n, int relu)
{
    _add<<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>(a, b, y, n, relu);
    return _launched();
}

__global__ void _relu_bwd(const float *y, const float *dy, float *dx, size_t n)
{
    _FOR(i, n) dx[i] = tcuda_relu_bwd(y[i], dy[i]);
}

extern "C" int tcuda_k_relu_bwd(void *stream, const float *y, const float *dy,
                                float *dx, size_t n)
{
    _relu_bwd<<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>(y, dy, dx, n);
    return _launched();
}

/* The pointers travel by value: no device array to fill per call. */
struct _srcs {
    const float *c[4];
};

__global__ void _grad_sum(_srcs s, int nc, float *dst, size_t n)
{
    _FOR(i, n) dst[i] = tcuda_sum4(s.c, nc, i);
}

extern "C" int tcuda_k_grad_sum(void *stream, float *const *c, int nc,
                                float *dst, size_t n)
{
    _srcs s = {};
    if (nc < 1 || nc > 4)
        return (int)cudaErrorInvalidValue;
    for (int k = 0; k < nc; k++)
        s.c[k] = c[k];
    _grad_sum<<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>(s, nc, dst, n);
    return _launched();
}

__global__ void _dropout_fwd(const float *x, float *y, uint8_t *mask, size_t n,
                             float p, uint64_t key, uint64_t cut)
{
    _FOR(i, n)
    {
        int keep = tcuda_dropout_keep(key, i, cut);
        mask[i] = (uint8_t)keep;
        y[i] = tcuda_dropout_fwd(x[i], keep, p);
    }
}

extern "C" int tcuda_k_dropout_fwd(void *stream, const float *x, float *y,
                                   uint8_t *mask, size_t n, float p,
                                   uint64_t key)
{
    _dropout_fwd<<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>(
        x, y, mask, n, p, key, tcuda_dropout_cut(p));
    return _launched();
}

__global__ void _dropout_bwd(const float *dy, float *dx, const uint8_t *mask,
                             size_t n, float p)
{
    _FOR(i, n) dx[i] = tcuda_dropout_fwd(dy[i], mask[i], p);
}

extern "C" int tcuda_k_dropout_bwd(void *stream, const float *dy, float *dx,
                                   const uint8_t *mask, size_t n, float p)
{
    _dropout_bwd<<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>(dy, dx,
                                                                    mask, n, p);
    return _launched();
}

/* One thread per row: rows are few (the batch) and the row loop is the
 * host's, so the loss matches it to double rounding. */
__global__ void _xent(const float *z, const int32_t *labels, int n, int k,
                      float s, float norm, double *loss, float *dz)
{
    _FOR(i, (size_t)n)
    {
        loss[i] = tcuda_xent_row(z + i * (size_t)k, k, labels[i], s, norm,
                                 dz ? dz + i * (size_t)k : NULL);
    }
}

extern "C" int tcuda_k_xent(void *stream, const float *z, const int32_t *labels,
                            int n, int k, float s, float norm, double *loss,
                            float *dz)
{
    _xent<<<_blocks((size_t)n), _THREADS, 0, (cudaStream_t)stream>>>(
        z, labels, n, k, s, norm, loss, dz);
    return _launched();
}

__global__ void _bias_add(float *y, const float *b, int n, int k)
{
    _FOR(i, (size_t)n * k) y[i] += b[i % (size_t)k];
}

extern "C" int tcuda_k_bias_add(void *stream, float *y, const float *b, int n,
                                int k)
{
    _bias_add<<<_blocks((size_t)n * k), _THREADS, 0, (cudaStream_t)stream>>>(
        y, b, n, k);
    return _launched();
}

/* One thread per output column, summing down the rows in order. */
__global__ void _bias_grad(const float *dy, float *db, int n, int k)
{
    _FOR(j, (size_t)k)
    {
        float s = 0.0f;
        for (int i = 0; i < n; i++)
            s += dy[(size_t)i * k + j];
        db[j] = s;
    }
}

extern "C" int tcuda_k_bias_grad(void *stream, const float *dy, float *db,
                                 int n, int k)
{
    _bias_grad<<<_blocks((size_t)k), _THREADS, 0, (cudaStream_t)stream>>>(
        dy, db, n, k);
    return _launched();
}
