/* trainer/backends/cuda/cuda_kernels.cu: the cuda backend's own kernels
 * (see cuda_kernels.h). Grid-stride loops over elements or rows, templated
 * on the activation type (float, or fp16 bits in uint16_t); loads and
 * stores convert through cuda_math.h, and the maths of each element is one
 * call into cuda_math.h, shared with the CPU tests.
 *
 * Vector kernels: the element-wise ones (add, ReLU backward, gradient
 * sums, the fp16 <-> fp32 casts) move 16 bytes per access (a uint4: 8 fp16
 * or 4 fp32 elements) in a grid-stride loop over whole packs, then the
 * last n % per elements one per thread, when every pointer is 16-byte
 * aligned (tcuda_vec_aligned); otherwise, or with TCUDA_VEC=0, the scalar
 * kernels run. The softmax cross-entropy spreads each row over a warp:
 * lanes stride the classes, the maximum and the fp64 sum of exponentials
 * are combined across the warp by shuffles, and each element's terms are
 * elem_math.h's (teng_xent_*), in fp64 as the host's; only the order of
 * the sum differs from the host's row loop (its result within fp64
 * rounding of it). */
#include "data/read/tdata_norm.h"
#include "trainer/backends/cuda/cuda_kernels.h"
#include "trainer/backends/cuda/cuda_layout.h"
#include "trainer/backends/cuda/cuda_grid.h"
#include "trainer/backends/cuda/cuda_math.h"

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

/* Kernels are static: the library links other .cu objects (the optimizer
 * kernels), and kernel names must not meet there. */

/* Dispatch a templated kernel on the activation type. */
#define _LAUNCH(half, kern, n, ...)                                            \
    do {                                                                       \
        if (half)                                                              \
            kern<uint16_t>                                                     \
                <<<tcuda_blocks(n), TCUDA_THREADS, 0, (cudaStream_t)stream>>>( \
                    __VA_ARGS__);                                              \
        else                                                                   \
            kern<float>                                                        \
                <<<tcuda_blocks(n), TCUDA_THREADS, 0, (cudaStream_t)stream>>>( \
                    __VA_ARGS__);                                              \
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

/* TCUDA_VEC=0 keeps the scalar kernels (to compare); read once. */
extern "C" int tcuda_k_vec(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("TCUDA_VEC");
        on = !(e && !strcmp(e, "0"));
    }
    return on;
}

/* Elements of T in one 16-byte pack. */
template <typename T> struct _pk {
    enum { N = 16 / sizeof(T) };
};

/* Pack k of p as floats, and back. */
template <typename T>
__device__ static inline void _ldv(const void *p, size_t k, float *v)
{
    uint4 r = ((const uint4 *)p)[k];
    const T *e = (const T *)&r;
#pragma unroll
    for (int j = 0; j < _pk<T>::N; j++)
        v[j] = _ld(e, j);
}

template <typename T>
__device__ static inline void _stv(void *p, size_t k, const float *v)
{
    uint4 r;
    T *e = (T *)&r;
#pragma unroll
    for (int j = 0; j < _pk<T>::N; j++)
        _st(e, j, v[j]);
    ((uint4 *)p)[k] = r;
}

/* The vector launch of kern when tcuda_k_vec() and the pointers allow
 * it (ok), else the scalar skern; 8 fp16 or 4 fp32 elements a pack. */
#define _LAUNCH_V(half, ok, kern, skern, n, ...)                       \
    do {                                                               \
        if (tcuda_k_vec() && (ok)) {                                   \
            size_t _np = (n) / ((half) ? 8 : 4) + 1;                   \
            if (half)                                                  \
                kern<uint16_t><<<tcuda_blocks(_np), TCUDA_THREADS, 0,  \
                                 (cudaStream_t)stream>>>(__VA_ARGS__); \
            else                                                       \
                kern<float><<<tcuda_blocks(_np), TCUDA_THREADS, 0,     \
                              (cudaStream_t)stream>>>(__VA_ARGS__);    \
        } else                                                         \
            _LAUNCH(half, skern, n, __VA_ARGS__);                      \
    } while (0)

template <typename T>
static __global__ void _add(const void *a, const void *b, void *y, size_t n,
                            int relu)
{
    TCUDA_FOR(i, n)
    _st((T *)y, i, tcuda_add(_ld((const T *)a, i), _ld((const T *)b, i), relu));
}

/* The two-input element-wise kernels as functors of (a[i], b[i]), for
 * one vector kernel (_binary_v) shared by add and ReLU backward. */
