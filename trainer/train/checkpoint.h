/* checkpoint.h: torus-train checkpoints (prefix ttrain_ckpt_).
 *
 * One HDF5 file per checkpoint, DIR/ckpt-<global step>.h5, holding every
 * param, its momentum and the BN running statistics in canonical layout
 * (so a checkpoint outlives a change of backend or thread count), the
 * training position (epoch, step, samples served, dropout step, previous
 * LR for the momentum correction) and the resolved configuration as text.
 * Datasets carry HDF5's Fletcher32 checksum, so a damaged file fails to
 * load instead of loading garbage. Files are written atomically (a
 * temporary name, fsync, rename, fsync of the directory) and only the
 * newest `keep` are kept. Loading the newest falls back to older ones,
 * with a warning, when a file does not load.
 */
#ifndef TORUS_TRAINER_TRAIN_CHECKPOINT_H
#define TORUS_TRAINER_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/engine/engine.h"
#include "trainer/optim/optim.h"

typedef struct {
    int epoch;             /* the epoch to continue in */
    long step;             /* the next step within that epoch */
    long global_step;      /* steps done */
    uint64_t samples;      /* samples the data source has served */
    uint64_t dropout_step; /* the engine's step counter */
} ttrain_progress;

/* Writes a checkpoint of net, opt and p into dir (created if missing),
 * then removes all but the newest keep. Returns 0, or -1 with err set. */
int ttrain_ckpt_save(const char *dir, int keep, teng_net *net, topt_sgd *opt,
                     const ttrain_progress *p, const char *model,
                     const char *config_text, char *err, size_t errlen);

/* Loads one checkpoint into net, opt and p; model must match. */
int ttrain_ckpt_load(const char *path, teng_net *net, topt_sgd *opt,
                     ttrain_progress *p, const char *model, char *err,
                     size_t errlen);

/* Loads the newest checkpoint of dir that loads, warning on stderr about
 * each newer one that does not. Returns 0 (path set), 1 when dir holds no
 * checkpoint, or -1 when none of them loads (err set). */
int ttrain_ckpt_load_latest(const char *dir, teng_net *net, topt_sgd *opt,
                            ttrain_progress *p, const char *model, char *path,
                            size_t pathlen, char *err, size_t errlen);

#endif
