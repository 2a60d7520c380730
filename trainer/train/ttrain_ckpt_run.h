/* ttrain_ckpt_run.h: a run's checkpoints across its ranks (prefix
 * ttrain_ckpt_run_), beside checkpoint.c, which reads and writes one file.
 *
 * Where the run starts: afresh under a new run id, or, for --resume and
 * --eval-only, from the newest checkpoint that loads, the same file on
 * every rank. Rank 0 picks it and broadcasts its name; every other rank
 * loads exactly that file or fails: no rank ever continues alone from
 * another step. A resumed run goes on under the checkpoint's run id
 * (rank 0's on every rank, as each rank names its own files by it,
 * ttrain_bn_stash.h), with the checkpoint's dynamic loss scale (checked
 * against this run's bounds: a file is hostile), each rank's own BN
 * statistics where they were saved at a stop, and, under --bucket-kb auto,
 * the fusion bucket size the checkpoint records (the buckets cut again
 * before the first step: a size kept afresh could round the sums
 * differently).
 *
 * Each checkpoint it writes: the ranks' BN statistics averaged and their
 * state checked equal, then rank 0 alone writes while the others wait
 * (ttrain_ckpt_beat.h); each rank's own statistics stay live when the run
 * goes on and are saved beside the file at a stop, so checkpoints change
 * nothing and resumes are bitwise.
 *
 * Built into torus-train (it links libtcomm). Errors: TORUS_FAIL codes,
 * the message in torus_error_msg() with the option or what failed in
 * front; notes and warnings go to the reporter (common/torus_report.h).
 * Rank 0's failure to find or write a checkpoint is said at once, through
 * the program's say, before the other ranks hear of it and end the job:
 * said is then set, and the program only ends the job. */
#ifndef TORUS_TRAINER_TRAIN_CKPT_RUN_H
#define TORUS_TRAINER_TRAIN_CKPT_RUN_H

#include "trainer/comm/tcomm.h"
#include "trainer/engine/teng.h"
#include "trainer/optim/topt.h"
#include "trainer/optim/topt_loss_scale.h"
#include "trainer/train/ttrain_bn_stash.h"
#include "trainer/train/ttrain_checkpoint.h"
#include "trainer/train/ttrain_exchange.h"
#include "trainer/train/ttrain_options.h"
#include "trainer/train/ttrain_source.h"
#include "trainer/train/ttrain_trace.h"

typedef struct {
    /* set by the caller before open */
    const ttrain_config *cfg;
    tcomm_t *comm; /* NULL with one process */
    int rank;
    int have_src; /* a packed dataset (its identity is recorded) */
    ttrain_source *src;
    teng_net *net;
    topt_sgd *opt;
    ttrain_exchange *ex;
    topt_loss_scale_mode ls_mode;
    const topt_loss_scale_config *ls_cfg;
    topt_loss_scale_state *ls; /* a dynamic scale goes on from the file's */
    ttrain_trace *trace;       /* may be NULL */
    /* The program's report of an error ("what: msg"), and its end of the
     * job from the write's heartbeat thread (ttrain_ckpt_beat.h). */
    void (*say)(const char *what, const char *msg);
    int (*fail)(const char *what, const char *msg);
    /* the module's */
    char *plan;            /* the configuration text stored in checkpoints */
    ttrain_ckpt_meta meta; /* what checkpoints record and resumes compare */
    ttrain_progress at;    /* where training starts, then the position */
    ttrain_bn_stash bn;    /* this rank's own BN statistics at a checkpoint */
    char path[1100];       /* the checkpoint loaded */
    int found;             /* one was loaded */
    int from_world;        /* the ranks that wrote it */
    int said;              /* the failure was said already */
} ttrain_ckpt_run;

/* The configuration text, the run id (rank 0's, broadcast) and what
 * checkpoints record. Collective. */
int ttrain_ckpt_run_open(ttrain_ckpt_run *r);
/* The checkpoint every rank agrees on, into net, opt and at (found: 0
 * when the folder holds none). Collective. */
int ttrain_ckpt_run_load(ttrain_ckpt_run *r);
/* After a load for training: the data source's position, the dropout
 * step, this rank's own BN statistics (when they fit; otherwise a
 * warning and the ranks' average). */
int ttrain_ckpt_run_restore(ttrain_ckpt_run *r);
/* Rank 0 removes what a write of this run that a crash cut short left
 * (a fresh run id has none), and says so. */
void ttrain_ckpt_run_clean(const ttrain_ckpt_run *r);
/* A checkpoint at position at (with at.ls the true loss scale). Collective.
 * stopping: a signal ends the run (own statistics saved); last: the run is
 * complete (nothing left to resume). */
int ttrain_ckpt_run_write(ttrain_ckpt_run *r, int stopping, int last);
void ttrain_ckpt_run_close(ttrain_ckpt_run *r);

#endif