struct _op_add {
    int relu;
    __device__ float operator()(float a, float b) const
    {
        return tcuda_add(a, b, relu);
    }
};
struct _op_relu_bwd {
    __device__ float operator()(float y, float dy) const
    {
        return tcuda_relu_bwd(y, dy);
    }
};

template <typename T, typename Op>
static __global__ void _binary_v(const void *a, const void *b, void *y,
                                 size_t n, Op op)
{
    const int N = _pk<T>::N;
    size_t np = n / N;
    TCUDA_FOR(k, np)
    {
        float va[N], vb[N];
        _ldv<T>(a, k, va);
        _ldv<T>(b, k, vb);
#pragma unroll
        for (int j = 0; j < N; j++)
            va[j] = op(va[j], vb[j]);
        _stv<T>(y, k, va);
    }
    TCUDA_FOR(t, n - np * N)
    {
        size_t i = np * N + t;
        _st((T *)y, i, op(_ld((const T *)a, i), _ld((const T *)b, i)));
    }
}

/* The vector launch of a two-input kernel: 0 when it ran, -1 when the
 * scalar one must (TCUDA_VEC=0, a pointer not 16-byte aligned). */
template <typename Op>
static int _binary(void *stream, int half, const void *a, const void *b,
                   void *y, size_t n, Op op)
{
    const void *p[3] = {a, b, y};
    if (!tcuda_k_vec() || !tcuda_vec_aligned(p, 3))
        return -1;
    if (half)
        _binary_v<uint16_t, Op><<<tcuda_blocks(n / 8 + 1), TCUDA_THREADS, 0,
                                  (cudaStream_t)stream>>>(a, b, y, n, op);
    else
        _binary_v<float, Op><<<tcuda_blocks(n / 4 + 1), TCUDA_THREADS, 0,
                               (cudaStream_t)stream>>>(a, b, y, n, op);
    return 0;
}

extern "C" int tcuda_k_add(void *stream, int half, const void *a, const void *b,
                           void *y, size_t n, int relu)
{
    if (_binary(stream, half, a, b, y, n, _op_add{relu}))
        _LAUNCH(half, _add, n, a, b, y, n, relu);
    return _launched();
}

template <typename T>
static __global__ void _relu_bwd(const void *y, const void *dy, void *dx,
                                 size_t n)
{
    TCUDA_FOR(i, n)
    _st((T *)dx, i,
        tcuda_relu_bwd(_ld((const T *)y, i), _ld((const T *)dy, i)));
}

extern "C" int tcuda_k_relu_bwd(void *stream, int half, const void *y,
                                const void *dy, void *dx, size_t n)
{
    if (_binary(stream, half, y, dy, dx, n, _op_relu_bwd{}))
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
    TCUDA_FOR(i, n)
    {
        float v[4];
        const float *vp[4] = {&v[0], &v[1], &v[2], &v[3]};
        for (int k = 0; k < nc; k++)
            v[k] = _ld((const T *)s.c[k], i);
        _st((T *)dst, i, tcuda_sum4(vp, nc, 0));
    }
}

template <typename T>
static __global__ void _grad_sum_v(_srcs s, int nc, void *dst, size_t n)
{
    const int N = _pk<T>::N;
    size_t np = n / N;
    TCUDA_FOR(k, np)
    {
        float v[4][N], out[N];
        for (int c = 0; c < nc; c++)
            _ldv<T>(s.c[c], k, v[c]);
#pragma unroll
        for (int j = 0; j < N; j++) {
            float e[4];
            const float *ep[4] = {&e[0], &e[1], &e[2], &e[3]};
            for (int c = 0; c < nc; c++)
                e[c] = v[c][j];
            out[j] = tcuda_sum4(ep, nc, 0);
        }
        _stv<T>(dst, k, out);
    }
    TCUDA_FOR(t, n - np * N)
    {
        size_t i = np * N + t;
        float v[4];
        const float *vp[4] = {&v[0], &v[1], &v[2], &v[3]};
        for (int c = 0; c < nc; c++)
            v[c] = _ld((const T *)s.c[c], i);
        _st((T *)dst, i, tcuda_sum4(vp, nc, 0));
    }
}

extern "C" int tcuda_k_grad_sum(void *stream, int half, void *const *c, int nc,
                                void *dst, size_t n)
{
    _srcs s = {};
    const void *p[5] = {dst};
    if (nc < 1 || nc > 4)
        return (int)cudaErrorInvalidValue;
    for (int k = 0; k < nc; k++)
        s.c[k] = p[k + 1] = c[k];
    _LAUNCH_V(half, tcuda_vec_aligned(p, nc + 1), _grad_sum_v, _grad_sum, n, s,
              nc, dst, n);
    return _launched();
}

