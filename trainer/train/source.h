/* source.h: where torus-train's batches come from (prefix ttrain_).
 *
 * The seam for the data pipeline: a source fills one local batch of
 * images (canonical NCHW floats, normalised) and labels per call. Today
 * there is the synthetic source; the packed-dataset iterator of the data
 * pipeline plugs in behind the same two calls. */
#ifndef TORUS_TRAINER_TRAIN_SOURCE_H
#define TORUS_TRAINER_TRAIN_SOURCE_H

#include <stdint.h>

#include "trainer/models/models.h"

typedef struct ttrain_source {
    /* Fills x (n images) and y (n labels); returns 0 or a message in err. */
    int (*next)(struct ttrain_source *s, float *x, int32_t *y, int n);
    void (*close)(struct ttrain_source *s);
    char err[256];
    void *impl;
} ttrain_source;

/* Synthetic data: a fixed pool of random images generated once (so a
 * benchmark measures training, not a random number generator) served
 * round robin, with labels spread over the classes. */
int ttrain_synthetic_open(ttrain_source *s, const tmodel_spec *m,
                          int max_batch, uint64_t seed);

#endif
