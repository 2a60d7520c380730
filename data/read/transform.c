/* read/transform.c: the sample transforms of the pipeline.
 *   - RandomResizedCrop(scale, ratio) exactly as torchvision draws it;
 *   - eval resize-shorter + centre crop, expressed as a crop box of the
 *     original so that it too can be ROI-decoded;
 *   - the DCT scale that still leaves the crop at least output-sized;
 *   - the final flip / normalise / layout / dtype write into the batch. */
#include <math.h>
#include <string.h>

#include "data/read/read.h"
#include "data/read/tdata_norm.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

void tdata_rrc(tdata_rng *r, int W, int H, double smin, double smax,
               double rmin, double rmax, tdata_crop *c)
{
    double area = (double)W * H;
    double lr0 = log(rmin), lr1 = log(rmax);
    for (int t = 0; t < 10; t++) {
        double ta = area * (smin + (smax - smin) * tdata_rng_uniform(r));
        double ar = exp(lr0 + (lr1 - lr0) * tdata_rng_uniform(r));
        int w = (int)lround(sqrt(ta * ar));
        int h = (int)lround(sqrt(ta / ar));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            c->x = (double)(tdata_rng_next(r) % (uint64_t)(W - w + 1));
            c->y = (double)(tdata_rng_next(r) % (uint64_t)(H - h + 1));
            c->w = w;
            c->h = h;
            return;
        }
    }
    /* Fallback: the largest centred crop within the ratio range. */
    double in = (double)W / H;
    double w = W, h = H;
    if (in < rmin)
        h = lround(w / rmin);
    else if (in > rmax)
        w = lround(h * rmax);
    c->w = w;
    c->h = h;
    c->x = floor((W - w) / 2);
    c->y = floor((H - h) / 2);
}

void tdata_center_crop(int W, int H, int resize, int out_w, int out_h,
                       tdata_crop *c)
{
    /* resize(shorter -> resize) then centre-crop out: the crop's size in
     * source pixels is out / (resize / shorter). */
    double s = (double)resize / (W < H ? W : H);
    double cw = out_w / s, ch = out_h / s;
    if (cw > W)
        cw = W;
    if (ch > H)
        ch = H;
    c->w = cw;
    c->h = ch;
    c->x = (W - cw) / 2;
    c->y = (H - ch) / 2;
    c->flip = 0;
}

int tdata_dct_scale(int cw, int ch, int out_w, int out_h)
{
    /* libjpeg-turbo scales by n/8; pick the smallest n that keeps the
     * decoded crop at least as large as the output, so the final resize
     * still only shrinks (no quality loss from upsampling). Only 1/8, 2/8,
     * 4/8 and 8/8 have SIMD IDCTs: 3/8..7/8 use plain C IDCTs (and
     * IDCT-scaled chroma) and measure slower than a full-size decode. */
    for (int n = 1; n < 8; n *= 2)
        if ((long)cw * n >= (long)out_w * 8 && (long)ch * n >= (long)out_h * 8)
            return n;
    return 8;
}

size_t tdata_dtype_size(int dtype)
{
    return dtype == TDATA_F32 ? 4 : dtype == TDATA_F16 ? 2 : 1;
}

uint16_t tdata_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ex = (x >> 23) & 0xff;
    uint32_t man = x & 0x7fffff;
    if (ex == 0xff) /* inf / nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int e = (int)ex - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* subnormal or zero */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t h = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* may carry into the exponent: still correct */
    return (uint16_t)(sign | h);
}

float tdata_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0) {
        if (m == 0)
            x = sign;
        else { /* subnormal: normalise */
            e = 127 - 15 + 1;
            while (!(m & 0x400)) {
                m <<= 1;
                e--;
            }
            x = sign | (e << 23) | ((m & 0x3ff) << 13);
        }
    } else if (e == 31)
        x = sign | 0x7f800000 | (m << 13);
    else
        x = sign | ((e + 127 - 15) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

#if defined(__x86_64__)
__attribute__((target("f16c,avx"))) static void
_f16_row_hw(const float *in, uint16_t *out, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + i), 0));
    for (; i < n; i++)
        out[i] = tdata_f32_to_f16(in[i]);
}

