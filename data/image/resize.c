/* image/resize.c: separable antialiased resampling of 8-bit interleaved images.
 * A triangle filter whose support widens with the downscale factor, as in
 * PIL's BILINEAR: downscaling averages every source pixel under the
 * output pixel instead of aliasing. The horizontal pass runs only over the
 * source rows that the vertical pass needs, so a crop costs its own area. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/image/image.h"

void *tdata_scratch_get(tdata_scratch *s, size_t bytes)
{
    if (s->cap < bytes) {
        free(s->p);
        s->cap = bytes + bytes / 4;
        s->p = malloc(s->cap);
        if (!s->p)
            s->cap = 0;
    }
    return s->p;
}

void tdata_scratch_free(tdata_scratch *s)
{
    free(s->p);
    s->p = NULL;
    s->cap = 0;
}

/* Filter taps of every output coordinate along one axis: first source
 * index and kmax normalised weights (zero padded). Returns kmax. */
static int _taps(double b0, double b1, int in, int out, int *first, float *w,
                 int kmax_cap)
{
    double scale = (b1 - b0) / out;
    double fs = scale > 1.0 ? scale : 1.0; /* filter scale */
    double support = fs;                   /* triangle radius 1 * fs */
    int kmax = (int)ceil(support) * 2 + 1;
    if (kmax > kmax_cap)
        kmax = kmax_cap;
    for (int o = 0; o < out; o++) {
        double center = b0 + (o + 0.5) * scale;
        int lo = (int)floor(center - support + 0.5);
        int hi = (int)floor(center + support + 0.5);
        if (lo < 0)
            lo = 0;
        if (hi > in)
            hi = in;
        if (hi - lo > kmax)
            hi = lo + kmax;
        float *wo = w + (size_t)o * kmax;
        double sum = 0;
        int n = hi - lo;
        for (int k = 0; k < n; k++) {
            double t = (lo + k + 0.5 - center) / fs;
            double v = 1.0 - fabs(t);
            wo[k] = v > 0 ? (float)v : 0.0f;
            sum += wo[k];
        }
        for (int k = n; k < kmax; k++)
            wo[k] = 0;
        if (n <= 0 || sum <= 0) { /* box fell outside: nearest pixel */
            lo = (int)center;
            if (lo < 0)
                lo = 0;
            if (lo >= in)
                lo = in - 1;
            wo[0] = 1;
            sum = 1;
            for (int k = 1; k < kmax; k++)
                wo[k] = 0;
        }
        for (int k = 0; k < kmax; k++)
            wo[k] = (float)(wo[k] / sum);
        /* Keep every tap inside the source, shifting the window if needed. */
        if (lo + kmax > in) {
            int shift = lo + kmax - in;
            if (shift > lo)
                shift = lo;
            if (shift > 0) {
                memmove(wo + shift, wo, (size_t)(kmax - shift) * sizeof *wo);
                for (int k = 0; k < shift; k++)
                    wo[k] = 0;
                lo -= shift;
            }
        }
        first[o] = lo;
    }
    return kmax;
}

static inline uint8_t _clamp8(float v)
{
    int i = (int)(v + 0.5f);
    return (uint8_t)(i < 0 ? 0 : i > 255 ? 255 : i);
}

typedef float _v4 __attribute__((vector_size(16)));
typedef float _v8 __attribute__((vector_size(32)));
typedef int32_t _v8i __attribute__((vector_size(32)));

static size_t _align16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* The kernels are inlined into both compiled bodies (AVX2 and baseline) so
 * that each gets its own vector code. */
#define _ALWAYS_INLINE static inline __attribute__((always_inline))

/* Horizontal pass of one RGB row: widen the row to floats once, then each
 * output pixel is K multiply-adds of 4-float vectors (R, G, B and the next
 * pixel's R, ignored), all channels at once. K is a compile-time constant
 * in the common cases (3 and 5 taps) so the tap loop unrolls. The 4-float
 * loads run at most one float past the row, into f's own slack. */
