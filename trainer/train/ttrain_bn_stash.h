/* ttrain_bn_stash.h: each rank's own BN running statistics around a
 * checkpoint (prefix ttrain_bn_stash_). A checkpoint holds the ranks'
 * average, one model; but between evaluations every rank keeps the
 * running statistics of its own batches, so averaging them in place at a
 * checkpoint would make a run that checkpoints differ, in the last bits,
 * from one that does not, and a resumed run from an uninterrupted one.
 * torus-train therefore takes its own statistics before the average and
 * puts them back after it when training goes on; at a stop (a signal) it
 * also saves them to DIR/bn-RUN-rRANK.f32, which a resume at that step
 * with the same number of ranks loads back, so the resumed run continues
 * bit for bit. */
#ifndef TORUS_TRAINER_TRAIN_BN_STASH_H
#define TORUS_TRAINER_TRAIN_BN_STASH_H

#include <stddef.h>

#include "trainer/engine/teng.h"

typedef struct {
    float *v; /* every statistics vector, in order */
    size_t n; /* floats in v */
} ttrain_bn_stash;

/* Copy the net's statistics into the stash (allocated on first use).
 * 0, or nonzero with the message in torus_error_msg(). */
int ttrain_bn_stash_take(ttrain_bn_stash *s, teng_net *net);
/* Write the stash back into the net. 0 or nonzero (message). */
int ttrain_bn_stash_put(const ttrain_bn_stash *s, teng_net *net);
/* Save the stash of RANK of WORLD at global step STEP of run RUN in DIR,
 * durably (temporary name, fsync, rename). 0 or nonzero (message). */
int ttrain_bn_stash_save(const ttrain_bn_stash *s, const char *dir,
                         const char *run, int rank, int world, long step);
/* Load this rank's saved statistics into the net: 0 loaded; 1 none that
 * fits (no file, or one of another step, number of ranks or size); -1 a
 * damaged file (message names it). The file is checked (size, header,
 * CRC32C) before anything is written into the net. */
int ttrain_bn_stash_load(ttrain_bn_stash *s, teng_net *net, const char *dir,
                         const char *run, int rank, int world, long step);
/* Remove this rank's file of RUN (the run ended; nothing to resume). */
void ttrain_bn_stash_remove(const char *dir, const char *run, int rank);
void ttrain_bn_stash_free(ttrain_bn_stash *s);

#endif
