/* format/format.h: the shard and index format inside libtdata, for the
 * layers above it (pack, read) and the tools: HDF5 shard write and read,
 * the text index, and the seeded splitmix64 stream.
 *
 * Promises: a shard under its final name is always complete; reads of the
 * image stream use pread on chunk addresses, so threads read in parallel.
 * The stream lives here, at the bottom, because the packer's shard plan and
 * the reader's permutation and augmentation must both replay from a seed.
 * Includes only format/tdata_format.h. */
#ifndef TORUS_DATA_FORMAT_FORMAT_H
#define TORUS_DATA_FORMAT_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "data/format/tdata_format.h"

#define TDATA_CHUNK_BYTES (4u << 20) /* see docs/shard-format.md */

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

/* Turn HDF5 file locking off for every file we open (parallel FS). The
 * caller holds tdata_h5_lock() (format/tdata_h5attr.h). */
long tdata_h5_fapl(void);

/* --------------------------------------------- durable file creation */
/* Removes TMP when it is our own regular file (left by a crash); 0 when
 * TMP is now absent, -1 with errno (EEXIST: a symbolic link, or a file of
 * another user or kind, which is left alone). */
int tdata_tmp_clear(const char *tmp);

/* Creates TMP afresh for writing (tdata_tmp_clear, then O_CREAT | O_EXCL |
 * O_NOFOLLOW): a descriptor, or -1 with errno. */
int tdata_tmp_create(const char *tmp);

/* tdata_tmp_create as a stdio stream: NULL with errno on failure. */
FILE *tdata_tmp_fopen(const char *tmp);

/* Closes F, written to TMP, and tdata_publish'es it to PATH; on any error
 * TMP is removed. 0, or -1 with errno. */
int tdata_publish_stream(FILE *f, const char *tmp, const char *path);

/* The message part for a failed tdata_tmp_create/tdata_tmp_fopen. */
#define TDATA_TMP_REFUSED                                               \
    "(a symbolic link or another user's file at the temporary name is " \
    "never followed or replaced)"

/* ------------------------------------------ inputs, text lines, names */
/* Bounds and escaping of the text files (format/textio.c,
 * docs/shard-format.md "Names and lines"). */
#define TDATA_MAX_LINE 65536 /* bytes of one line of an index or listing */
/* The index's per-channel std must lie strictly between these (and mean
 * and std be finite): the reader divides every pixel by it. */
#define TDATA_STD_MIN 1e-6
#define TDATA_STD_MAX 1e6

/* tdata_open_regular (tdata_format.h) as a read-only stdio stream. */
int tdata_fopen_regular(const char *path, FILE **f);

/* A text file read line by line: at most TDATA_MAX_LINE bytes a line, no
 * NUL byte, "\r\n" taken as "\n". */
typedef struct tdata_lines {
    FILE *f;
    const char *path; /* for messages */
    char *line;       /* the current line, without its end */
    size_t len;
    int ln; /* its number, from 1 */
} tdata_lines;
void tdata_lines_init(tdata_lines *r, FILE *f, const char *path);
/* The next line into r->line: 0 with *got 1, 0 with *got 0 at the end, or
 * a code (too long, NUL byte, read error) naming the file and line. */
int tdata_lines_next(tdata_lines *r, int *got);
void tdata_lines_free(tdata_lines *r);

/* NAME with control characters (C0, DEL, C1), bytes that are not UTF-8
 * and backslashes written as \xHH; with TDATA_ESC_SPACE spaces too (for
 * space-delimited fields). malloc'd; NULL when out of memory. */
#define TDATA_ESC_SPACE 1
char *tdata_name_escape(const char *name, int flags);
/* Undo tdata_name_escape in place: 0, or -1 when S escapes a NUL byte. A
 * backslash that does not start \xHH stays as it is. */
int tdata_name_unescape(char *s);

/* ------------------------------------------------------------ index */
/* Upper bounds on counts read from an index or a shard, far above any real
 * dataset, so that a hostile count fails before it sizes an allocation. */
#define TDATA_MAX_SHARDS  (1 << 20)
#define TDATA_MAX_CLASSES (1 << 24)
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
/* Frees the n malloc'd strings of v (none when n <= 0) and v itself (v
 * may be NULL): the class-name and source-name arrays of indexes, shards
 * and sources. */
void tdata_strv_free(char **v, int64_t n);
/* Build SPLIT-index.txt in DIR from the shards found there. */
int tdata_index_build(const char *dir, const char *split, int num_shards,
                      char *index_path, size_t n);
void tdata_shard_filename(char *buf, size_t n, const char *split, int i,
                          int count);

/* ------------------------------------------------------------ stream */
/* splitmix64: tdata_mix64 hashes one value (a bijection); a tdata_rng is
 * the sequence mix64(s0), mix64(s0 + K), ... drawn one at a time. */
typedef struct tdata_rng {
    uint64_t s;
} tdata_rng;
uint64_t tdata_rng_next(tdata_rng *r);
double tdata_rng_uniform(tdata_rng *r); /* [0, 1) */
uint64_t tdata_mix64(uint64_t x);

#endif