_ALWAYS_INLINE void _hrow3(const uint8_t *in, int x0, int x1, float *f,
                           const int *fx, const float *wx, int kx, int dw,
                           float *o, const int K)
{
    /* Plain widening loop: the compiler vectorises it (pmovzx + cvt). */
    const uint8_t *p8 = in + (size_t)x0 * 3;
    int n = (x1 - x0) * 3;
    for (int i = 0; i < n; i++)
        f[i] = p8[i];
    f[n] = 0; /* lane 3 of the last pixel's load */
    for (int x = 0; x < dw; x++) {
        const float *p = f + (size_t)(fx[x] - x0) * 3;
        const float *w = wx + (size_t)x * kx;
        _v4 acc, v;
        memcpy(&acc, p, sizeof acc);
        acc *= w[0];
        for (int k = 1; k < (K ? K : kx); k++) {
            memcpy(&v, p + 3 * k, sizeof v);
            acc += v * w[k];
        }
        o[0] = acc[0];
        o[1] = acc[1];
        o[2] = acc[2];
        o += 3;
    }
}

/* The filter taps and the scratch parts of one resize. */
typedef struct _rplan {
    float *wx, *wy;  /* horizontal / vertical weights, kx / ky per output */
    int *fx, *fy;    /* first source column / row of each output */
    float *r4, *tmp; /* one padded source row; the horizontal pass output */
    int32_t *vi;     /* one output row before narrowing */
    int kx, ky;
    int r0, r1, x0, x1; /* source rows and columns any tap touches */
    size_t trow;        /* floats (and bytes) per output row */
} _rplan;

/* Returns 0, or -1 when the scratch memory cannot grow. */
_ALWAYS_INLINE int _plan(int sw, int sh, int c, double bx0, double by0,
                         double bx1, double by1, int dw, int dh,
                         tdata_scratch *s, _rplan *p)
{
    int kxcap = (int)ceil((bx1 - bx0) / dw > 1 ? (bx1 - bx0) / dw : 1) * 2 + 1;
    int kycap = (int)ceil((by1 - by0) / dh > 1 ? (by1 - by0) / dh : 1) * 2 + 1;
    if (kxcap > sw)
        kxcap = sw;
    if (kycap > sh)
        kycap = sh;
    /* Scratch layout, each part 16-byte aligned. */
    size_t o_wy = _align16((size_t)dw * kxcap * sizeof(float));
    size_t o_fx = o_wy + _align16((size_t)dh * kycap * sizeof(float));
    size_t o_fy = o_fx + _align16((size_t)dw * sizeof(int));
    size_t o_r4 = o_fy + _align16((size_t)dh * sizeof(int));
    size_t o_tmp = o_r4 + _align16((size_t)(sw + 2) * 3 * sizeof(float));
    p->trow = (size_t)dw * c;
    size_t need = o_tmp + ((size_t)sh + 2) * p->trow * sizeof(float) + 64;
    /* Parts at 16-byte aligned offsets of one block (uintptr_t arithmetic:
     * each part is only ever accessed as its own type). */
    uintptr_t m = (uintptr_t)tdata_scratch_get(s, need);
    if (!m)
        return -1;
    p->wx = (float *)m;
    p->wy = (float *)(m + o_wy);
    p->fx = (int *)(m + o_fx);
    p->fy = (int *)(m + o_fy);
    p->r4 = (float *)(m + o_r4);
    p->tmp = (float *)(m + o_tmp);
    p->vi = (int32_t *)(m + o_tmp + ((size_t)sh + 1) * p->trow * sizeof(float));
    p->kx = _taps(bx0, bx1, sw, dw, p->fx, p->wx, kxcap);
    p->ky = _taps(by0, by1, sh, dh, p->fy, p->wy, kycap);
    p->r0 = p->fy[0];
    p->r1 = p->fy[dh - 1] + p->ky;
    if (p->r1 > sh)
        p->r1 = sh;
    p->x0 = p->fx[0];
    p->x1 = p->fx[dw - 1] + p->kx;
    if (p->x1 > sw)
        p->x1 = sw;
    return 0;
}

/* Horizontal pass: source rows [r0, r1) into tmp as floats. */
_ALWAYS_INLINE void _hpass(const uint8_t *src, int stride, int c, int dw,
                           const _rplan *p)
{
    const float *wx = p->wx;
    const int *fx = p->fx;
    int kx = p->kx;
    for (int r = p->r0; r < p->r1; r++) {
        const uint8_t *in = src + (size_t)r * stride;
        float *o = p->tmp + (size_t)(r - p->r0) * p->trow;
        if (c == 3) {
            if (kx == 3)
                _hrow3(in, p->x0, p->x1, p->r4, fx, wx, kx, dw, o, 3);
            else if (kx == 5)
                _hrow3(in, p->x0, p->x1, p->r4, fx, wx, kx, dw, o, 5);
            else
                _hrow3(in, p->x0, p->x1, p->r4, fx, wx, kx, dw, o, 0);
            continue;
        }
        for (int x = 0; x < dw; x++) {
            const uint8_t *q = in + (size_t)fx[x] * c;
            const float *w = wx + (size_t)x * kx;
            for (int ch = 0; ch < c; ch++) {
                float a = 0;
                for (int k = 0; k < kx; k++)
                    a += w[k] * q[(size_t)k * c + ch];
                *o++ = a;
            }
        }
    }
}

