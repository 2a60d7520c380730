/* transport/nccl_kernels.cu: the device side of the NCCL transport: cast fp32
 * gradients to the wire format with the 1/world pre-scale (before the cast,
 * so fp16 cannot overflow at scale), zero the padding that makes counts
 * divide evenly for reduce-scatter, and cast back while counting inf/nan
 * for loss scaling. Grid-stride loops: any count, one launch. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "trainer/comm/transport/nccl_kernels.h"

enum { WIRE_FP32 = 0, WIRE_FP16 = 1, WIRE_BF16 = 2 };

template <typename T> __device__ T to_wire(float v);
template <> __device__ float to_wire<float>(float v)
{
    return v;
}
template <> __device__ __half to_wire<__half>(float v)
{
    return __float2half_rn(v);
}
template <> __device__ __nv_bfloat16 to_wire<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

__device__ float from_wire(float v)
{
    return v;
}
__device__ float from_wire(__half v)
{
    return __half2float(v);
}
__device__ float from_wire(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

template <typename T>
__global__ void pack_kernel(const float *x, T *w, size_t n, size_t npad,
                            float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < npad;
         i += (size_t)gridDim.x * blockDim.x)
        w[i] = to_wire<T>(i < n ? x[i] * scale : 0.0f);
}

template <typename T>
__global__ void unpack_kernel(const T *w, float *x, size_t n,
                              unsigned long long *bad)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = from_wire(w[i]);
        x[i] = v;
        mine += !isfinite(v);
    }
    if (mine) /* rare: one atomic per thread that saw any */
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
    switch (wire) {
    case WIRE_FP16:
        pack_kernel<<<_blocks(npad), 256, 0, s>>>(x, (__half *)w, n, npad,
                                                  scale);
        break;
    case WIRE_BF16:
        pack_kernel<<<_blocks(npad), 256, 0, s>>>(x, (__nv_bfloat16 *)w, n,
                                                  npad, scale);
        break;
    default:
        pack_kernel<<<_blocks(npad), 256, 0, s>>>(x, (float *)w, n, npad,
                                                  scale);
        break;
    }
    return (int)cudaGetLastError();
}

extern "C" int tcomm_cuda_unpack(const void *w, float *x, size_t n, int wire,
                                 unsigned long long *bad, cudaStream_t s)
{
    switch (wire) {
    case WIRE_FP16:
        unpack_kernel<<<_blocks(n), 256, 0, s>>>((const __half *)w, x, n, bad);
        break;
    case WIRE_BF16:
        unpack_kernel<<<_blocks(n), 256, 0, s>>>((const __nv_bfloat16 *)w, x, n,
                                                 bad);
        break;
    default:
        unpack_kernel<<<_blocks(n), 256, 0, s>>>((const float *)w, x, n, bad);
        break;
    }
    return (int)cudaGetLastError();
}
