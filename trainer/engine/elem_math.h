/* trainer/engine/elem_math.h: the per-element maths of the engine's host
 * kernels (host_kernels.c) and of its counter hash (rng.h), as static
 * inline functions that compile for the device under nvcc and as plain C
 * everywhere else. The engine includes no backend, so a GPU backend
 * includes this to run the very expressions the host kernels run (the
 * cuda backend's kernels call them through cuda_math.h); one copy, so the
 * two cannot drift apart.
 *
 * Contract: each function is one element (or one row) of the host kernel
 * it names, in that kernel's order of operations, so a device kernel that
 * calls it gives the host's result: bit for bit for the hash and dropout,
 * to double rounding for the cross-entropy row (device exp/log).
 * Includes only C headers. */
#ifndef TORUS_TRAINER_ENGINE_ELEM_MATH_H
#define TORUS_TRAINER_ENGINE_ELEM_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TENG_HD static inline __host__ __device__
#else
#define TENG_HD static inline
#endif

/* Stateless: a well-mixed 64-bit value for counter x (splitmix64's
 * finaliser). Dropout masks hash (key + element), so a mask depends only
 * on its key and resume needs no saved state. */
TENG_HD uint64_t teng_hash64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Dropout's cut: p * 2^24, compared with the top 24 bits of the hash. */
TENG_HD uint64_t teng_dropout_cut(float p)
{
    return (uint64_t)((double)p * 16777216.0);
}

/* Whether element i of the mask of `key` is kept. */
TENG_HD int teng_dropout_keep(uint64_t key, size_t i, uint64_t cut)
{
    return (teng_hash64(key + i) >> 40) >= cut;
}

/* Inverted dropout of one element, forward (x) or backward (dy). */
TENG_HD float teng_dropout_elem(float x, int keep, float p)
{
    return keep ? x * (1.0f / (1.0f - p)) : 0.0f;
}

/* One row of teng_host_xent: softmax cross-entropy of k logits z against
 * label with smoothing s; returns the row's loss and, if dz is not NULL,
 * writes (softmax - target) / norm. */
TENG_HD double teng_xent_row(const float *z, int k, int32_t label, float s,
                             float norm, float *dz)
{
    float off = s / (float)k, on = 1.0f - s + off;
    float zmax = z[0];
    for (int j = 1; j < k; j++)
        zmax = z[j] > zmax ? z[j] : zmax;
    double sum = 0.0;
    for (int j = 0; j < k; j++)
        sum += exp((double)(z[j] - zmax));
    double lse = log(sum) + zmax, loss = 0.0;
    /* loss = -sum_j target_j * log softmax_j */
    for (int j = 0; j < k; j++) {
        float t = j == label ? on : off;
        if (t != 0.0f)
            loss -= t * ((double)z[j] - lse);
    }
    if (dz)
        for (int j = 0; j < k; j++) {
            float t = j == label ? on : off;
            dz[j] = (float)((exp((double)z[j] - lse) - t) / norm);
        }
    return loss;
}

#endif