/* Vertical pass: 8 outputs at a time, taps accumulated in registers, then
 * rounded, clamped and narrowed to bytes as vectors. */
_ALWAYS_INLINE void _vpass(uint8_t *dst, int dh, const _rplan *p)
{
    size_t trow = p->trow;
    int32_t *vi = p->vi;
    for (int y = 0; y < dh; y++) {
        const float *w = p->wy + (size_t)y * p->ky;
        const float *base = p->tmp + (size_t)(p->fy[y] - p->r0) * trow;
        uint8_t *o = dst + (size_t)y * trow;
        int kk = p->ky;
        if (p->fy[y] + kk > p->r1)
            kk = p->r1 - p->fy[y];
        size_t i = 0;
        for (; i + 8 <= trow; i += 8) {
            _v8 a;
            memcpy(&a, base + i, sizeof a);
            a *= w[0];
            for (int k = 1; k < kk; k++) {
                _v8 r;
                memcpy(&r, base + (size_t)k * trow + i, sizeof r);
                a += r * w[k];
            }
            _v8i v = __builtin_convertvector(a + 0.5f, _v8i);
            v &= v > 0; /* negative -> 0 */
            _v8i hi = v > 255;
            v = (v & ~hi) | (255 & hi); /* above 255 -> 255 */
            memcpy(vi + i, &v, sizeof v);
        }
        for (size_t j = 0; j < i; j++) /* vectorised narrowing */
            o[j] = (uint8_t)vi[j];
        for (; i < trow; i++) {
            float a = 0;
            for (int k = 0; k < kk; k++)
                a += w[k] * base[(size_t)k * trow + i];
            o[i] = _clamp8(a);
        }
    }
}

_ALWAYS_INLINE int _resize_body(const uint8_t *src, int sw, int sh, int stride,
                                int c, double bx0, double by0, double bx1,
                                double by1, uint8_t *dst, int dw, int dh,
                                tdata_scratch *s)
{
    _rplan p;
    if (_plan(sw, sh, c, bx0, by0, bx1, by1, dw, dh, s, &p))
        return TDATA_ENOMEM;
    _hpass(src, stride, c, dw, &p);
    _vpass(dst, dh, &p);
    return TDATA_OK;
}

/* One body, compiled twice: for AVX2 (8-float vectors in one instruction)
 * and for the baseline, chosen at run time. Plain dispatch rather than
 * target_clones/ifunc, which sanitizers and static links do not support.
 * No FMA, so both give bit-identical pixels. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static int
_resize_avx2(const uint8_t *src, int sw, int sh, int stride, int c, double bx0,
             double by0, double bx1, double by1, uint8_t *dst, int dw, int dh,
             tdata_scratch *s)
{
    return _resize_body(src, sw, sh, stride, c, bx0, by0, bx1, by1, dst, dw, dh,
                        s);
}
#endif

static int _resize_plain(const uint8_t *src, int sw, int sh, int stride, int c,
                         double bx0, double by0, double bx1, double by1,
                         uint8_t *dst, int dw, int dh, tdata_scratch *s)
{
    return _resize_body(src, sw, sh, stride, c, bx0, by0, bx1, by1, dst, dw, dh,
                        s);
}

int tdata_resize(const uint8_t *src, int sw, int sh, int stride, int c,
                 double bx0, double by0, double bx1, double by1, uint8_t *dst,
                 int dw, int dh, tdata_scratch *s)
{
#if defined(__x86_64__) && defined(__GNUC__)
    static int avx2 = -1;
    int v = __atomic_load_n(&avx2, __ATOMIC_RELAXED);
    if (v < 0) {
        v = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&avx2, v, __ATOMIC_RELAXED);
    }
    if (v)
        return _resize_avx2(src, sw, sh, stride, c, bx0, by0, bx1, by1, dst, dw,
                            dh, s);
#endif
    return _resize_plain(src, sw, sh, stride, c, bx0, by0, bx1, by1, dst, dw,
                         dh, s);
}
