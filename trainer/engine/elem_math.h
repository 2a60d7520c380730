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

/* The pieces of one cross-entropy row, shared by the row below and the
 * cuda backend's warp-per-row kernel (which forms zmax and the sum of
 * exponentials across a warp's lanes): element j's target with label
 * smoothing s over k classes, its term of the exponential sum, its term
 * of the loss and its gradient (softmax - target) / norm, given lse, the
 * log of the sum plus zmax. */
TENG_HD float teng_xent_target(int j, int32_t label, float s, int k)
{
    float off = s / (float)k, on = 1.0f - s + off;
    return j == label ? on : off;
}

TENG_HD double teng_xent_exp(float zj, float zmax)
{
    return exp((double)(zj - zmax));
}

TENG_HD double teng_xent_loss_term(float zj, double lse, float t)
{
    return t != 0.0f ? t * ((double)zj - lse) : 0.0;
}

TENG_HD float teng_xent_grad(float zj, double lse, float t, float norm)
{
    return (float)((exp((double)zj - lse) - t) / norm);
}

/* Lane `lane` of `lanes` sharing one row (the cuda backend's warp per
 * row; the host's row is lane 0 of 1): the maximum of its classes j =
 * lane, lane + lanes, ... starting from z[0] (so a nan there stays, as in
 * the host's loop), its part of the sum of exponentials, and its part of
 * the loss. */
TENG_HD float teng_xent_lane_max(const float *z, int k, int lane, int lanes)
{
    float zmax = z[0];
    for (int j = lane; j < k; j += lanes)
        zmax = z[j] > zmax ? z[j] : zmax;
    return zmax;
}

TENG_HD double teng_xent_lane_sum(const float *z, int k, float zmax, int lane,
                                  int lanes)
{
    double sum = 0.0;
    for (int j = lane; j < k; j += lanes)
        sum += teng_xent_exp(z[j], zmax);
    return sum;
}

TENG_HD double teng_xent_lane_loss(const float *z, int k, int32_t label,
                                   float s, double lse, int lane, int lanes)
{
    double loss = 0.0;
    /* loss = -sum_j target_j * log softmax_j */
    for (int j = lane; j < k; j += lanes)
        loss -= teng_xent_loss_term(z[j], lse, teng_xent_target(j, label, s, k));
    return loss;
}

/* One row of teng_host_xent: softmax cross-entropy of k logits z against
 * label with smoothing s; returns the row's loss and, if dz is not NULL,
 * writes (softmax - target) / norm. */
TENG_HD double teng_xent_row(const float *z, int k, int32_t label, float s,
                             float norm, float *dz)
{
    float zmax = teng_xent_lane_max(z, k, 0, 1);
    double lse = log(teng_xent_lane_sum(z, k, zmax, 0, 1)) + zmax;
    double loss = teng_xent_lane_loss(z, k, label, s, lse, 0, 1);
    if (dz)
        for (int j = 0; j < k; j++)
            dz[j] = teng_xent_grad(z[j], lse, teng_xent_target(j, label, s, k),
                                   norm);
    return loss;
}

#endif
