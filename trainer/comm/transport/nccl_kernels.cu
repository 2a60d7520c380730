/* transport/nccl_kernels.cu: the device side of the NCCL transport: cast fp32
 * gradients to the wire format with the 1/world pre-scale (before the cast,
 * so fp16 cannot overflow at scale), zero the padding that makes counts
 * divide evenly for reduce-scatter, and cast back while counting inf/nan
 * for loss scaling. One launch each, grid-stride loops, any count. The
 * per-element maths is core/wire_math.h, the host wire code's own, so the
 * CPU tests of that header check what these kernels compute.
 *
 * Vector kernels: 8 elements a thread (16 bytes of 16-bit wire, two
 * float4 of fp32) or 4 on the fp32 wire, in a grid-stride loop over whole
 * packs, then the rest (the last n % 8 and the padding) one per thread,
 * when both buffers are 16-byte aligned; otherwise, or with TCUDA_VEC=0,
 * the scalar kernels. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm/core/wire_math.h"
#include "trainer/comm/transport/nccl_kernels.h"

enum { WIRE_FP32 = 0, WIRE_FP16 = 1, WIRE_BF16 = 2 };

__global__ void pack16_kernel(const float *x, uint16_t *w, size_t n,
                              size_t npad, float scale, int bf16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < npad;
         i += (size_t)gridDim.x * blockDim.x)
        w[i] = i < n ? tc_wm_pack16(x[i], scale, bf16) : (uint16_t)0;
}

__global__ void pack32_kernel(const float *x, float *w, size_t n, size_t npad,
                              float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < npad;
         i += (size_t)gridDim.x * blockDim.x)
        w[i] = i < n ? tc_wm_scaled(x[i], scale) : 0.0f;
}

/* One atomic per thread that saw an inf/nan: rare, so no reduction tree. */
__global__ void unpack16_kernel(const uint16_t *w, float *x, size_t n, int bf16,
                                unsigned long long *bad)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = tc_wm_unpack16(w[i], bf16);
        x[i] = v;
        mine += (unsigned long long)tc_wm_nonfinite(v);
    }
    if (mine)
        atomicAdd(bad, mine);
}

__global__ void unpack32_kernel(const float *w, float *x, size_t n,
                                unsigned long long *bad)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = w[i];
        x[i] = v;
        mine += (unsigned long long)tc_wm_nonfinite(v);
    }
    if (mine)
        atomicAdd(bad, mine);
}

/* TCUDA_VEC=0 keeps the scalar kernels (to compare); read once. */
static int _vec(const void *a, const void *b)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("TCUDA_VEC");
        on = !(e && !strcmp(e, "0"));
    }
    return on && !(((uintptr_t)a | (uintptr_t)b) & 15u);
}

#define _FOR(i, n)                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

static __global__ void pack16_vec(const float *x, uint16_t *w, size_t n, size_t npad,
                           float scale, int bf16)
{
    size_t np = n / 8;
    _FOR(k, np)
    {
        float4 a = ((const float4 *)x)[2 * k], b = ((const float4 *)x)[2 * k + 1];
        float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        uint4 r;
        uint16_t *e = (uint16_t *)&r;
#pragma unroll
        for (int j = 0; j < 8; j++)
            e[j] = tc_wm_pack16(v[j], scale, bf16);
        ((uint4 *)w)[k] = r;
    }
    _FOR(t, npad - np * 8)
    {
        size_t i = np * 8 + t;
        w[i] = i < n ? tc_wm_pack16(x[i], scale, bf16) : (uint16_t)0;
    }
}

static __global__ void pack32_vec(const float *x, float *w, size_t n, size_t npad,
                           float scale)
{
    size_t np = n / 4;
    _FOR(k, np)
    {
        float4 a = ((const float4 *)x)[k];
        ((float4 *)w)[k] = make_float4(
            tc_wm_scaled(a.x, scale), tc_wm_scaled(a.y, scale),
            tc_wm_scaled(a.z, scale), tc_wm_scaled(a.w, scale));
    }
    _FOR(t, npad - np * 4)
    {
        size_t i = np * 4 + t;
        w[i] = i < n ? tc_wm_scaled(x[i], scale) : 0.0f;
    }
}

