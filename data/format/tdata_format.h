/* format/tdata_format.h: the public part of libtdata's format layer: the
 * shard format version, the error codes every libtdata call returns, the
 * CRC32C that guards each stored image, and the two shard layouts.
 *
 * Errors follow common/torus_error.h: a call that can fail returns 0 or a
 * positive TDATA_E* code, and the sentence naming the file / shard / sample
 * is this thread's torus_error_msg(), the one accessor (included here). */
#ifndef TORUS_DATA_FORMAT_TDATA_FORMAT_H
#define TORUS_DATA_FORMAT_TDATA_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "common/torus_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Shard format version written by this library; readers refuse newer. */
#define TDATA_FORMAT_VERSION 1

enum tdata_err {
    TDATA_OK = 0,
    TDATA_EIO = 1,         /* open/read/write failed (file named) */
    TDATA_EFORMAT = 2,     /* not a torus shard/index, or malformed */
    TDATA_EVERSION = 3,    /* written by a newer format version */
    TDATA_EMISMATCH = 4,   /* index and shard disagree */
    TDATA_EMISSING = 5,    /* shard file missing */
    TDATA_ETRUNCATED = 6,  /* shard shorter than the index says */
    TDATA_EDECODE = 7,     /* image does not decode */
    TDATA_ECRC = 8,        /* CRC32C mismatch */
    TDATA_ETOOMANYBAD = 9, /* --max-bad exceeded */
    TDATA_EINVAL = 10,     /* bad argument / option */
    TDATA_ENOMEM = 11,
};

const char *tdata_strerror(int code);

/* ------------------------------------------------------------ CRC32C */
uint32_t tdata_crc32c(uint32_t crc, const void *buf, size_t len);
/* The portable table version, exposed so tests can compare both paths. */
uint32_t tdata_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* ------------------------------------------------------------ limits */
/* Decompression-bomb limits, process-wide (docs/shard-format.md,
 * "Limits"). An image whose header declares more pixels than
 * tdata_max_pixels() (width x height) is refused before its decode
 * allocates; an IDX file that expands past tdata_max_idx_bytes() bytes is
 * refused after reading at most that many. A value set with tdata_set_*
 * (a program's option) wins over the environment (TDATA_MAX_PIXELS,
 * TDATA_MAX_IDX_BYTES), which wins over the default. */
#define TDATA_MAX_PIXELS_DEFAULT    (1ull << 27) /* 134 Mpixel */
#define TDATA_MAX_IDX_BYTES_DEFAULT (2ull << 30) /* 2 GiB */
uint64_t tdata_max_pixels(void);
uint64_t tdata_max_idx_bytes(void);
void tdata_set_max_pixels(uint64_t n);
void tdata_set_max_idx_bytes(uint64_t n);
/* Apply the environment variables to the limits no program set; returns
 * TDATA_EINVAL naming the variable when one is not a positive integer. */
int tdata_limits_env(void);

/* ------------------------------------------------------------ layouts */
enum tdata_layout { TDATA_LAYOUT_ENCODED = 0, TDATA_LAYOUT_DENSE = 1 };

/* Makes the complete file TMP durable under PATH: fsync of its data, the
 * rename, fsync of PATH's directory. 0, or the step that failed, with
 * errno (TMP is left for the caller to remove; after a failed directory
 * sync the file is already under PATH). */
enum {
    TDATA_PUBLISH_SYNC = 1,   /* opening or syncing TMP */
    TDATA_PUBLISH_RENAME = 2, /* the rename */
    TDATA_PUBLISH_DIRSYNC = 3 /* the directory, after the rename */
};
TORUS_MUST_CHECK int tdata_publish(const char *tmp, const char *path);

/* ------------------------------------------------------- opening */
/* Opens PATH read-only only when it is a regular file: O_NONBLOCK, then
 * fstat, before anything reads it, so a FIFO, device or socket planted at
 * an input's name is refused with a message naming it and its kind
 * instead of blocking. A descriptor in *fd (blocking again) and the size
 * in *size (may be NULL); TDATA_EMISSING or TDATA_EIO otherwise. */
TORUS_MUST_CHECK int tdata_open_regular(const char *path, int *fd, uint64_t *size);
/* "a FIFO", "a character device", ... for an st_mode. */
const char *tdata_file_kind(unsigned mode);

#ifdef __cplusplus
}
#endif
#endif
