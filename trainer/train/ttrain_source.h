/* ttrain_source.h: where torus-train's batches come from (prefix ttrain_).
 *
 * The seam for the data pipeline: a source hands out one local batch at a
 * time as pointers it owns (valid until the next call), in the shape the
 * data pipeline's loader produces (tdata_batch: NCHW f32 normalised
 * images, int32 labels, the valid count, the time spent waiting), so the
 * packed-dataset loader plugs in behind the same call without a copy.
 * There are two: synthetic batches, and a torus-pack dataset read through
 * libtdata (tdata_source.c, linked into torus-train only so the engine
 * tests need no data library). */
#ifndef TORUS_TRAINER_TRAIN_SOURCE_H
#define TORUS_TRAINER_TRAIN_SOURCE_H

#include <stdint.h>

#include "trainer/models/tmodel.h"

typedef struct {
    const float *x;   /* n x C x H x W; NULL for an 8-bit batch */
    const int32_t *y; /* n labels */
    int n;
    double wait_s; /* time the source blocked for this batch */
    /* An 8-bit batch (ttrain_tdata_use_u8): n images H x W x C of bytes,
     * unmirrored, flips[i] != 0 where image i is to be mirrored, and the
     * per-channel normalisation (teng_net_stage_input_u8). */
    const uint8_t *px, *flips;
    float scale[3], bias[3];
} ttrain_batch;

typedef struct ttrain_source {
    /* The next batch of n samples; returns 0, or nonzero after TORUS_FAIL. */
    int (*next)(struct ttrain_source *s, int n, ttrain_batch *out);
    /* Continue as if `samples` had been served (resume from a
     * checkpoint); returns 0, or nonzero after TORUS_FAIL. */
    int (*seek)(struct ttrain_source *s, uint64_t samples);
    /* Optional (NULL: nothing to do): the loop is about to run steps
     * [step, ...) of epoch at local batch n. A sharded source positions
     * its stream there (resume, batch-size change); returns 0, or nonzero
     * after TORUS_FAIL (common/torus_error.h). */
    int (*start)(struct ttrain_source *s, int epoch, long step, int n);
    /* Served so far over all ranks: the data position. Every next() adds
     * global_batch, whatever this rank's share of it. */
    uint64_t samples;
    /* The global batch of the steps to come, set by the training loop
     * before start() and next(): this rank serves its share of each
     * global batch (common/torus_share.h), the same samples for a global
     * position on any number of ranks. */
    int global_batch;
    void (*close)(struct ttrain_source *s);
    void *impl;
} ttrain_source;

/* The seek of a source whose position is the sample counter alone (the
 * synthetic labels follow it) or is set by start() (the packed dataset):
 * only the counter moves. Both sources use it. */
static inline int ttrain_source_seek_counter(ttrain_source *s, uint64_t samples)
{
    s->samples = samples;
    return 0;
}

/* Synthetic data: max_batch random images generated once (a benchmark
 * measures training, not a random number generator), served again every
 * batch, with fresh labels from a hash of the sample's place in the
 * global batch stream. Rank r of world holds the images of global batch
 * positions [first, first + max_batch), its share of the largest global
 * batch, so at a constant batch k ranks together see exactly the global
 * batches of one rank (the distributed-equals-single check relies on
 * it). */
int ttrain_synthetic_open(ttrain_source *s, const tmodel_spec *m, int max_batch,
                          int first, uint64_t seed, int rank, int world);
/* After ttrain_synthetic_open: serve 8-bit batches instead (--input u8),
 * random H x W x 3 pixels drawn once and flips, in bk's host memory (so
 * a GPU backend's copy stream moves them as it moves a packed dataset's),
 * normalised with the ImageNet mean and std. 0, or nonzero after
 * TORUS_FAIL. */
int ttrain_synthetic_use_u8(ttrain_source *s, const tmodel_spec *m,
                            teng_backend *bk, uint64_t seed);

#endif
