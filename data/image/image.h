/* image/image.h: the image codec shared by the packer and the reader:
 * JPEG header and region decode (libjpeg-turbo), PNG decode, the
 * antialiased resampler, and per-thread scratch memory.
 *
 * Promises: no allocation per image after warm-up (decoders, images and
 * scratch grow only); failures return a TDATA_E* code with the reason in
 * the decoder (tdata_jdec_msg) or the caller's buffer, never printed.
 * Includes only format/tdata_format.h (the error codes). */
#ifndef TORUS_DATA_IMAGE_IMAGE_H
#define TORUS_DATA_IMAGE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "data/format/tdata_format.h"

/* 8-bit interleaved pixels. The region of interest starts at px + off and
 * rows are stride bytes apart; (sx, sy) is its origin in the decoded
 * (scaled) image of full_w x full_h. */
typedef struct tdata_image {
    uint8_t *px;
    size_t cap, off;
    int w, h, c, stride;
    int sx, sy, full_w, full_h;
} tdata_image;

/* Per-decoder state reused between images (no allocation per image). */
typedef struct tdata_jdec tdata_jdec;
tdata_jdec *tdata_jdec_new(void);
void tdata_jdec_free(tdata_jdec *d);
/* Header only: size and libjpeg colour space (J_COLOR_SPACE value). */
int tdata_jpeg_header(tdata_jdec *d, const uint8_t *buf, size_t len, int *w,
                      int *h, int *colorspace, int *progressive);
/* Decode region (x, y, cw, ch) of the full image at scale num/8 (num in
 * 1..8) into out as RGB. out->sx, sy, w, h give the decoded region in
 * scaled pixels (rounded outward, so it covers the crop). With
 * TDATA_DEC_STRICT it decodes everything and makes any libjpeg warning
 * (truncation, corrupt data) an error. CMYK/YCCK are converted to RGB. */
#define TDATA_DEC_STRICT        1 /* full decode, warnings are errors */
#define TDATA_DEC_FAST_UPSAMPLE 2 /* no "fancy" chroma upsampling */
int tdata_jpeg_decode_region(tdata_jdec *d, const uint8_t *buf, size_t len,
                             int x, int y, int cw, int ch, int scale_num,
                             int flags, tdata_image *out);
const char *tdata_jdec_msg(const tdata_jdec *d);

int tdata_is_png(const uint8_t *buf, size_t len);
int tdata_png_decode(const uint8_t *buf, size_t len, tdata_image *out,
                     char *msg, size_t msgn);
int tdata_image_reserve(tdata_image *im, size_t bytes);
void tdata_image_free(tdata_image *im);

/* Grow-only scratch memory, one per thread, so the hot path never calls
 * malloc after warm-up. */
typedef struct tdata_scratch {
    void *p;
    size_t cap;
} tdata_scratch;
void *tdata_scratch_get(tdata_scratch *s, size_t bytes);
void tdata_scratch_free(tdata_scratch *s);

/* Resample the box [bx0,bx1) x [by0,by1) (fractional source pixels) of src
 * (sw x sh x c, rows stride bytes apart) to dst (dw x dh x c, packed) with
 * an antialiased triangle filter, which is what PIL's BILINEAR does.
 * Returns TDATA_OK, or TDATA_ENOMEM when the scratch memory cannot grow
 * (dst untouched). */
int tdata_resize(const uint8_t *src, int sw, int sh, int stride, int c,
                 double bx0, double by0, double bx1, double by1, uint8_t *dst,
                 int dw, int dh, tdata_scratch *s);

#endif
