/* image/png_decode.c: PNG to RGB through libpng's simplified API.
 * Only the packer needs it: ImageNet holds a PNG named .JPEG, and the
 * policy (docs/shard-format.md) is to re-encode it as an RGB JPEG. Alpha
 * is composed onto white, the usual background for photographs online. */
#include <png.h>
#include <stdio.h>
#include <string.h>

#include "data/image/image.h"

int tdata_is_png(const uint8_t *buf, size_t len)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    return len >= 8 && memcmp(buf, sig, 8) == 0;
}

int tdata_png_decode(const uint8_t *buf, size_t len, tdata_image *out,
                     char *msg, size_t msgn)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, buf, len)) {
        snprintf(msg, msgn, "PNG: %s", img.message);
        return TDATA_EDECODE;
    }
    /* A few bytes can declare 2^31 x 2^31 pixels: refuse before the
     * buffer for them is sized. */
    if ((uint64_t)img.width * img.height > tdata_max_pixels()) {
        snprintf(msg, msgn,
                 "PNG declares %u x %u pixels, more than the limit of %llu "
                 "(TDATA_MAX_PIXELS, --max-pixels)",
                 (unsigned)img.width, (unsigned)img.height,
                 (unsigned long long)tdata_max_pixels());
        png_image_free(&img);
        return TDATA_EDECODE;
    }
    img.format = PNG_FORMAT_RGB;
    size_t stride = PNG_IMAGE_ROW_STRIDE(img);
    if (tdata_image_reserve(out, PNG_IMAGE_BUFFER_SIZE(img, stride)) != 0) {
        png_image_free(&img);
        snprintf(msg, msgn, "PNG: out of memory");
        return TDATA_ENOMEM;
    }
    png_color white = {255, 255, 255};
    if (!png_image_finish_read(&img, &white, out->px, (png_int_32)stride,
                               NULL)) {
        snprintf(msg, msgn, "PNG: %s", img.message);
        png_image_free(&img);
        return TDATA_EDECODE;
    }
    /* libpng reports recoverable damage as a warning in message. */
    int warned = (img.warning_or_error & PNG_IMAGE_WARNING) != 0;
    if (warned)
        snprintf(msg, msgn, "PNG: %s", img.message);
    out->w = (int)img.width;
    out->h = (int)img.height;
    out->c = 3;
    out->stride = (int)stride;
    out->off = 0;
    out->sx = out->sy = 0;
    out->full_w = out->w;
    out->full_h = out->h;
    png_image_free(&img);
    return warned ? TDATA_EDECODE : TDATA_OK;
}
