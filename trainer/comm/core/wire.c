/* core/wire.c: conversion between fp32 (what we accumulate in) and the wire
 * formats fp16 / bf16, plus the scale and inf/nan scan that run over every
 * reduced buffer. These loops touch every byte of every gradient, so each
 * has an AVX-512 and an F16C/AVX2 version; a scalar one keeps the library
 * portable and serves as the reference in the tests. The variant is picked
 * once from cpuid; TCOMM_SIMD=scalar|f16c|avx512 forces one (tests, A/B). */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm/core/wire.h"
#include "trainer/comm/core/wire_isa.h"
#include "trainer/comm/core/wire_math.h"

/* ---------------------------------------------------------- scalar */

/* The scalar conversions are core/wire_math.h's, which the NCCL
 * transport's kernels run too. */
uint16_t tc_half_from_float(float f)
{
    return tc_wm_half(f);
}

float tc_float_from_half(uint16_t h)
{
    return tc_wm_from_half(h);
}

uint16_t tc_bf16_from_float(float f)
{
    return tc_wm_bf16(f);
}

static void _enc_scalar(tcomm_wire w, const float *s, void *d, size_t n)
{
    uint16_t *o = d;
    if (w == TCOMM_WIRE_FP16)
        for (size_t i = 0; i < n; i++)
            o[i] = tc_half_from_float(s[i]);
    else
        for (size_t i = 0; i < n; i++)
            o[i] = tc_bf16_from_float(s[i]);
}

static void _dec_scalar(tcomm_wire w, const void *s, float *d, size_t n,
                        int add)
{
    const uint16_t *in = s;
    for (size_t i = 0; i < n; i++) {
        float v = w == TCOMM_WIRE_FP16 ? tc_float_from_half(in[i])
                                       : tc_wm_from_bf16(in[i]);
        d[i] = add ? d[i] + v : v;
    }
}

/* ---------------------------------------------------------- F16C / AVX2 */

__attribute__((target("avx2,f16c"))) static void
_enc_f16c(tcomm_wire w, const float *s, void *d, size_t n)
{
    uint16_t *o = d;
    size_t i = 0;
    if (w == TCOMM_WIRE_FP16) {
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(o + i),
                             _mm256_cvtps_ph(_mm256_loadu_ps(s + i),
                                             _MM_FROUND_TO_NEAREST_INT));
    } else {
        const __m256i bias = _mm256_set1_epi32(0x7fff),
                      one = _mm256_set1_epi32(1);
        for (; i + 8 <= n; i += 8) {
            __m256 x = _mm256_loadu_ps(s + i);
            __m256i u = _mm256_castps_si256(x);
            __m256i r = _mm256_add_epi32(
                u, _mm256_add_epi32(
                       bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
            __m256i nan =
                _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
            __m256i q = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
            r = _mm256_srli_epi32(_mm256_blendv_epi8(r, q, nan), 16);
            /* pack 8 x u32 (< 65536) into 8 x u16 */
            __m128i lo = _mm256_castsi256_si128(r),
                    hi = _mm256_extracti128_si256(r, 1);
            _mm_storeu_si128((__m128i *)(o + i), _mm_packus_epi32(lo, hi));
        }
    }
    _enc_scalar(w, s + i, o + i, n - i);
}

__attribute__((target("avx2,f16c"))) static void
_dec_f16c(tcomm_wire w, const void *src, float *d, size_t n, int add)
{
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(s + i));
        __m256 v = w == TCOMM_WIRE_FP16 ? _mm256_cvtph_ps(h)
                                        : _mm256_castsi256_ps(_mm256_slli_epi32(
                                              _mm256_cvtepu16_epi32(h), 16));
        if (add)
            v = _mm256_add_ps(v, _mm256_loadu_ps(d + i));
        _mm256_storeu_ps(d + i, v);
    }
    _dec_scalar(w, s + i, d + i, n - i, add);
}

/* ---------------------------------------------------------- AVX-512 */

