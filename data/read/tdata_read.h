/* read/tdata_read.h: the public reader API of libtdata, what the trainer
 * uses: tdata_dataset opens and validates the index and the shards
 * read-only; tdata_perm/tdata_partition give the per-(seed, epoch) global
 * permutation and its k slices; tdata_loader runs I/O threads plus a decode
 * pool that fill preallocated batch buffers ahead of the trainer, handed
 * out without a copy; tdata_stage copies shards to node-local disk.
 * Every call that can fail returns 0 or a TDATA_E* code (format layer) and
 * leaves a message naming the file / shard / sample in torus_error_msg().
 * Includes only format/tdata_format.h. */
#ifndef TORUS_DATA_READ_TDATA_READ_H
#define TORUS_DATA_READ_TDATA_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/torus_error.h"
#include "data/format/tdata_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ dataset */
typedef struct tdata_dataset tdata_dataset;

typedef struct tdata_dataset_info {
    int layout; /* enum tdata_layout */
    int format_version;
    uint64_t num_images;
    int num_shards;
    int num_classes;
    int height, width, channels; /* dense layout only */
    double mean[3], std[3];      /* per channel, on the 0..1 scale */
    char split[64];
    char creator[64];
} tdata_dataset_info;

/* Open INDEX (a SPLIT-index.txt path, or a directory holding exactly one
 * index). Every shard is checked: present, full length, format version,
 * image count and CRC-of-CRCs equal to the index. Files are opened
 * read-only with HDF5 file locking off. */
TORUS_MUST_CHECK int tdata_dataset_open(const char *index_path, tdata_dataset **out);
void tdata_dataset_close(tdata_dataset *ds);
const tdata_dataset_info *tdata_dataset_get_info(const tdata_dataset *ds);
const char *tdata_dataset_class_name(const tdata_dataset *ds, int cls);
const char *tdata_dataset_shard_path(const tdata_dataset *ds, int shard);
uint64_t tdata_dataset_shard_count(const tdata_dataset *ds, int shard);
/* Global sample id -> shard and index inside it. */
void tdata_dataset_locate(const tdata_dataset *ds, uint64_t id, int *shard,
                          uint64_t *idx);
/* Raw stored bytes of one sample (encoded image or dense pixels), with its
 * label and stored CRC. *buf is malloc'd and grown as needed. */
TORUS_MUST_CHECK int tdata_dataset_read(tdata_dataset *ds, uint64_t id, uint8_t **buf,
                       size_t *cap, size_t *len, int32_t *label, uint32_t *crc);
/* Source name of sample id (as packed), into NAME (size n). */
TORUS_MUST_CHECK int tdata_dataset_name(tdata_dataset *ds, uint64_t id, char *name, size_t n);
/* Re-point shard paths at DIR (after staging); files must match. */
TORUS_MUST_CHECK int tdata_dataset_relocate(tdata_dataset *ds, const char *dir);

/* ------------------------------------------------------------ shuffle */
/* perm[0..n) = permutation of 0..n-1 drawn from (seed, epoch); the same on
 * every rank and every run. */
void tdata_perm(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm);
/* Slice r of k: [begin, end) into the permutation. With even != 0 every
 * slice has floor(n/k) samples (the tail n mod k is dropped that epoch) so
 * all ranks run the same number of steps; else slices cover all of n. */
void tdata_partition(uint64_t n, int k, int r, int even, uint64_t *begin,
                     uint64_t *end);

/* ------------------------------------------------------------ loader */
enum tdata_mode { TDATA_TRAIN = 0, TDATA_EVAL = 1 };
enum tdata_order { TDATA_NCHW = 0, TDATA_NHWC = 1 };
enum tdata_dtype { TDATA_F32 = 0, TDATA_F16 = 1, TDATA_U8 = 2 };

typedef struct tdata_loader_opts {
    int mode; /* TDATA_TRAIN: shuffled, RandomResizedCrop+flip;
                 TDATA_EVAL: in order, resize+centre crop */
    int batch_size;
    int out_h, out_w;            /* output size (224) */
    int eval_resize;             /* shorter side before the centre crop (256) */
    double scale_min, scale_max; /* RandomResizedCrop area (0.08, 1) */
    double ratio_min, ratio_max; /* aspect (3/4, 4/3) */
    int flip;                    /* random horizontal flip in train mode */
    int defer_flip; /* draw the flips but leave the pixels unmirrored:
                       tdata_batch.flips says which to mirror (a GPU
                       mirrors them; data/read/tdata_norm.h) */
    int order;                   /* TDATA_NCHW / TDATA_NHWC */
    int dtype;          /* TDATA_F32 / TDATA_F16 / TDATA_U8 (no norm.) */
    int normalize;      /* (x/255-mean)/std with the index's mean/std */
    int rank, world;    /* this rank's slice of each epoch */
    int drop_remainder; /* even slices (train default) */
    /* TDATA_TRAIN only. 0: each rank steps through its own slice
     * (tdata_partition). g > 0: the global-block order, which does not
     * depend on the number of ranks: step s of an epoch is the block
     * [s*g, (s+1)*g) of its permutation and this rank takes its share
     * (common/torus_share.h; batch_size must be that share); an epoch has
     * floor(n/g) steps. A run resumed on another rank count then serves
     * exactly the batches of an uninterrupted one. */
    int global_batch;
    uint64_t seed;
    int io_threads;      /* >= 1 */
    int decode_threads;  /* >= 1 */
    int prefetch;        /* batches in flight, >= 2 */
    size_t coalesce_gap; /* merge reads whose gap is below this (bytes) */
    long max_bad; /* fail once more than this many bad samples; <0 = no limit */
    int reduced_dct;   /* decode at 1/2, 1/4, 1/8 when the crop allows */
    int roi_decode;    /* decode only the crop's rows and columns */
    int fast_upsample; /* skip libjpeg's fancy chroma upsampling
                          (~15% faster decode; off by default, as PIL) */
    /* Optional allocator for batch buffers (e.g. cudaHostAlloc for pinned
     * memory). NULL = aligned malloc. */
    void *(*alloc)(size_t bytes, void *ctx);
    void (*free)(void *p, void *ctx);
    void *alloc_ctx;
    FILE *log; /* bad-sample log (NULL = the reporter: torus_warn) */
} tdata_loader_opts;

