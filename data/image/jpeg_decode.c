/* image/jpeg_decode.c: JPEG decoding through libjpeg-turbo's libjpeg API.
 * The TurboJPEG API (2.1) cannot decode a region, so the decode pool uses
 * the lower-level API for three savings DALI also makes:
 *   - reduced DCT scaling (scale_num/8), when the crop is much larger than
 *     the output it is resized to;
 *   - jpeg_crop_scanline, so only the crop's iMCU columns are decoded;
 *   - jpeg_skip_scanlines above the crop, and stopping below it.
 * libjpeg reports truncation ("Premature end of JPEG file") and corrupt
 * entropy data only as warnings through emit_message; the packer's strict
 * mode turns those into errors so that no damaged image is packed. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "data/image/image.h"

struct tdata_jdec {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    jmp_buf jb;
    int strict;
    int warnings;
    char msg[JMSG_LENGTH_MAX + 32];
    uint8_t *row; /* CMYK scanline scratch */
    size_t rowcap;
};

static void _error_exit(j_common_ptr c)
{
    tdata_jdec *d = (tdata_jdec *)c->client_data;
    (*c->err->format_message)(c, d->msg);
    longjmp(d->jb, 1);
}

static void _emit_message(j_common_ptr c, int level)
{
    tdata_jdec *d = (tdata_jdec *)c->client_data;
    if (level >= 0)
        return; /* trace messages */
    d->warnings++;
    if (d->warnings == 1 || d->strict)
        (*c->err->format_message)(c, d->msg);
    /* Warning in strict mode: the image is damaged, stop here. */
    if (d->strict)
        longjmp(d->jb, 1);
}

tdata_jdec *tdata_jdec_new(void)
{
    tdata_jdec *volatile d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->cinfo.err = jpeg_std_error(&d->jerr);
    d->jerr.error_exit = _error_exit;
    d->jerr.emit_message = _emit_message;
    d->cinfo.client_data = d;
    /* libjpeg reports its own allocation failure through error_exit. */
    if (setjmp(d->jb)) {
        free(d);
        return NULL;
    }
    jpeg_create_decompress(&d->cinfo);
    return d;
}

void tdata_jdec_free(tdata_jdec *d)
{
    if (!d)
        return;
    jpeg_destroy_decompress(&d->cinfo);
    free(d->row);
    free(d);
}

const char *tdata_jdec_msg(const tdata_jdec *d)
{
    return d->msg;
}

int tdata_image_reserve(tdata_image *im, size_t bytes)
{
    if (im->cap >= bytes && im->px)
        return 0;
    uint8_t *p = realloc(im->px, bytes ? bytes : 1);
    if (!p)
        return -1;
    im->px = p;
    im->cap = bytes;
    return 0;
}

void tdata_image_free(tdata_image *im)
{
    free(im->px);
    memset(im, 0, sizeof *im);
}

/* Refuse a header that declares more pixels than tdata_max_pixels(): a
 * few hundred bytes can declare 65535 x 65535, and the decode would then
 * allocate its full size. Called after jpeg_read_header, under setjmp. */
static void _check_size(tdata_jdec *d)
{
    uint64_t px = (uint64_t)d->cinfo.image_width * d->cinfo.image_height;
    if (px <= tdata_max_pixels())
        return;
    snprintf(d->msg, sizeof d->msg,
             "JPEG declares %u x %u pixels, more than the limit of %llu "
             "(TDATA_MAX_PIXELS, --max-pixels)",
             (unsigned)d->cinfo.image_width, (unsigned)d->cinfo.image_height,
             (unsigned long long)tdata_max_pixels());
    longjmp(d->jb, 1);
}

int tdata_jpeg_header(tdata_jdec *d, const uint8_t *buf, size_t len, int *w,
                      int *h, int *colorspace, int *progressive)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    d->msg[0] = 0;
    d->warnings = 0;
    d->strict = 0;
    if (setjmp(d->jb)) {
        jpeg_abort_decompress(ci);
        return TDATA_EDECODE;
    }
    jpeg_mem_src(ci, buf, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    _check_size(d);
    *w = (int)ci->image_width;
    *h = (int)ci->image_height;
    if (colorspace)
        *colorspace = ci->jpeg_color_space;
    if (progressive)
        *progressive = ci->progressive_mode;
    jpeg_abort_decompress(ci);
    return TDATA_OK;
}

/* Adobe CMYK as Photoshop and ImageMagick write it is stored inverted, so
 * the raw values are already 255-C etc.: RGB = raw * K / 255. */
static void _cmyk_row(const uint8_t *in, uint8_t *out, int n)
{
    for (int i = 0; i < n; i++, in += 4, out += 3) {
        unsigned k = in[3];
        out[0] = (uint8_t)((in[0] * k + 127) / 255);
        out[1] = (uint8_t)((in[1] * k + 127) / 255);
        out[2] = (uint8_t)((in[2] * k + 127) / 255);
    }
}

/* Read the header and start decompression at scale num/8 into RGB (CMYK
 * and YCCK come out as CMYK, converted per row). Returns whether it is
 * CMYK. libjpeg errors longjmp to the caller's setjmp. */