__attribute__((target("avx512f,avx512bw"))) static void
_enc_avx512(tcomm_wire w, const float *s, void *d, size_t n)
{
    uint16_t *o = d;
    size_t i = 0;
    if (w == TCOMM_WIRE_FP16) {
        for (; i + 16 <= n; i += 16)
            _mm256_storeu_si256((__m256i *)(o + i),
                                _mm512_cvtps_ph(_mm512_loadu_ps(s + i),
                                                _MM_FROUND_TO_NEAREST_INT));
    } else {
        const __m512i bias = _mm512_set1_epi32(0x7fff),
                      one = _mm512_set1_epi32(1);
        for (; i + 16 <= n; i += 16) {
            __m512 x = _mm512_loadu_ps(s + i);
            __m512i u = _mm512_castps_si512(x);
            __m512i r = _mm512_add_epi32(
                u, _mm512_add_epi32(
                       bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
            __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
            r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
            _mm256_storeu_si256(
                (__m256i *)(o + i),
                _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
        }
    }
    _enc_scalar(w, s + i, o + i, n - i);
}

__attribute__((target("avx512f,avx512bw"))) static void
_dec_avx512(tcomm_wire w, const void *src, float *d, size_t n, int add)
{
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(s + i));
        __m512 v = w == TCOMM_WIRE_FP16 ? _mm512_cvtph_ps(h)
                                        : _mm512_castsi512_ps(_mm512_slli_epi32(
                                              _mm512_cvtepu16_epi32(h), 16));
        if (add)
            v = _mm512_add_ps(v, _mm512_loadu_ps(d + i));
        _mm512_storeu_ps(d + i, v);
    }
    _dec_scalar(w, s + i, d + i, n - i, add);
}

/* ---------------------------------------------------------- dispatch */

static int _isa = -1;

static int _best_isa(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        return TC_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
        return TC_ISA_F16C;
    return TC_ISA_SCALAR;
}

int tc_wire_isa(void)
{
    if (_isa < 0) {
        const char *f = getenv("TCOMM_SIMD");
        int best = _best_isa(), want = best;
        if (f && strcmp(f, "scalar") == 0)
            want = TC_ISA_SCALAR;
        else if (f && strcmp(f, "f16c") == 0)
            want = TC_ISA_F16C;
        _isa = want <= best ? want : best;
    }
    return _isa;
}

int tc_wire_set_isa(int isa)
{
    if (isa < TC_ISA_SCALAR || isa > _best_isa())
        return -1;
    _isa = isa;
    return 0;
}

void tc_encode(tcomm_wire w, const float *src, void *dst, size_t n)
{
    if (w == TCOMM_WIRE_FP32) {
        if (dst != src)
            memcpy(dst, src, n * 4);
        return;
    }
    switch (tc_wire_isa()) {
    case TC_ISA_AVX512:
        _enc_avx512(w, src, dst, n);
        break;
    case TC_ISA_F16C:
        _enc_f16c(w, src, dst, n);
        break;
    default:
        _enc_scalar(w, src, dst, n);
    }
}

/* Blocks of this many values stay in the L1/L2 cache between the two
 * halves of a fused pass (count then cast); a scaled cast goes through a
 * stack buffer of _SCALED values. */
enum { _BLOCK = 4096, _SCALED = 1024 };

void tc_encode_scaled(tcomm_wire w, const float *src, void *dst, size_t n,
                      float s)
{
    if (s == 1.0f) {
        tc_encode(w, src, dst, n);
        return;
    }
    float tmp[_SCALED]; /* 4 KiB on the stack: the 16-bit casts go via it */
    size_t wb = tcomm_wire_bytes(w);
    for (size_t k = 0; k < n; k += _SCALED) {
        size_t m = n - k < _SCALED ? n - k : _SCALED;
        float *d = w == TCOMM_WIRE_FP32 ? (float *)dst + k : tmp;
        for (size_t i = 0; i < m; i++) /* vectorised (local.mk's flags) */
            d[i] = src[k + i] * s;
        if (w != TCOMM_WIRE_FP32)
            tc_encode(w, tmp, (unsigned char *)dst + k * wb, m);
    }
}

size_t tc_encode_count(tcomm_wire w, const float *src, void *dst, size_t n)
{
    size_t bad = 0, wb = tcomm_wire_bytes(w);
    for (size_t k = 0; k < n; k += _BLOCK) {
        size_t m = n - k < _BLOCK ? n - k : _BLOCK;
        bad += tc_count_nonfinite(src + k, m);
        tc_encode(w, src + k, (unsigned char *)dst + k * wb, m);
    }
    return bad;
}

static void _decode(tcomm_wire w, const void *src, float *dst, size_t n,
                    int add)
{
    if (w == TCOMM_WIRE_FP32) {
        const float *s = src;
        if (add)
            for (size_t i = 0; i < n; i++) /* vectorised (local.mk's flags) */
                dst[i] += s[i];
        else if ((const void *)dst != src)
            memcpy(dst, src, n * 4);
        return;
    }
    switch (tc_wire_isa()) {
    case TC_ISA_AVX512:
        _dec_avx512(w, src, dst, n, add);
        break;
    case TC_ISA_F16C:
        _dec_f16c(w, src, dst, n, add);
        break;
    default:
        _dec_scalar(w, src, dst, n, add);
    }
}

void tc_decode(tcomm_wire w, const void *src, float *dst, size_t n)
{
    _decode(w, src, dst, n, 0);
}

void tc_decode_add(tcomm_wire w, const void *src, float *acc, size_t n)
{
    _decode(w, src, acc, n, 1);
}

size_t tc_decode_count(tcomm_wire w, const void *src, float *dst, size_t n)
{
    /* Count on the wire values (inf/nan stays inf/nan when widened) one
     * cache-sized block before decoding it, so the data is read from
     * memory once. */
    size_t bad = 0, wb = tcomm_wire_bytes(w);
    for (size_t k = 0; k < n; k += _BLOCK) {
        size_t m = n - k < _BLOCK ? n - k : _BLOCK;
        const unsigned char *b = (const unsigned char *)src + k * wb;
        if (w == TCOMM_WIRE_FP32) {
            bad += tc_count_nonfinite((const float *)b, m);
        } else {
            const uint16_t *h = (const uint16_t *)b;
            uint16_t e = w == TCOMM_WIRE_FP16 ? 0x7c00 : 0x7f80;
            for (size_t i = 0; i < m; i++) /* vectorised (local.mk's flags) */
                bad += (h[i] & e) == e;
        }
        tc_decode(w, b, dst + k, m);
    }
    return bad;
}

void tc_round_to_wire(tcomm_wire w, float *x, size_t n, void *tmp)
{
    if (w == TCOMM_WIRE_FP32)
        return;
    tc_encode(w, x, tmp, n);
    tc_decode(w, tmp, x, n);
}

void tc_scale(float *x, size_t n, float s)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

size_t tc_count_nonfinite(const float *x, size_t n)
{
    /* Exponent all ones = inf or nan. Integer compare so -ffast-math
     * elsewhere cannot optimise the test away. */
    size_t bad = 0;
    const uint32_t *u = (const uint32_t *)x;
    for (size_t i = 0; i < n; i++)
        bad += (u[i] & 0x7f800000u) == 0x7f800000u;
    return bad;
}
