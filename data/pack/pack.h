/* pack/pack.h: the packing engine behind torus-pack (sources, per-image
 * processing, the shard plan and the threaded writer).
 * Layer: includes format/ and image/ below it, never read/. */
#ifndef TORUS_DATA_PACK_PACK_H
#define TORUS_DATA_PACK_PACK_H

#include <stdint.h>
#include <stdio.h>

#include "data/format/format.h"
#include "data/image/image.h"

typedef struct tdata_pack_item {
    char *path; /* file to read (NULL for IDX records) */
    char *name; /* stored source name, relative to the source */
    int32_t label;
    uint64_t bytes; /* input size, for byte-balanced shards */
    uint64_t rec;   /* IDX record number */
} tdata_pack_item;

typedef struct tdata_pack_src {
    tdata_pack_item *items;
    uint64_t n, cap;
    int num_classes;
    char **class_ids, **class_words;
    /* IDX input: all pixels in memory (Fashion-MNIST is 47 MB). */
    uint8_t *idx_pixels;
    int idx_h, idx_w;
    /* Entries of the walk that are not packed (FIFOs, devices, dangling
     * links, folders inside class folders), each said on stderr. */
    uint64_t skipped;
} tdata_pack_src;

typedef struct tdata_pack_opts {
    const char *source, *output, *split;
    const char *classes_file;   /* wnid [words] per line, label order */
    const char *val_labels;     /* LOC_val_solution.csv or devkit gt */
    const char *devkit_synsets; /* wnid per line in devkit ID order */
    const char *idx_labels;
    const char *report;  /* rejection report file (appended) */
    const char *listing; /* saved source listing (read or written) */
    int shards;          /* 0: from shard_bytes */
    uint64_t shard_bytes;
    int range_lo, range_hi; /* shards to pack, [lo, hi) ; hi<0: all */
    int threads;
    uint64_t seed;
    int resize_shorter; /* 0: keep size */
    int dec_h, dec_w;   /* >0: dense layout of decoded pixels */
    int quality;        /* JPEG quality for re-encodes */
    int progress;       /* -1 auto (tty), 0 off, 1 on */
    int no_index;
    const char *creator;
} tdata_pack_opts;

typedef struct tdata_pack_summary {
    uint64_t seen, packed, rejected, reencoded, skipped_shards;
    uint64_t skipped_sources; /* tdata_pack_src.skipped of the walk */
    int shards_written, index_written;
    char index_path[4096];
} tdata_pack_summary;

int tdata_idx_load(const char *images, const char *labels, tdata_pack_src *src);
int tdata_pack_scan(const tdata_pack_opts *o, tdata_pack_src *src);
void tdata_pack_src_free(tdata_pack_src *src);
int tdata_listing_write(const char *path, const tdata_pack_src *s);
int tdata_listing_read(const char *path, const char *source, tdata_pack_src *s);

/* Result of processing one input image. */
typedef struct tdata_pack_out {
    uint8_t *data; /* bytes to store (malloc'd or NULL if rejected) */
    uint64_t len;
    int reencoded;
    char why[256]; /* rejection reason */
    double sum[3], sumsq[3], count;
} tdata_pack_out;

typedef struct tdata_pack_worker tdata_pack_worker;
tdata_pack_worker *tdata_pack_worker_new(const tdata_pack_opts *o);
void tdata_pack_worker_free(tdata_pack_worker *w);
/* Validate by decoding, convert CMYK/YCCK/PNG to RGB JPEG, apply
 * --resize-shorter / --decoded. Returns 0 or TDATA_EDECODE (why set). */
int tdata_pack_image(tdata_pack_worker *w, const uint8_t *buf, size_t len,
                     tdata_pack_out *out);

int tdata_pack_run(const tdata_pack_opts *o, tdata_pack_summary *sum);

#endif
