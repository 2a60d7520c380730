/* resize.c: separable antialiased resampling of 8-bit interleaved images.
 * A triangle filter whose support widens with the downscale factor, as in
 * PIL's BILINEAR: downscaling averages every source pixel under the
 * output pixel instead of aliasing. The horizontal pass runs only over the
 * source rows that the vertical pass needs, so a crop costs its own area. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/tdata_internal.h"

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
static int _taps(double b0, double b1, int in, int out, int *first,
                 float *w, int kmax_cap)
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
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        if (hi - lo > kmax) hi = lo + kmax;
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
            if (lo < 0) lo = 0;
            if (lo >= in) lo = in - 1;
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
            if (shift > lo) shift = lo;
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

void tdata_resize(const uint8_t *src, int sw, int sh, int stride, int c,
                  double bx0, double by0, double bx1, double by1,
                  uint8_t *dst, int dw, int dh, tdata_scratch *s)
{
    int kxcap = (int)ceil((bx1 - bx0) / dw > 1 ? (bx1 - bx0) / dw : 1) * 2 + 1;
    int kycap = (int)ceil((by1 - by0) / dh > 1 ? (by1 - by0) / dh : 1) * 2 + 1;
    if (kxcap > sw) kxcap = sw;
    if (kycap > sh) kycap = sh;
    size_t need = (size_t)dw * (sizeof(int) + sizeof(float) * kxcap) +
                  (size_t)dh * (sizeof(int) + sizeof(float) * kycap);
    /* Horizontal result for the rows the vertical pass reads. */
    size_t rows_max = (size_t)sh;
    need += (rows_max + 1) * (size_t)dw * c * sizeof(float) + 64;
    char *m = tdata_scratch_get(s, need);
    float *wx = (float *)m;
    float *wy = wx + (size_t)dw * kxcap;
    int *fx = (int *)(wy + (size_t)dh * kycap);
    int *fy = fx + dw;
    float *tmp = (float *)(fy + dh);
    int kx = _taps(bx0, bx1, sw, dw, fx, wx, kxcap);
    int ky = _taps(by0, by1, sh, dh, fy, wy, kycap);
    int r0 = fy[0], r1 = fy[dh - 1] + ky;
    if (r1 > sh) r1 = sh;
    size_t trow = (size_t)dw * c;
    for (int r = r0; r < r1; r++) {
        const uint8_t *in = src + (size_t)r * stride;
        float *o = tmp + (size_t)(r - r0) * trow;
        for (int x = 0; x < dw; x++) {
            const uint8_t *p = in + (size_t)fx[x] * c;
            const float *w = wx + (size_t)x * kx;
            if (c == 3) {
                float a = 0, b = 0, d = 0;
                for (int k = 0; k < kx; k++, p += 3) {
                    a += w[k] * p[0];
                    b += w[k] * p[1];
                    d += w[k] * p[2];
                }
                o[0] = a; o[1] = b; o[2] = d;
                o += 3;
            } else {
                for (int ch = 0; ch < c; ch++) {
                    float a = 0;
                    for (int k = 0; k < kx; k++)
                        a += w[k] * p[(size_t)k * c + ch];
                    *o++ = a;
                }
            }
        }
    }
    /* Vertical pass row by row: each tap adds a whole contiguous row, which
     * the compiler vectorises. */
    float *acc = tmp + (size_t)(r1 - r0) * trow;
    for (int y = 0; y < dh; y++) {
        const float *w = wy + (size_t)y * ky;
        const float *base = tmp + (size_t)(fy[y] - r0) * trow;
        uint8_t *o = dst + (size_t)y * trow;
        int kk = ky;
        if (fy[y] + kk > r1)
            kk = r1 - fy[y];
        for (size_t i = 0; i < trow; i++)
            acc[i] = w[0] * base[i];
        for (int k = 1; k < kk; k++) {
            const float *row = base + (size_t)k * trow;
            float wk = w[k];
            for (size_t i = 0; i < trow; i++)
                acc[i] += wk * row[i];
        }
        for (size_t i = 0; i < trow; i++)
            o[i] = _clamp8(acc[i]);
    }
}