static int _have_f16c(void)
{
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        unsigned a, b, c, d;
        v = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && (c & bit_AVX);
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

static void _f16_row(const float *in, uint16_t *out, int n)
{
#if defined(__x86_64__)
    if (_have_f16c()) {
        _f16_row_hw(in, out, n);
        return;
    }
#endif
    for (int i = 0; i < n; i++)
        out[i] = tdata_f32_to_f16(in[i]);
}

/* One output conversion: the per-channel table and where rows go. */
typedef struct _emit {
    float lut[3][256];   /* x * scale + bias for every byte and channel */
    float row[4096 * 4]; /* f16 staging row */
    int w, c, flip, dtype;
    size_t plane; /* values per NCHW plane */
    void *dst;
} _emit;

/* NHWC row y: channels stay interleaved. */
static void _row_nhwc(_emit *e, const uint8_t *in, int y)
{
    int w = e->w, c = e->c;
    size_t base = (size_t)y * w * c;
    if (e->dtype == TDATA_U8) {
        uint8_t *o = (uint8_t *)e->dst + base;
        for (int x = 0; x < w; x++) {
            const uint8_t *p = in + (size_t)(e->flip ? w - 1 - x : x) * c;
            for (int ch = 0; ch < c; ch++)
                o[(size_t)x * c + ch] = p[ch];
        }
        return;
    }
    float *o = e->dtype == TDATA_F32 ? (float *)e->dst + base : e->row;
    for (int x = 0; x < w; x++) {
        const uint8_t *p = in + (size_t)(e->flip ? w - 1 - x : x) * c;
        for (int ch = 0; ch < c; ch++)
            o[(size_t)x * c + ch] = e->lut[ch][p[ch]];
    }
    if (e->dtype == TDATA_F16)
        _f16_row(e->row, (uint16_t *)e->dst + base, w * c);
}

/* NCHW row y of RGB to float: one pass over the interleaved row feeds all
 * three planes. */
static void _row_nchw3(_emit *e, const uint8_t *in, int y)
{
    int w = e->w;
    size_t base = (size_t)y * w, plane = e->plane;
    float *o0, *o1, *o2;
    if (e->dtype == TDATA_F32) {
        o0 = (float *)e->dst + base;
        o1 = o0 + plane;
        o2 = o1 + plane;
    } else {
        o0 = e->row;
        o1 = e->row + w;
        o2 = e->row + 2 * w;
    }
    const int step = e->flip ? -3 : 3;
    const uint8_t *p = in + (e->flip ? (size_t)(w - 1) * 3 : 0);
    for (int x = 0; x < w; x++, p += step) {
        o0[x] = e->lut[0][p[0]];
        o1[x] = e->lut[1][p[1]];
        o2[x] = e->lut[2][p[2]];
    }
    if (e->dtype == TDATA_F16)
        for (int ch = 0; ch < 3; ch++)
            _f16_row(e->row + (size_t)ch * w,
                     (uint16_t *)e->dst + (size_t)ch * plane + base, w);
}

/* NCHW row y, one plane at a time (gray, or u8 output). */
static void _row_planes(_emit *e, const uint8_t *in, int y)
{
    int w = e->w, c = e->c;
    for (int ch = 0; ch < c; ch++) {
        size_t base = (size_t)ch * e->plane + (size_t)y * w;
        if (e->dtype == TDATA_U8) {
            uint8_t *o = (uint8_t *)e->dst + base;
            for (int x = 0; x < w; x++)
                o[x] = in[(size_t)(e->flip ? w - 1 - x : x) * c + ch];
            continue;
        }
        float *o = e->dtype == TDATA_F32 ? (float *)e->dst + base : e->row;
        for (int x = 0; x < w; x++)
            o[x] = e->lut[ch][in[(size_t)(e->flip ? w - 1 - x : x) * c + ch]];
        if (e->dtype == TDATA_F16)
            _f16_row(e->row, (uint16_t *)e->dst + base, w);
    }
}

void tdata_emit(const uint8_t *src, int w, int h, int c, int flip, int order,
                int dtype, const float *scale, const float *bias, void *dst)
{
    _emit e;
    e.w = w;
    e.c = c;
    e.flip = flip;
    e.dtype = dtype;
    e.plane = (size_t)w * h;
    e.dst = dst;
    /* One table load per output value instead of a conversion and a
     * multiply-add. */
    for (int ch = 0; ch < c && ch < 3; ch++)
        for (int v = 0; v < 256; v++)
            e.lut[ch][v] = tdata_norm_px((unsigned)v, scale[ch], bias[ch]);
    for (int y = 0; y < h; y++) {
        const uint8_t *in = src + (size_t)y * w * c;
        if (order == TDATA_NHWC)
            _row_nhwc(&e, in, y);
        else if (c == 3 && dtype != TDATA_U8)
            _row_nchw3(&e, in, y);
        else
            _row_planes(&e, in, y);
    }
}
