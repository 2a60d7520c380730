/* tdata_internal.h: declarations shared inside libtdata and its tools
 * (torus-pack, torus-data-bench), not part of the trainer-facing API. */
#ifndef TORUS_TDATA_INTERNAL_H
#define TORUS_TDATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "data/tdata.h"

#define TDATA_CHUNK_BYTES (4u << 20) /* see docs/shard-format.md */

int tdata_seterr(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------ shards */
typedef struct tdata_shard_meta {
    int layout; /* enum tdata_layout */
    int shard_index, num_shards;
    int num_classes;
    const char *split, *creator;
    int height, width, channels; /* dense only */
    double pixel_sum[3], pixel_sumsq[3], pixel_count;
    int num_rejected, num_reencoded; /* packing report, kept for resumes */
    const char *const *class_ids;    /* num_classes entries */
    const char *const *class_words;  /* num_classes entries, may be "" */
} tdata_shard_meta;

/* Write a complete shard to PATH (via PATH.tmp + rename, so a file under
 * the final name is always complete). DATA holds n images back to back:
 * encoded (offsets[0..n]) or dense (offsets ignored, n*h*w*c bytes). */
int tdata_shard_write(const char *path, const tdata_shard_meta *m, uint64_t n,
                      const uint8_t *data, const uint64_t *offsets,
                      const int32_t *labels, const char *const *names);

typedef struct tdata_shard {
    char *path;
    int fd;
    int format_version, layout;
    int shard_index, num_shards, num_classes;
    int height, width, channels;
    uint64_t n;
    uint64_t *offsets; /* n+1 logical byte offsets into the image stream */
    int32_t *labels;
    uint32_t *crcs;
    uint64_t chunk_bytes, nchunks;
    uint64_t *chunk_addr; /* file address of each chunk */
    uint64_t file_size;
    uint32_t crc_of_crcs;
    double pixel_sum[3], pixel_sumsq[3], pixel_count;
    int num_rejected, num_reencoded;
    char split[64], creator[64];
    char **class_ids, **class_words; /* only with load_classes */
} tdata_shard;

int tdata_shard_open(const char *path, tdata_shard *s, int load_classes);
/* Logical bytes [lo, hi) of the image stream into dst, with pread on the
 * chunks' file addresses (no HDF5 call, so threads read in parallel). */
int tdata_shard_pread(const tdata_shard *s, uint64_t lo, uint64_t hi,
                      uint8_t *dst);
int tdata_shard_name(const tdata_shard *s, uint64_t i, char *buf, size_t n);
/* All n source names (malloc'd array of malloc'd strings), or NULL. */
char **tdata_shard_names(const tdata_shard *s);
void tdata_shard_close(tdata_shard *s);
uint32_t tdata_crc_of_crcs(const uint32_t *crcs, uint64_t n);

/* Turn HDF5 file locking off for every file we open (parallel FS). */
long tdata_h5_fapl(void);

/* ------------------------------------------------------------ index */
typedef struct tdata_index_shard {
    char file[256];
    uint64_t count, bytes;
    uint32_t crc;
} tdata_index_shard;

typedef struct tdata_index {
    int version;
    char creator[64], split[64];
    int layout, height, width, channels;
    uint64_t num_images;
    int num_classes, num_shards;
    double mean[3], std[3];
    char **class_ids, **class_words;
    tdata_index_shard *shards;
} tdata_index;

int tdata_index_read(const char *path, tdata_index *ix);
int tdata_index_write(const char *path, const tdata_index *ix);
void tdata_index_free(tdata_index *ix);
/* Build SPLIT-index.txt in DIR from the shards found there. */
int tdata_index_build(const char *dir, const char *split, int num_shards,
                      char *index_path, size_t n);
void tdata_shard_filename(char *buf, size_t n, const char *split, int i,
                          int count);

/* Internal accessors of an open dataset (loader, staging, bench). */
tdata_shard *tdata_dataset_shard(tdata_dataset *ds, int i);
const tdata_index *tdata_dataset_index(const tdata_dataset *ds);

/* ------------------------------------------------------------ images */
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
 * an antialiased triangle filter, which is what PIL's BILINEAR does. */
void tdata_resize(const uint8_t *src, int sw, int sh, int stride, int c,
                  double bx0, double by0, double bx1, double by1, uint8_t *dst,
                  int dw, int dh, tdata_scratch *s);

/* ------------------------------------------------------------ transforms */
typedef struct tdata_rng {
    uint64_t s;
} tdata_rng;
uint64_t tdata_rng_next(tdata_rng *r);
double tdata_rng_uniform(tdata_rng *r); /* [0, 1) */
uint64_t tdata_mix64(uint64_t x);

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
