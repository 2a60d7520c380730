/* ttrain_checkpoint.h: torus-train checkpoints (prefix ttrain_ckpt_).
 *
 * One HDF5 file per checkpoint, DIR/ckpt-<global step>-<run>.h5 (the name
 * is tdata_ckpt_name's, data/format/tdata_ckpt.h, which the Python
 * package's writers call too), holding
 * every param, its momentum and the BN running statistics in canonical
 * layout (so a checkpoint outlives a change of backend or thread count),
 * the training position (epoch, step, samples served, dropout step,
 * previous LR for the momentum correction, the loss scale's mode and
 * state), the resolved configuration as
 * text (attributes in HDF5's dense storage, so that a plan of any number
 * of epochs fits), and what the run was trained under (ttrain_ckpt_meta):
 * the run id,
 * the model, the ranks, the global batch schedule, the training data and
 * the wire, and the fusion bucket size (not compared). Datasets carry
 * HDF5's Fletcher32 checksum, so a damaged file fails to load instead of
 * loading garbage; every attribute is checked for type, rank and size
 * before it is read.
 *
 * Runs: a fresh run draws a random run id; a resumed run carries on the id
 * of the checkpoint it resumed from. Several runs may share a directory:
 * a run prunes and cleans up only files with its own id, and --resume
 * continues the run whose checkpoint was written last.
 *
 * Files are written atomically: a temporary name unique to the writer
 * (.ckpt-<step>-<run>.h5.<pid>-<rank>-<random>.tmp), fsync, rename, fsync
 * of the directory (its failure fails the save). After a save the run keeps
 * its newest `keep` checkpoints up to the one just written, which is never
 * removed; its files of later steps (left from before a resume that fell
 * back past them because they did not load) are removed.
 *
 * Configuration check (ttrain_ckpt_check): on --resume the model, the
 * global batch schedule (stages and samples per epoch), the training
 * data's identity and, where both runs exchange gradients, the wire must
 * match. A change of ranks is allowed when the schedule matches: every
 * step then trains on the same global batch and the summed gradient is the
 * same up to summation order and wire rounding; what changes is the batch
 * each rank's BN layers normalise over (global batch / ranks) and the
 * dropout masks, which the note says. Another loss-scale mode is allowed
 * too (scaling changes no result unless fp16 under- or overflows; the note
 * says the scale starts afresh). On --eval-only only the model must
 * match (evaluation sums exact counts over any ranks); other training data
 * is a warning.
 *
 * Trust (ttrain_ckpt_load): a file is opened only as a regular file
 * (O_NONBLOCK and fstat before HDF5 sees it: a FIFO, device or socket is
 * refused by name, never waited on). A checkpoint loads only when it is
 * consistent: its run id and global step are those of its file name; every
 * param, momentum and BN statistic passes tdata_ckpt_tensor (hard links
 * only, no external or virtual storage, no filter but Fletcher32, float32
 * of the net's count, all its bytes in the file, finite, a BN running
 * variance >= 0: the one validation the Python package runs too); the
 * counters agree with one
 * another (optimizer steps and skipped steps within the global step, the
 * previous LR finite, >= 0, 0 before the first optimizer step and
 * positive after the second: a warmup from 0 gives a first step at LR 0)
 * and, for a resume, with this run's plan
 * (want->plan): global step = the steps of the epochs before plus the
 * step, samples = the global batches of those steps; a recorded loss
 * scale is finite in [1, 2^24]. Anything else refuses the file with its
 * reason, and a resume falls back to the run's next older checkpoint.
 */
#ifndef TORUS_TRAINER_TRAIN_CHECKPOINT_H
#define TORUS_TRAINER_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/engine/teng.h"
#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"
#include "trainer/optim/topt_loss_scale.h"

/* The module's error codes (TORUS_FAIL's, returned): a checkpoint that does
 * not load or cannot be written or read (damage, a full disk, a forged
 * counter: a resume falls back to the next older file of the run), and one
 * of another configuration (the run's options differ: no fallback). */
enum { TTRAIN_CKPT_EBAD = -1, TTRAIN_CKPT_ECONFIG = -2 };

typedef struct {
    int epoch;                /* the epoch to continue in */
    long step;                /* the next step within that epoch */
    long global_step;         /* steps done */
    uint64_t samples;         /* samples served over all ranks */
    uint64_t dropout_step;    /* the engine's step counter */
    topt_loss_scale_state ls; /* the loss scale's state; as loaded, not yet
                               * checked (topt_loss_scale_restore does);
                               * scale 0: the file records none */
} ttrain_progress;

#define TTRAIN_RUN_LEN 9 /* 8 hex digits and the NUL */