static __global__ void unpack16_vec(const uint16_t *w, float *x, size_t n, int bf16,
                             unsigned long long *bad)
{
    unsigned long long mine = 0;
    size_t np = n / 8;
    _FOR(k, np)
    {
        uint4 r = ((const uint4 *)w)[k];
        const uint16_t *e = (const uint16_t *)&r;
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            v[j] = tc_wm_unpack16(e[j], bf16);
            mine += (unsigned long long)tc_wm_nonfinite(v[j]);
        }
        ((float4 *)x)[2 * k] = make_float4(v[0], v[1], v[2], v[3]);
        ((float4 *)x)[2 * k + 1] = make_float4(v[4], v[5], v[6], v[7]);
    }
    _FOR(t, n - np * 8)
    {
        float v = tc_wm_unpack16(w[np * 8 + t], bf16);
        x[np * 8 + t] = v;
        mine += (unsigned long long)tc_wm_nonfinite(v);
    }
    if (mine)
        atomicAdd(bad, mine);
}

static __global__ void unpack32_vec(const float *w, float *x, size_t n,
                             unsigned long long *bad)
{
    unsigned long long mine = 0;
    size_t np = n / 4;
    _FOR(k, np)
    {
        float4 a = ((const float4 *)w)[k];
        ((float4 *)x)[k] = a;
        mine += (unsigned long long)(tc_wm_nonfinite(a.x) + tc_wm_nonfinite(a.y) +
                                     tc_wm_nonfinite(a.z) + tc_wm_nonfinite(a.w));
    }
    _FOR(t, n - np * 4)
    {
        float v = w[np * 4 + t];
        x[np * 4 + t] = v;
        mine += (unsigned long long)tc_wm_nonfinite(v);
    }
    if (mine)
        atomicAdd(bad, mine);
}

static unsigned _blocks(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
}

extern "C" int tcomm_cuda_pack(const float *x, void *w, size_t n, size_t npad,
                               float scale, int wire, cudaStream_t s)
{
    int v = _vec(x, w), half = wire == WIRE_FP16 || wire == WIRE_BF16;
    if (v && half)
        pack16_vec<<<_blocks(npad / 8 + 1), 256, 0, s>>>(
            x, (uint16_t *)w, n, npad, scale, wire == WIRE_BF16);
    else if (v)
        pack32_vec<<<_blocks(npad / 4 + 1), 256, 0, s>>>(x, (float *)w, n,
                                                         npad, scale);
    else if (half)
        pack16_kernel<<<_blocks(npad), 256, 0, s>>>(
            x, (uint16_t *)w, n, npad, scale, wire == WIRE_BF16);
    else
        pack32_kernel<<<_blocks(npad), 256, 0, s>>>(x, (float *)w, n, npad,
                                                    scale);
    return (int)cudaGetLastError();
}

extern "C" int tcomm_cuda_unpack(const void *w, float *x, size_t n, int wire,
                                 unsigned long long *bad, cudaStream_t s)
{
    int v = _vec(w, x), half = wire == WIRE_FP16 || wire == WIRE_BF16;
    if (v && half)
        unpack16_vec<<<_blocks(n / 8 + 1), 256, 0, s>>>(
            (const uint16_t *)w, x, n, wire == WIRE_BF16, bad);
    else if (v)
        unpack32_vec<<<_blocks(n / 4 + 1), 256, 0, s>>>((const float *)w, x, n,
                                                        bad);
    else if (half)
        unpack16_kernel<<<_blocks(n), 256, 0, s>>>(
            (const uint16_t *)w, x, n, wire == WIRE_BF16, bad);
    else
        unpack32_kernel<<<_blocks(n), 256, 0, s>>>((const float *)w, x, n,
                                                   bad);
    return (int)cudaGetLastError();
}
