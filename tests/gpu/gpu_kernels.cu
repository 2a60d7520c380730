/*
 * gpu_kernels.cu: the device code of the GPU smoke check (tests/gpu).
 *
 * Two small kernels that exercise what the trainer's GPU path relies on:
 * fp32 <-> fp16 conversion with fp32 accumulation (the FP16 gradient wire) and
 * a block-wide tree reduction. Exposed to C through extern "C" launchers so the
 * host side stays plain C11 like the rest of torus.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

extern "C" {
#include "tests/gpu/gpu_kernels.h"
}

/* Pre-scale by `scale` (1/world in the trainer) and round to fp16. */
__global__ static void _to_half(const float *in, __half *out, float scale,
                                size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = __float2half_rn(in[i] * scale);
}

/* Sum `k` fp16 vectors into fp32 accumulators, as an fp16 all-reduce would. */
__global__ static void _sum_halves(const __half *in, float *acc, int k,
                                   size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float s = 0.0f;
    for (int j = 0; j < k; j++)
        s += __half2float(in[(size_t)j * n + i]);
    acc[i] = s;
}

__global__ static void _block_sum(const float *in, double *out, size_t n)
{
    __shared__ double part[256];
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += in[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(out, part[0]);
}

extern "C" int gk_fp16_sum(const float *d_in, void *d_half, float *d_acc,
                           float scale, int k, size_t n)
{
    const int threads = 256;
    for (int j = 0; j < k; j++) {
        unsigned blocks = (unsigned)((n + threads - 1) / threads);
        _to_half<<<blocks, threads>>>(
            d_in + (size_t)j * n, (__half *)d_half + (size_t)j * n, scale, n);
    }
    _sum_halves<<<(unsigned)((n + threads - 1) / threads), threads>>>(
        (const __half *)d_half, d_acc, k, n);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int gk_sum(const float *d_in, double *d_out, size_t n)
{
    cudaMemset(d_out, 0, sizeof(double));
    _block_sum<<<128, 256>>>(d_in, d_out, n);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