/* What a checkpoint was trained under. */
typedef struct {
    char run[TTRAIN_RUN_LEN]; /* the run id */
    char model[192];          /* model and shape, e.g. "tiny-cnn, 3x12x12 .." */
    int world;                /* ranks */
    char batch[256];          /* "0:16,1:32 over 64 samples per epoch" */
    char data[512];           /* where the data came from (shown only) */
    char data_id[128];        /* the training data's identity (compared) */
    char wire[8];             /* fp16, bf16, fp32 */
    char loss_scale[16];      /* off, static, dynamic; "": not recorded */
    /* The fusion bucket size the run used, KiB (0: one rank, or not
     * recorded); not compared: a resume with --bucket-kb auto takes it
     * (ttrain_ckpt_run.h). */
    int bucket_kb;
    /* The order a packed dataset was served in: 1, the global-block order
     * (any number of ranks serves the same batches); 0, each rank its own
     * slice (files written before it). Written as 1, not compared: a
     * resume says what an old file's position costs (ckpt_run.c). */
    int data_order;
    /* Only in what this run wants: the plan a resumed position must fit
     * (NULL: not checked); NULL in what a file records. */
    const topt_schedule *plan;
} ttrain_ckpt_meta;

/* All of m but its run id (ckpt_meta.c): the model and the global batch
 * schedule as text, world, the wire, the loss-scale mode's name, and the
 * training data (data: a packed dataset's folder, "" for synthetic data)
 * by its sample count and the bytes of its index. Returns 0,
 * TTRAIN_CKPT_ECONFIG when the schedule is too long to record, or
 * TTRAIN_CKPT_EBAD when the index cannot be read (the file named). */
int ttrain_ckpt_meta_fill(ttrain_ckpt_meta *m, const tmodel_spec *model,
                          const topt_schedule *sched, int world,
                          const char *wire, const char *loss_scale,
                          const char *data);

/* A fresh random run id into run. */
void ttrain_ckpt_new_run(char run[TTRAIN_RUN_LEN]);

/* Identity of the file at path: its size and a 64-bit FNV-1a hash of its
 * bytes, as text in id ("N bytes, fnv1a64 H"). Files above max_bytes are
 * refused. Returns 0, or -1 after TORUS_FAIL naming the file. */
int ttrain_ckpt_file_id(const char *path, uint64_t max_bytes, char *id,
                        size_t idlen);

/* Writes a checkpoint of net, opt and p into dir (created if missing) as
 * rank `rank`, then prunes the run's files (see above). Returns 0, or -1
 * after TORUS_FAIL naming the file (nothing is pruned then). */
int ttrain_ckpt_save(const char *dir, int keep, int rank,
                     const ttrain_ckpt_meta *m, teng_net *net, topt_sgd *opt,
                     const ttrain_progress *p, const char *config_text);

/* Compares a checkpoint's meta `got` with this run's `want` (see above;
 * has_bn: the model has BN layers). Returns 0 (note set to a line to show
 * when the ranks or the data changed, else ""), or -1 after TORUS_FAIL
 * saying every difference. */
int ttrain_ckpt_check(const ttrain_ckpt_meta *got, const ttrain_ckpt_meta *want,
                      int eval_only, int has_bn, char *note, size_t notelen);

/* Loads one checkpoint into net, opt and p after checking its meta against
 * want (ttrain_ckpt_check; got receives it). p->samples counts all
 * ranks, on any number of them. Returns 0, -1 when it does not load (damaged), or -2
 * when it belongs to another configuration; the reason is then in
 * torus_error_msg() (common/torus_error.h). */
int ttrain_ckpt_load(const char *path, const ttrain_ckpt_meta *want,
                     int eval_only, teng_net *net, topt_sgd *opt,
                     ttrain_progress *p, ttrain_ckpt_meta *got, char *note,
                     size_t notelen);

/* Loads the newest checkpoint of dir's latest run (the run of the file
 * written last) that loads, warning on stderr about each newer one of that
 * run that does not; name receives its file name (no directory). Files
 * named for a run none of whose files reads as that run's checkpoint
 * (junk, or another run's file renamed) do not make a run: the next run
 * by time is taken, with a warning. Never another run's file once one of
 * the run's own reads as its own. Returns 0, 1 when dir holds no
 * checkpoint, -1 when none of the run's loads, or -2 when one belongs to
 * another configuration (torus_error_msg() says why, naming the file). */
int ttrain_ckpt_load_latest(const char *dir, const ttrain_ckpt_meta *want,
                            int eval_only, teng_net *net, topt_sgd *opt,
                            ttrain_progress *p, ttrain_ckpt_meta *got,
                            char *name, size_t namelen, char *note,
                            size_t notelen);

/* Opens path for reading only if it is a regular file: O_NONBLOCK (a
 * FIFO's open does not wait for a writer), then fstat. Returns the
 * descriptor (blocking again, close-on-exec), or -1 after TORUS_FAIL
 * naming the file and what it is ("'x' is a FIFO, not a regular file"). */
int ttrain_ckpt_open_regular(const char *path);

/* Removes the temporary files that writers of run left in dir (a crash
 * during a save). Returns how many. */
int ttrain_ckpt_clean(const char *dir, const char *run);

#endif
