/* trainer/backends/cuda/cuda_kernels.cu: the cuda backend's own kernels
 * (see cuda_kernels.h). Grid-stride loops over elements or rows, templated
 * on the activation type (float, or fp16 bits in uint16_t); loads and
 * stores convert through cuda_math.h, and the maths of each element is one
 * call into cuda_math.h, shared with the CPU tests. */
#include "data/read/tdata_norm.h"
#include "trainer/backends/cuda/cuda_kernels.h"
#include "trainer/backends/cuda/cuda_layout.h"
#include "trainer/backends/cuda/cuda_math.h"

#include <cuda_runtime.h>

/* Kernels are static: the library links other .cu objects (the optimizer
 * kernels), and kernel names must not meet there. */
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

/* Dispatch a templated kernel on the activation type. */
#define _LAUNCH(half, kern, n, ...)                                            \
    do {                                                                       \
        if (half)                                                              \
            kern<uint16_t><<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>( \
                __VA_ARGS__);                                                  \
        else                                                                   \
            kern<float><<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>(    \
                __VA_ARGS__);                                                  \
    } while (0)

static int _launched(void)
{
    return (int)cudaGetLastError();
}

__device__ static inline float _ld(const float *p, size_t i)
{
    return p[i];
}
__device__ static inline float _ld(const uint16_t *p, size_t i)
{
    return tcuda_f32_from_f16(p[i]);
}
__device__ static inline void _st(float *p, size_t i, float v)
{
    p[i] = v;
}
__device__ static inline void _st(uint16_t *p, size_t i, float v)
{
    p[i] = tcuda_f16_from_f32(v);
}

template <typename T>
static __global__ void _add(const void *a, const void *b, void *y, size_t n,
                            int relu)
{
    _FOR(i, n)
    _st((T *)y, i, tcuda_add(_ld((const T *)a, i), _ld((const T *)b, i), relu));
}

extern "C" int tcuda_k_add(void *stream, int half, const void *a, const void *b,
                           void *y, size_t n, int relu)
{
    _LAUNCH(half, _add, n, a, b, y, n, relu);
    return _launched();
}

template <typename T>
static __global__ void _relu_bwd(const void *y, const void *dy, void *dx,
                                 size_t n)
{
    _FOR(i, n)
    _st((T *)dx, i,
        tcuda_relu_bwd(_ld((const T *)y, i), _ld((const T *)dy, i)));
}

extern "C" int tcuda_k_relu_bwd(void *stream, int half, const void *y,
                                const void *dy, void *dx, size_t n)
{
    _LAUNCH(half, _relu_bwd, n, y, dy, dx, n);
    return _launched();
}

/* The pointers travel by value: no device array to fill per call. */
struct _srcs {
    const void *c[4];
};

template <typename T>
static __global__ void _grad_sum(_srcs s, int nc, void *dst, size_t n)
{
    _FOR(i, n)
    {
        float v[4];
        const float *vp[4] = {&v[0], &v[1], &v[2], &v[3]};
        for (int k = 0; k < nc; k++)
            v[k] = _ld((const T *)s.c[k], i);
        _st((T *)dst, i, tcuda_sum4(vp, nc, 0));
    }
}

extern "C" int tcuda_k_grad_sum(void *stream, int half, void *const *c, int nc,
                                void *dst, size_t n)
{
    _srcs s = {};
    if (nc < 1 || nc > 4)
        return (int)cudaErrorInvalidValue;
    for (int k = 0; k < nc; k++)
        s.c[k] = c[k];
    _LAUNCH(half, _grad_sum, n, s, nc, dst, n);
    return _launched();
}

template <typename T>
static __global__ void _dropout_fwd(const void *x, void *y, uint8_t *mask,
                                    size_t n, float p, uint64_t key,
                                    uint64_t cut, int nhwc, int C, int H, int W)
{
    _FOR(i, n)
    {
        size_t at = nhwc ? tcuda_nchw_of_nhwc(i, C, H, W) : i;
        int keep = teng_dropout_keep(key, at, cut);
        mask[i] = (uint8_t)keep;
        _st((T *)y, i, teng_dropout_elem(_ld((const T *)x, i), keep, p));
    }
}

extern "C" int tcuda_k_dropout_fwd(void *stream, int half, const void *x,
                                   void *y, uint8_t *mask, size_t n, float p,
                                   uint64_t key, int nhwc, const int chw[3])
{
    _LAUNCH(half, _dropout_fwd, n, x, y, mask, n, p, key, teng_dropout_cut(p),
            nhwc, chw[0], chw[1], chw[2]);
    return _launched();
}

template <typename T>
static __global__ void _dropout_bwd(const void *dy, void *dx,
                                    const uint8_t *mask, size_t n, float p)
{
    _FOR(i, n)
    _st((T *)dx, i, teng_dropout_elem(_ld((const T *)dy, i), mask[i], p));
}

extern "C" int tcuda_k_dropout_bwd(void *stream, int half, const void *dy,
                                   void *dx, const uint8_t *mask, size_t n,
                                   float p)
{
    _LAUNCH(half, _dropout_bwd, n, dy, dx, mask, n, p);
    return _launched();
}

/* One thread per row: rows are few (the batch) and the row loop is the
 * host's, so the loss matches it to double rounding. */
