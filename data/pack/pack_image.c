/* pack/pack_image.c: what torus-pack does to one input image.
 * Policy (docs/shard-format.md, "Validation"):
 *   - every image is decoded in full, in strict mode, so truncated or
 *     corrupt files are rejected with libjpeg's/libpng's reason;
 *   - JPEGs that decode cleanly are stored byte for byte (grayscale and
 *     progressive ones included: the reader handles both);
 *   - CMYK/YCCK JPEGs and PNGs (ImageNet has both, named .JPEG) are
 *     re-encoded as RGB JPEG at --quality, so readers only meet YCbCr/gray;
 *   - --resize-shorter=N re-encodes images whose shorter side exceeds N;
 *   - --decoded=HxW stores HxWx3 pixels (resize to cover, centre crop).
 * The per-channel pixel sums of what is stored feed the index's mean/std. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <turbojpeg.h>

#include "data/pack/pack.h"

struct tdata_pack_worker {
    const tdata_pack_opts *o;
    tdata_jdec *jd;
    tjhandle tj;
    tdata_image im;
    tdata_scratch sc;
    uint8_t *rs;
    size_t rscap;
};

tdata_pack_worker *tdata_pack_worker_new(const tdata_pack_opts *o)
{
    tdata_pack_worker *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->o = o;
    w->jd = tdata_jdec_new();
    w->tj = tjInitCompress();
    if (!w->jd || !w->tj) {
        tdata_pack_worker_free(w);
        return NULL;
    }
    return w;
}

void tdata_pack_worker_free(tdata_pack_worker *w)
{
    if (!w)
        return;
    tdata_jdec_free(w->jd);
    if (w->tj)
        tjDestroy(w->tj);
    tdata_image_free(&w->im);
    tdata_scratch_free(&w->sc);
    free(w->rs);
    free(w);
}

static void _stats(const uint8_t *px, int w, int h, int stride,
                   tdata_pack_out *out)
{
    uint64_t s[3] = {0, 0, 0}, q[3] = {0, 0, 0};
    for (int y = 0; y < h; y++) {
        const uint8_t *p = px + (size_t)y * stride;
        for (int x = 0; x < w; x++, p += 3) {
            s[0] += p[0];
            s[1] += p[1];
            s[2] += p[2];
            q[0] += (uint32_t)p[0] * p[0];
            q[1] += (uint32_t)p[1] * p[1];
            q[2] += (uint32_t)p[2] * p[2];
        }
    }
    for (int c = 0; c < 3; c++) {
        out->sum[c] = s[c] / 255.0;
        out->sumsq[c] = q[c] / (255.0 * 255.0);
    }
    out->count = (double)w * h;
}

static uint8_t *_rs(tdata_pack_worker *w, size_t n)
{
    if (w->rscap < n) {
        free(w->rs);
        w->rs = malloc(n);
        w->rscap = w->rs ? n : 0;
    }
    return w->rs;
}

static int _encode(tdata_pack_worker *w, const uint8_t *px, int iw, int ih,
                   int stride, tdata_pack_out *out)
{
    unsigned char *jb = NULL;
    unsigned long js = 0;
    if (tjCompress2(w->tj, px, iw, stride, ih, TJPF_RGB, &jb, &js, TJSAMP_420,
                    w->o->quality, TJFLAG_ACCURATEDCT) != 0) {
        snprintf(out->why, sizeof out->why, "JPEG re-encode failed: %s",
                 tjGetErrorStr2(w->tj));
        tjFree(jb);
        return TDATA_EDECODE;
    }
    out->data = malloc(js);
    if (out->data) {
        memcpy(out->data, jb, js);
        out->len = js;
    } else {
        snprintf(out->why, sizeof out->why, "no memory for %lu bytes", js);
    }
    tjFree(jb);
    return out->data ? TDATA_OK : TDATA_ENOMEM;
}

/* The scale at which a W x H image covers w x h (resize to cover). */
static double _cover(int w, int h, int W, int H)
{
    double sx = (double)w / W, sy = (double)h / H;
    return sx > sy ? sx : sy;
}

/* Strict full decode of a JPEG into w->im, at the smallest DCT scale that
 * still covers the stored size: validation reads every byte of entropy
 * data either way. *cmyk says it must be re-encoded. */