template <typename T>
static __global__ void _dropout_fwd(const void *x, void *y, uint8_t *mask,
                                    size_t n, float p, uint64_t key,
                                    uint64_t cut, int nhwc, int C, int H, int W)
{
    TCUDA_FOR(i, n)
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
    TCUDA_FOR(i, n)
    _st((T *)dx, i, teng_dropout_elem(_ld((const T *)dy, i), mask[i], p));
}

extern "C" int tcuda_k_dropout_bwd(void *stream, int half, const void *dy,
                                   void *dx, const uint8_t *mask, size_t n,
                                   float p)
{
    _LAUNCH(half, _dropout_bwd, n, dy, dx, mask, n, p);
    return _launched();
}

/* One thread per row (TCUDA_VEC=0): the host's row loop itself. */
static __global__ void _xent(const float *z, const int32_t *labels, int n,
                             int k, float s, float norm, double *loss,
                             float *dz)
{
    TCUDA_FOR(i, (size_t)n)
    {
        loss[i] = teng_xent_row(z + i * (size_t)k, k, labels[i], s, norm,
                                dz ? dz + i * (size_t)k : NULL);
    }
}

/* The warp's sum of v, the same value in every lane (lane 0's: the
 * butterfly leaves each lane its own order of additions). */
__device__ static inline double _warp_sum(double v)
{
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

/* One row over the 32 lanes of a warp: each lane's part is
 * elem_math.h's (teng_xent_lane_*), combined across the warp: the maximum
 * with the host's comparison, the sums in fp64; lane 0 writes the loss. */
__device__ static void _xent_warp_row(const float *z, int k, int32_t label,
                                      float s, float norm, double *loss,
                                      float *dz)
{
    int lane = threadIdx.x & 31;
    float zmax = teng_xent_lane_max(z, k, lane, 32);
    for (int o = 16; o; o >>= 1) {
        float v = __shfl_xor_sync(0xffffffffu, zmax, o);
        zmax = v > zmax ? v : zmax;
    }
    double sum = _warp_sum(teng_xent_lane_sum(z, k, zmax, lane, 32));
    double lse = log(sum) + zmax;
    double l = _warp_sum(teng_xent_lane_loss(z, k, label, s, lse, lane, 32));
    if (lane == 0)
        *loss = l;
    if (dz)
        for (int j = lane; j < k; j += 32)
            dz[j] = teng_xent_grad(z[j], lse, teng_xent_target(j, label, s, k),
                                   norm);
}

/* Rows over the warps of the grid (a warp's lanes share each row, so the
 * shuffles see full warps). norm_dev: the normaliser formed on the device
 * (gbatch / *scale, as teng_loss_norm's), else norm. */
static __global__ void _xent_w(const float *z, const int32_t *labels, int n,
                               int k, float s, float norm, double gbatch,
                               const double *scale, double *loss, float *dz)
{
    if (scale)
        norm = (float)__ddiv_rn(gbatch, *scale);
    size_t w = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
    size_t nw = (size_t)gridDim.x * blockDim.x / 32;
    for (size_t i = w; i < (size_t)n; i += nw)
        _xent_warp_row(z + i * (size_t)k, k, labels[i], s, norm, loss + i,
                       dz ? dz + i * (size_t)k : NULL);
}

static int _xent_warps(void *stream, const float *z, const int32_t *labels,
                       int n, int k, float s, float norm, double gbatch,
                       const double *scale, double *loss, float *dz)
{
    _xent_w<<<tcuda_blocks((size_t)n * 32), TCUDA_THREADS, 0,
              (cudaStream_t)stream>>>(z, labels, n, k, s, norm, gbatch, scale,
                                      loss, dz);
    return _launched();
}

extern "C" int tcuda_k_xent(void *stream, const float *z, const int32_t *labels,
                            int n, int k, float s, float norm, double *loss,
                            float *dz)
{
    if (tcuda_k_vec())
        return _xent_warps(stream, z, labels, n, k, s, norm, 0.0, NULL, loss,
                           dz);
    _xent<<<tcuda_blocks((size_t)n), TCUDA_THREADS, 0, (cudaStream_t)stream>>>(
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
    TCUDA_FOR(i, (size_t)n)
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
    if (tcuda_k_vec())
        return _xent_warps(stream, z, labels, n, k, s, 0.0f, gbatch, scale,
                           loss, dz);
    _xent_dev<<<tcuda_blocks((size_t)n), TCUDA_THREADS, 0,
                (cudaStream_t)stream>>>(z, labels, n, k, s, gbatch, scale, loss,
                                        dz);
    return _launched();
}

template <typename T>
static __global__ void _bias_add(void *y, const float *b, int n, int k)
{
    TCUDA_FOR(i, (size_t)n * k)
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
    TCUDA_FOR(j, (size_t)k)
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
    TCUDA_FOR(i, n) dst[i] = tcuda_f16_from_f32(src[i]);
}

static __global__ void _to_f32(const uint16_t *src, float *dst, size_t n)
{
    TCUDA_FOR(i, n) dst[i] = tcuda_f32_from_f16(src[i]);
}

/* 8 elements a thread: two float4 of fp32, one uint4 of fp16. */
static __global__ void _to_f16_v(const float *src, uint16_t *dst, size_t n)
{
    size_t np = n / 8;
    TCUDA_FOR(k, np)
    {
        float v[8];
        _ldv<float>(src, 2 * k, v);
        _ldv<float>(src, 2 * k + 1, v + 4);
        _stv<uint16_t>(dst, k, v);
    }
    TCUDA_FOR(t, n - np * 8)
    dst[np * 8 + t] = tcuda_f16_from_f32(src[np * 8 + t]);
}

static __global__ void _to_f32_v(const uint16_t *src, float *dst, size_t n)
{
    size_t np = n / 8;
    TCUDA_FOR(k, np)
    {
        float v[8];
        _ldv<uint16_t>(src, k, v);
        _stv<float>(dst, 2 * k, v);
        _stv<float>(dst, 2 * k + 1, v + 4);
    }
    TCUDA_FOR(t, n - np * 8)
    dst[np * 8 + t] = tcuda_f32_from_f16(src[np * 8 + t]);
}

extern "C" int tcuda_k_to_f16(void *stream, const float *src, uint16_t *dst,
                              size_t n)
{
    const void *p[2] = {src, dst};
    if (tcuda_k_vec() && tcuda_vec_aligned(p, 2))
        _to_f16_v<<<tcuda_blocks(n / 8 + 1), TCUDA_THREADS, 0,
                    (cudaStream_t)stream>>>(src, dst, n);
    else
        _to_f16<<<tcuda_blocks(n), TCUDA_THREADS, 0, (cudaStream_t)stream>>>(
            src, dst, n);
    return _launched();
}

extern "C" int tcuda_k_to_f32(void *stream, const uint16_t *src, float *dst,
                              size_t n)
{
    const void *p[2] = {src, dst};
    if (tcuda_k_vec() && tcuda_vec_aligned(p, 2))
        _to_f32_v<<<tcuda_blocks(n / 8 + 1), TCUDA_THREADS, 0,
                    (cudaStream_t)stream>>>(src, dst, n);
    else
        _to_f32<<<tcuda_blocks(n), TCUDA_THREADS, 0, (cudaStream_t)stream>>>(
            src, dst, n);
    return _launched();
}

static __global__ void _to_f16_nhwc(const float *src, uint16_t *dst, size_t n,
                                    int C, int H, int W)
{
    TCUDA_FOR(i, n)
    dst[i] = tcuda_f16_from_f32(src[tcuda_nchw_of_nhwc(i, C, H, W)]);
}

static __global__ void _to_f32_nchw(const uint16_t *src, float *dst, size_t n,
                                    int C, int H, int W)
{
    TCUDA_FOR(i, n)
    dst[tcuda_nchw_of_nhwc(i, C, H, W)] = tcuda_f32_from_f16(src[i]);
}

extern "C" int tcuda_k_to_f16_nhwc(void *stream, const float *src,
                                   uint16_t *dst, size_t n, const int chw[3])
{
    _to_f16_nhwc<<<tcuda_blocks(n), TCUDA_THREADS, 0, (cudaStream_t)stream>>>(
        src, dst, n, chw[0], chw[1], chw[2]);
    return _launched();
}

extern "C" int tcuda_k_to_f32_nchw(void *stream, const uint16_t *src,
                                   float *dst, size_t n, const int chw[3])
{
    _to_f32_nchw<<<tcuda_blocks(n), TCUDA_THREADS, 0, (cudaStream_t)stream>>>(
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
    TCUDA_FOR(i, n)
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
