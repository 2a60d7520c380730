/* api/tdata_api.h: libtorusdata, the narrow and versioned C API of the
 * input pipeline for callers outside C (the Python package `torus`, through
 * ctypes). It wraps libtdata's reader: open a packed dataset, run the
 * loader (the same I/O and decode threads, shuffle and transforms as
 * torus-train), take batches, read the error message. Nothing else of
 * libtdata is exported from the shared library.
 *
 * Versioning: TDATA_API_VERSION grows when a function or a struct field is
 * added (fields only at the end); every struct starts with its size as the
 * caller knows it, so an older caller keeps working. A changed meaning
 * would be a new soname.
 *
 * Errors: functions return 0 or a positive TDATA_E* code; the message
 * (naming the file, shard or sample) is tdata_api_errmsg() of the calling
 * thread, until its next call.
 *
 * Checkpoints (tdata_api_ckpt_*, version 2): the name and the checked
 * tensors of torus-train's checkpoints, format/tdata_ckpt.h's one
 * implementation, for the Python package's converter; HDF5 attributes are
 * the caller's to read (through tdata_api_ckpt_fd, the file checked).
 * The header includes nothing of torus. */
#ifndef TORUS_DATA_API_TDATA_API_H
#define TORUS_DATA_API_TDATA_API_H

#include <stdint.h>

#include "common/torus_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: the checkpoint functions (tdata_api_ckpt_*), tdata_api_partition. */
#define TDATA_API_VERSION 2

unsigned tdata_api_version(void);
const char *tdata_api_errmsg(void);

typedef struct tdata_api_set tdata_api_set;

typedef struct tdata_api_info {
    uint32_t size; /* sizeof, set by the caller */
    int32_t num_shards, num_classes;
    int32_t height, width, channels; /* 0 for encoded (JPEG) sets */
    int32_t dense;                   /* 1: raw pixels (IDX), 0: JPEG */
    uint64_t num_images;
    double mean[3], std[3];
} tdata_api_info;

/* INDEX: a SPLIT-index.txt path or a directory holding one index. */
TORUS_MUST_CHECK int tdata_api_open(const char *index, tdata_api_set **out);
void tdata_api_close(tdata_api_set *set);
TORUS_MUST_CHECK int tdata_api_info_get(const tdata_api_set *set,
                                        tdata_api_info *out);
/* Class name of label CLS, NULL when out of range. */
const char *tdata_api_class_name(const tdata_api_set *set, int cls);

typedef struct tdata_api_opts {
    uint32_t size; /* sizeof, set by the caller */
    int32_t train; /* 1: shuffled slice, random crop and flip; 0: eval */
    int32_t batch_size;
    int32_t out_size; /* square output side */
    int32_t u8_nhwc;  /* 1: uint8 NHWC as stored; 0: f32 NCHW normalised */
    int32_t rank, world;
    int32_t drop_remainder; /* even slices; -1: the mode's default */
    int32_t io_threads, decode_threads; /* 0: torus-train's (1 and 1) */
    int32_t eval_resize;                /* 0: torus-train's (out_size) */
    int32_t pad_;
    int64_t max_bad; /* fail past this many bad samples; < 0: never */
    uint64_t seed;
    uint64_t epoch, sample_offset; /* where the stream starts (resume) */
    double scale_min, scale_max;   /* 0: torus-train's crop (0.64, 1) */
} tdata_api_opts;

typedef struct tdata_api_batch {
    uint32_t size; /* sizeof, set by the caller */
    int32_t n, c, h, w;
    int32_t pad_;
    uint64_t epoch, step;
    uint64_t bytes;   /* of data */
    const void *data; /* n x C x H x W f32, or n x H x W x C u8 */
    const int32_t *labels;
    const uint64_t *ids; /* global sample ids */
} tdata_api_batch;

typedef struct tdata_api_loader tdata_api_loader;

/* Create the loader on SET (which must outlive it) and start it at
 * (o->epoch, o->sample_offset of this rank's slice). A sample that fails
 * its CRC or decode is reported on stderr as torus-train reports it
 * ("tdata: bad sample ...; skipped") and left out of its batch. An epoch
 * past 2^63 - 1 (a negative one passed as unsigned) or an offset past the
 * epoch is refused: TDATA_EINVAL, the message in tdata_api_errmsg(). */
TORUS_MUST_CHECK int tdata_api_loader_new(tdata_api_set *set,
                                          const tdata_api_opts *o,
                                          tdata_api_loader **out);
/* The next batch, valid until the following call: 0; 1 at the end of an
 * eval epoch (train mode rolls over); else an error code. */
TORUS_MUST_CHECK int tdata_api_loader_next(tdata_api_loader *l,
                                           tdata_api_batch *b);
uint64_t tdata_api_loader_steps(const tdata_api_loader *l);
/* stats[0..3]: samples, bad, bad CRC, bad decode. */
void tdata_api_loader_stats(const tdata_api_loader *l, uint64_t stats[4]);
/* value = byte * scale[c] + bias[c]: the loader's normalisation. */
void tdata_api_loader_norm(const tdata_api_loader *l, float scale[3],
                           float bias[3]);
void tdata_api_loader_free(tdata_api_loader *l);

/* perm[0..n): the (seed, epoch) permutation torus-train's loader uses. */
void tdata_api_perm(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm);

/* [*begin, *end): rank r's slice of n samples over k ranks, as the loader
 * cuts it (even: every rank the same count, the rest left out; else
 * contiguous slices covering all n). Version 2. */
void tdata_api_partition(uint64_t n, int32_t k, int32_t r, int32_t even,
                         uint64_t *begin, uint64_t *end);

/* Into out (n bytes) the path of the checkpoint of RUN at global STEP in
 * folder DIR, as torus-train names it (tdata_ckpt_name: a trailing slash
 * of DIR or none give one name; a bad run id or step is refused). */
TORUS_MUST_CHECK int tdata_api_ckpt_name(const char *dir, int64_t step,
                                         const char *run, char *out,
                                         uint64_t n);

typedef struct tdata_api_ckpt tdata_api_ckpt;

/* Opens checkpoint PATH for reading: a regular file only (a FIFO or
 * device is refused by name, never waited on), opened by HDF5 through the
 * descriptor checked. */
TORUS_MUST_CHECK int tdata_api_ckpt_open(const char *path,
                                         tdata_api_ckpt **out);
/* The descriptor of the open file (valid until close): read the
 * attributes through /proc/self/fd/N, the same file. */
int tdata_api_ckpt_fd(const tdata_api_ckpt *c);
/* Dataset GROUP/DSET of COUNT floats of KIND (0: values, 1: BN running
 * variances) checked (tdata_ckpt_tensor) and, when buf is not NULL, read
 * into buf and its values checked. Call it with buf NULL first to bound
 * COUNT by the file before allocating. */
TORUS_MUST_CHECK int tdata_api_ckpt_tensor(tdata_api_ckpt *c, const char *group,
                                           const char *dset, uint64_t count,
                                           int32_t kind, float *buf);
void tdata_api_ckpt_close(tdata_api_ckpt *c);

#ifdef __cplusplus
}
#endif
#endif