static int _decode_jpeg(tdata_pack_worker *w, const uint8_t *buf, size_t len,
                        int *cmyk, tdata_pack_out *out)
{
    const tdata_pack_opts *o = w->o;
    int W, H, cs, prog;
    if (len < 3 || buf[0] != 0xFF || buf[1] != 0xD8) {
        snprintf(out->why, sizeof out->why, "neither a JPEG nor a PNG file");
        return TDATA_EDECODE;
    }
    if (tdata_jpeg_header(w->jd, buf, len, &W, &H, &cs, &prog)) {
        snprintf(out->why, sizeof out->why, "%s", tdata_jdec_msg(w->jd));
        return TDATA_EDECODE;
    }
    *cmyk = cs == JCS_CMYK || cs == JCS_YCCK;
    int n = 8, sh = W < H ? W : H;
    if (o->dec_h > 0) {
        double s = _cover(o->dec_w, o->dec_h, W, H);
        for (n = 1; n < 8 && n < s * 8; n++)
            ;
    } else if (o->resize_shorter > 0 && sh > o->resize_shorter) {
        for (n = 1; n < 8 && (long)sh * n < 8L * o->resize_shorter; n++)
            ;
    }
    if (tdata_jpeg_decode_region(w->jd, buf, len, 0, 0, W, H, n,
                                 TDATA_DEC_STRICT, &w->im)) {
        snprintf(out->why, sizeof out->why, "%s", tdata_jdec_msg(w->jd));
        return TDATA_EDECODE;
    }
    return TDATA_OK;
}

/* --decoded=HxW: resize to cover, centre crop, store the pixels. */
static int _store_dense(tdata_pack_worker *w, tdata_pack_out *out)
{
    const tdata_pack_opts *o = w->o;
    const tdata_image *im = &w->im;
    int iw = im->w, ih = im->h;
    double s = _cover(o->dec_w, o->dec_h, iw, ih);
    double bw = o->dec_w / s, bh = o->dec_h / s;
    size_t n = (size_t)o->dec_h * o->dec_w * 3;
    out->data = malloc(n);
    out->len = n;
    if (!out->data || tdata_resize(im->px, iw, ih, im->stride, 3, (iw - bw) / 2,
                                   (ih - bh) / 2, (iw + bw) / 2, (ih + bh) / 2,
                                   out->data, o->dec_w, o->dec_h, &w->sc)) {
        free(out->data);
        out->data = NULL;
        out->len = 0;
        snprintf(out->why, sizeof out->why, "no memory to resample");
        return TDATA_ENOMEM;
    }
    _stats(out->data, o->dec_w, o->dec_h, o->dec_w * 3, out);
    return TDATA_OK;
}

/* --resize-shorter=N of an image whose shorter side exceeds N: resample
 * and re-encode. */
static int _store_resized(tdata_pack_worker *w, tdata_pack_out *out)
{
    const tdata_image *im = &w->im;
    int iw = im->w, ih = im->h, N = w->o->resize_shorter;
    int tw = iw <= ih ? N : (int)((double)iw * N / ih + 0.5);
    int th = ih < iw ? N : (int)((double)ih * N / iw + 0.5);
    uint8_t *px = _rs(w, (size_t)tw * th * 3);
    if (!px || tdata_resize(im->px, iw, ih, im->stride, 3, 0, 0, iw, ih, px, tw,
                            th, &w->sc)) {
        snprintf(out->why, sizeof out->why, "no memory to resample");
        return TDATA_ENOMEM;
    }
    _stats(px, tw, th, tw * 3, out);
    return _encode(w, px, tw, th, tw * 3, out);
}

int tdata_pack_image(tdata_pack_worker *w, const uint8_t *buf, size_t len,
                     tdata_pack_out *out)
{
    const tdata_pack_opts *o = w->o;
    memset(out, 0, sizeof *out);
    tdata_image *im = &w->im;
    int reencode = 0;
    if (tdata_is_png(buf, len)) {
        if (tdata_png_decode(buf, len, im, out->why, sizeof out->why))
            return TDATA_EDECODE;
        reencode = 1;
    } else if (_decode_jpeg(w, buf, len, &reencode, out)) {
        return TDATA_EDECODE;
    }
    out->reencoded = reencode;
    if (o->dec_h > 0)
        return _store_dense(w, out);
    int sh = im->w < im->h ? im->w : im->h;
    if (o->resize_shorter > 0 && sh > o->resize_shorter)
        return _store_resized(w, out);
    _stats(im->px, im->w, im->h, im->stride, out);
    if (reencode)
        return _encode(w, im->px, im->w, im->h, im->stride, out);
    out->data = malloc(len);
    if (!out->data) {
        snprintf(out->why, sizeof out->why, "no memory for %zu bytes", len);
        return TDATA_ENOMEM;
    }
    memcpy(out->data, buf, len);
    out->len = len;
    return TDATA_OK;
}