void tdata_loader_opts_default(tdata_loader_opts *o);
/* torus-train's loader options for MODE at batch BATCH and SIZE x SIZE
 * output: the defaults above, then NCHW f32 normalised, a mild crop
 * (area 0.64..1: small images keep the object in view), evaluation
 * without the resize step (eval_resize = SIZE), one I/O and one decode
 * thread, 3 batches in flight. The trainer and the Python package both
 * start from it, so their transforms cannot drift apart. */
void tdata_loader_opts_trainer(tdata_loader_opts *o, int mode, int batch,
                               int size);

typedef struct tdata_batch {
    void *data; /* n x C x H x W (or n x H x W x C) */
    int32_t *labels;
    uint64_t *ids; /* global sample ids */
    uint8_t *flips; /* per sample, 1: mirrored (or, with defer_flip, to be
                       mirrored by the consumer) */
    int n;         /* valid samples (< batch_size when bad ones
                      were skipped or at the end of an eval epoch) */
    int c, h, w;
    uint64_t epoch, step; /* which batch this is */
    double wait_s;        /* time next() waited for it */
} tdata_batch;

typedef struct tdata_loader tdata_loader;

typedef struct tdata_loader_stats {
    uint64_t samples, bad, bad_crc, bad_decode;
    uint64_t read_calls, read_bytes, batches;
    double wait_s; /* total time next() blocked */
} tdata_loader_stats;

TORUS_MUST_CHECK int tdata_loader_create(tdata_dataset *ds, const tdata_loader_opts *o,
                        tdata_loader **out);
/* The largest epoch a stream starts at: a caller's signed epoch of -1
 * (as an unsigned 2^64 - 1) is refused, not wrapped. */
#define TDATA_EPOCH_MAX ((uint64_t)INT64_MAX)
/* Position the stream at (epoch, first sample of this rank's slice), e.g.
 * to resume; step = sample_offset / batch_size. Starts the workers.
 * TDATA_EINVAL: epoch > TDATA_EPOCH_MAX, or the offset past the epoch. */
TORUS_MUST_CHECK int tdata_loader_start(tdata_loader *l, uint64_t epoch, uint64_t sample_offset);
/* Next batch; it stays valid until the following call. Returns NULL at the
 * end of an epoch in eval mode (train mode rolls over to the next epoch),
 * or on a fatal error (*err set, message in torus_error_msg()). */
const tdata_batch *tdata_loader_next(tdata_loader *l, int *err);
uint64_t tdata_loader_steps_per_epoch(const tdata_loader *l);
/* The per-channel normalisation of the dataset, whatever o->normalize and
 * o->dtype say: value = byte * scale[c] + bias[c] (tdata_norm_px), scale =
 * 1 / (255 std), bias = -mean / std; what a consumer of u8 batches uses to
 * normalise them as the loader's float output is. */
void tdata_loader_norm(const tdata_loader *l, float scale[3], float bias[3]);
void tdata_loader_get_stats(const tdata_loader *l, tdata_loader_stats *s);
void tdata_loader_destroy(tdata_loader *l);

/* ------------------------------------------------------------ staging */
/* Copy the shards to DIR (default $SLURM_TMPDIR, then $TMPDIR) with large
 * sequential reads, skipping ones already there with the right size, and
 * re-point the dataset at the copies. Safe for ranks sharing a node: the
 * rank that creates DIR/SHARD.lock copies, the others wait. The wait ends
 * in an error naming the lock and its owner when another user holds it,
 * and after 15 minutes otherwise (a lock older than 10 is a crashed
 * rank's and is taken over). */
TORUS_MUST_CHECK int tdata_stage(tdata_dataset *ds, const char *dir);

/* ------------------------------------------------------------ half */
uint16_t tdata_f32_to_f16(float f);
float tdata_f16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif
#endif