static __global__ void _xent(const float *z, const int32_t *labels, int n,
                             int k, float s, float norm, double *loss,
                             float *dz)
{
    _FOR(i, (size_t)n)
    {
        loss[i] = teng_xent_row(z + i * (size_t)k, k, labels[i], s, norm,
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

/* As _xent, the normaliser read from device memory at run time (the
 * division as teng_loss_norm's, correctly rounded fp64 then fp32). */
static __global__ void _xent_dev(const float *z, const int32_t *labels, int n,
                                 int k, float s, double gbatch,
                                 const double *scale, double *loss, float *dz)
{
    float norm = (float)__ddiv_rn(gbatch, *scale);
    _FOR(i, (size_t)n)
    {
        loss[i] = teng_xent_row(z + i * (size_t)k, k, labels[i], s, norm,
                                dz ? dz + i * (size_t)k : NULL);
    }
}

extern "C" int tcuda_k_xent_dev(void *stream, const float *z,
                                const int32_t *labels, int n, int k, float s,
                                double gbatch, const double *scale,
                                double *loss, float *dz)
{
    _xent_dev<<<_blocks((size_t)n), _THREADS, 0, (cudaStream_t)stream>>>(
        z, labels, n, k, s, gbatch, scale, loss, dz);
    return _launched();
}

template <typename T>
static __global__ void _bias_add(void *y, const float *b, int n, int k)
{
    _FOR(i, (size_t)n * k)
    _st((T *)y, i, _ld((const T *)y, i) + b[i % (size_t)k]);
}

extern "C" int tcuda_k_bias_add(void *stream, int half, void *y, const float *b,
                                int n, int k)
{
    _LAUNCH(half, _bias_add, (size_t)n * k, y, b, n, k);
    return _launched();
}

/* One thread per output column, summing down the rows in order. */
template <typename T>
static __global__ void _bias_grad(const void *dy, float *db, int n, int k)
{
    _FOR(j, (size_t)k)
    {
        float s = 0.0f;
        for (int i = 0; i < n; i++)
            s += _ld((const T *)dy, (size_t)i * k + j);
        db[j] = s;
    }
}

extern "C" int tcuda_k_bias_grad(void *stream, int half, const void *dy,
                                 float *db, int n, int k)
{
    _LAUNCH(half, _bias_grad, (size_t)k, dy, db, n, k);
    return _launched();
}

static __global__ void _to_f16(const float *src, uint16_t *dst, size_t n)
{
    _FOR(i, n) dst[i] = tcuda_f16_from_f32(src[i]);
}

static __global__ void _to_f32(const uint16_t *src, float *dst, size_t n)
{
    _FOR(i, n) dst[i] = tcuda_f32_from_f16(src[i]);
}

extern "C" int tcuda_k_to_f16(void *stream, const float *src, uint16_t *dst,
                              size_t n)
{
    _to_f16<<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>(src, dst, n);
    return _launched();
}

extern "C" int tcuda_k_to_f32(void *stream, const uint16_t *src, float *dst,
                              size_t n)
{
    _to_f32<<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>(src, dst, n);
    return _launched();
}

static __global__ void _to_f16_nhwc(const float *src, uint16_t *dst, size_t n,
                                    int C, int H, int W)
{
    _FOR(i, n) dst[i] = tcuda_f16_from_f32(src[tcuda_nchw_of_nhwc(i, C, H, W)]);
}

static __global__ void _to_f32_nchw(const uint16_t *src, float *dst, size_t n,
                                    int C, int H, int W)
{
    _FOR(i, n) dst[tcuda_nchw_of_nhwc(i, C, H, W)] = tcuda_f32_from_f16(src[i]);
}

extern "C" int tcuda_k_to_f16_nhwc(void *stream, const float *src,
                                   uint16_t *dst, size_t n, const int chw[3])
{
    _to_f16_nhwc<<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>(
        src, dst, n, chw[0], chw[1], chw[2]);
    return _launched();
}

extern "C" int tcuda_k_to_f32_nchw(void *stream, const uint16_t *src,
                                   float *dst, size_t n, const int chw[3])
{
    _to_f32_nchw<<<_blocks(n), _THREADS, 0, (cudaStream_t)stream>>>(
        src, dst, n, chw[0], chw[1], chw[2]);
    return _launched();
}

/* Per-channel constants by value: a kernel argument, no device copy. */
typedef struct {
    float scale[3], bias[3];
} _norm3;

template <typename T>
static __global__ void _input_u8(const uint8_t *px, const uint8_t *flips,
                                 void *y, size_t n, int C, int H, int W,
                                 _norm3 k)
{
    _FOR(i, n)
    {
        int ch;
        size_t at = tdata_norm_src(i, C, H, W, sizeof(T) == 2, flips, &ch);
        _st((T *)y, i, tdata_norm_px(px[at], k.scale[ch], k.bias[ch]));
    }
}

extern "C" int tcuda_k_input_u8(void *stream, int half, const uint8_t *px,
                                const uint8_t *flips, void *y, size_t n,
                                const int chw[3], const float scale[3],
                                const float bias[3])
{
    _norm3 k;
    for (int c = 0; c < 3; c++) {
        k.scale[c] = c < chw[0] ? scale[c] : 0.f;
        k.bias[c] = c < chw[0] ? bias[c] : 0.f;
    }
    _LAUNCH(half, _input_u8, n, px, flips, y, n, chw[0], chw[1], chw[2], k);
    return _launched();
}
