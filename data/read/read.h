/* read/read.h: the reader's internals, for the read layer and the tools
 * (torus-data-bench): accessors of an open dataset and the per-sample
 * transforms (crops, DCT scale, the output conversion).
 * Includes format/ and image/ below it and the public read/tdata_read.h. */
#ifndef TORUS_DATA_READ_READ_H
#define TORUS_DATA_READ_READ_H

#include <stddef.h>
#include <stdint.h>

#include "data/format/format.h"
#include "data/image/image.h"
#include "data/read/tdata_read.h"

/* Internal accessors of an open dataset (loader, staging, bench). */
tdata_shard *tdata_dataset_shard(tdata_dataset *ds, int i);
const tdata_index *tdata_dataset_index(const tdata_dataset *ds);

/* ------------------------------------------------------------ transforms */
typedef struct tdata_crop {
    double x, y, w, h; /* in source pixels */
    int flip;
} tdata_crop;
void tdata_rrc(tdata_rng *r, int W, int H, double smin, double smax,
               double rmin, double rmax, tdata_crop *c);
void tdata_center_crop(int W, int H, int resize, int out_w, int out_h,
                       tdata_crop *c);
/* Smallest libjpeg scale num/8 that keeps the crop >= out size. */
int tdata_dct_scale(int cw, int ch, int out_w, int out_h);
/* Convert packed HWC uint8 (w x h x c, c <= 3) into one batch slot:
 * optional horizontal flip, x*scale[c]+bias[c] (the normalisation),
 * NCHW/NHWC, f32/f16/u8. */
void tdata_emit(const uint8_t *src, int w, int h, int c, int flip, int order,
                int dtype, const float *scale, const float *bias, void *dst);
size_t tdata_dtype_size(int dtype);

#endif