static int _start(tdata_jdec *d, const uint8_t *buf, size_t len, int scale_num,
                  int flags)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    jpeg_mem_src(ci, buf, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    _check_size(d);
    int cmyk =
        ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    ci->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    ci->scale_num = (unsigned)(scale_num < 1   ? 1
                               : scale_num > 8 ? 8
                                               : scale_num);
    ci->scale_denom = 8;
    /* Fancy (triangle) chroma upsampling is libjpeg's and PIL's default;
     * turning it off saves ~15% of the decode at a small chroma cost. */
    ci->do_fancy_upsampling = (flags & TDATA_DEC_FAST_UPSAMPLE) ? FALSE : TRUE;
    jpeg_start_decompress(ci);
    return cmyk;
}

/* A region in scaled pixels, [x0, x1) x [y0, y1). */
typedef struct _box {
    int x0, y0, x1, y1;
} _box;

/* The crop (x, y, cw, ch) of the full W x H image in the scaled output,
 * rounded outward so it covers the crop, never empty. */
static _box _scaled_crop(const struct jpeg_decompress_struct *ci, int x, int y,
                         int cw, int ch)
{
    long long W = ci->image_width, H = ci->image_height;
    int ow = (int)ci->output_width, oh = (int)ci->output_height;
    _box b = {(int)((long long)x * ow / W), (int)((long long)y * oh / H),
              (int)(((long long)(x + cw) * ow + W - 1) / W),
              (int)(((long long)(y + ch) * oh + H - 1) / H)};
    if (b.x1 > ow)
        b.x1 = ow;
    if (b.y1 > oh)
        b.y1 = oh;
    if (b.x1 <= b.x0)
        b.x1 = b.x0 + 1;
    if (b.y1 <= b.y0)
        b.y1 = b.y0 + 1;
    return b;
}

/* Decode `rows` scanlines of xw pixels into out (CMYK through d->row);
 * -1 when the CMYK row cannot be allocated. */
static int _read_rows(tdata_jdec *d, int cmyk, int rows, JDIMENSION xw,
                      tdata_image *out)
{
    size_t stride = (size_t)xw * 3;
    if (cmyk && d->rowcap < (size_t)xw * 4) {
        free(d->row);
        d->row = malloc((size_t)xw * 4);
        d->rowcap = d->row ? (size_t)xw * 4 : 0;
        if (!d->row)
            return -1;
    }
    for (int r = 0; r < rows; r++) {
        JSAMPROW rp = cmyk ? d->row : out->px + (size_t)r * stride;
        jpeg_read_scanlines(&d->cinfo, &rp, 1);
        if (cmyk)
            _cmyk_row(d->row, out->px + (size_t)r * stride, (int)xw);
    }
    return 0;
}

/* Where the decoded region lies in the ow x oh scaled image: all of it in
 * strict mode, else the crop b inside the decoded columns from xoff. */
static void _describe(int ow, int oh, int strict, _box b, JDIMENSION xoff,
                      JDIMENSION xw, tdata_image *out)
{
    out->c = 3;
    out->stride = (int)xw * 3;
    out->w = strict ? ow : b.x1 - b.x0;
    out->h = strict ? oh : b.y1 - b.y0;
    out->off = strict ? 0 : (size_t)(b.x0 - (int)xoff) * 3;
    out->sx = b.x0;
    out->sy = b.y0;
    out->full_w = ow;
    out->full_h = oh;
}

int tdata_jpeg_decode_region(tdata_jdec *d, const uint8_t *buf, size_t len,
                             int x, int y, int cw, int ch, int scale_num,
                             int flags, tdata_image *out)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    int strict = (flags & TDATA_DEC_STRICT) != 0;
    d->msg[0] = 0;
    d->warnings = 0;
    d->strict = strict;
    if (setjmp(d->jb)) {
        jpeg_abort_decompress(ci);
        return TDATA_EDECODE;
    }
    int cmyk = _start(d, buf, len, scale_num, flags);
    /* The scaled size, before jpeg_crop_scanline narrows output_width. */
    int ow = (int)ci->output_width, oh = (int)ci->output_height;
    _box b = _scaled_crop(ci, x, y, cw, ch);
    JDIMENSION xoff = (JDIMENSION)b.x0, xw = (JDIMENSION)(b.x1 - b.x0);
    if (!strict && xw < ci->output_width)
        jpeg_crop_scanline(ci, &xoff, &xw); /* widens to iMCU columns */
    else {
        xoff = 0;
        xw = ci->output_width;
    }
    int rows = strict ? oh : b.y1 - b.y0;
    if (tdata_image_reserve(out, (size_t)xw * 3 * (size_t)rows) != 0) {
        jpeg_abort_decompress(ci);
        snprintf(d->msg, sizeof d->msg, "out of memory");
        return TDATA_ENOMEM;
    }
    if (!strict && b.y0 > 0)
        jpeg_skip_scanlines(ci, (JDIMENSION)b.y0);
    if (_read_rows(d, cmyk, rows, xw, out) != 0) {
        jpeg_abort_decompress(ci);
        snprintf(d->msg, sizeof d->msg, "out of memory for a CMYK row");
        return TDATA_ENOMEM;
    }
    _describe(ow, oh, strict, b, xoff, xw, out);
    if (strict)
        jpeg_finish_decompress(ci); /* sees trailing-data warnings */
    else
        jpeg_abort_decompress(ci);
    return TDATA_OK;
}
