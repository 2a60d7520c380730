/* transport/nccl_kernels.cu: the device side of the NCCL transport: cast fp32
 * gradients to the wire format with the 1/world pre-scale (before the cast,
 * so fp16 cannot overflow at scale), zero the padding that makes counts
 * divide evenly for reduce-scatter, and cast back while counting inf/nan
 * for loss scaling. One launch each, grid-stride loops, any count. The
 * per-element maths is core/wire_math.h, the host wire code's own, so the
 * CPU tests of that header check what these kernels compute. */
#include <stdint.h>

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

static unsigned _blocks(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
}

extern "C" int tcomm_cuda_pack(const float *x, void *w, size_t n, size_t npad,
                               float scale, int wire, cudaStream_t s)
{
    if (wire == WIRE_FP16 || wire == WIRE_BF16)
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
    if (wire == WIRE_FP16 || wire == WIRE_BF16)
        unpack16_kernel<<<_blocks(n), 256, 0, s>>>(
            (const uint16_t *)w, x, n, wire == WIRE_BF16, bad);
    else
        unpack32_kernel<<<_blocks(n), 256, 0, s>>>((const float *)w, x, n,
                                                   bad);
    return (int)cudaGetLastError();
}
