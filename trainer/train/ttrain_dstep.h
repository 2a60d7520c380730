/* ttrain_dstep.h: torus-train's device step (prefix ttrain_dstep_): on a
 * backend that has it (teng_net_dstep_*, cuda) and unless TCUDA_DSTEP=0,
 * the update, the skip decision for inf/nan gradients and the loss scale
 * run on the device with no host wait. The host reads what the device
 * decided only when it needs a host value (a progress line, a checkpoint,
 * the summary): ttrain_dstep_sync. Built into torus-train (it waits for
 * the gradient exchange). Errors: TORUS_FAIL codes (TTRAIN_EDIVERGED past
 * --max-nonfinite), the message in torus_error_msg() with what failed in
 * front ("device step", "gradient exchange", "training diverged"). */
#ifndef TORUS_TRAINER_TRAIN_DSTEP_H
#define TORUS_TRAINER_TRAIN_DSTEP_H

#include "trainer/engine/teng.h"
#include "trainer/optim/topt.h"
#include "trainer/optim/topt_loss_scale.h"
#include "trainer/train/ttrain_exchange.h"

typedef struct {
    /* set by the caller before open */
    teng_net *net;
    ttrain_exchange *ex;
    topt_sgd *opt;
    topt_loss_scale_state *ls; /* the host's copy, brought up to date */
    int rank;                  /* rank 0 warns of skips */
    int max_nonfinite;         /* --max-nonfinite */
    /* the module's */
    int on;                /* the device step runs */
    teng_dstep_state seen; /* as last read */
} ttrain_dstep;

/* Opens the device step where it can run (else leaves on 0) from the
 * loss scale's configuration c (dynamic: it changes), *ls and the skips
 * in a row so far. */
int ttrain_dstep_open(ttrain_dstep *d, const topt_loss_scale_config *c,
                      int dynamic, int skipped);
/* What the device decided since the last read (one wait for its last
 * queued decision, under the exchange's deadline): the loss scale into
 * *ls, the optimizer's step count and last lr, the skips in a row into
 * *skipped, and, for a progress window (loss_sum and applied not NULL),
 * its loss sum and applied steps (a new window starts on the device).
 * Skips are warned here, late (rank 0); gstep and lr name the moment. */
int ttrain_dstep_sync(ttrain_dstep *d, long gstep, double lr, int *skipped,
                      double *loss_sum, int *applied);

#endif
