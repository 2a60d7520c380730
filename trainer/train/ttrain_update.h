/* ttrain_update.h: torus-train's update seam (prefix ttrain_update_): a
 * step's update, its skip decision for inf/nan gradients and the loss
 * scale, behind one small table with two implementations, chosen once by
 * ttrain_update_open:
 * - host: the host waits for the exchange's inf/nan count, decides, runs
 *   the optimizer (topt_sgd_step_scaled) and keeps the loss scale, the
 *   skips in a row and the progress window's loss itself;
 * - device: the device step (ttrain_dstep.h: on a backend that has it and
 *   unless TCUDA_DSTEP=0) queues all of that on the device with no host
 *   wait; the host reads what it decided only at ttrain_update_sync.
 * The training loop calls the same five functions in the same places on
 * both (begin, wait, apply, sync; describe once), so it never asks which
 * one runs. Built into torus-train (it waits for the gradient exchange).
 * Errors: TORUS_FAIL codes (TTRAIN_EDIVERGED past --max-nonfinite), the
 * message in torus_error_msg() with what failed in front ("optimizer",
 * "gradient exchange", "training diverged", "device step"). */
#ifndef TORUS_TRAINER_TRAIN_UPDATE_H
#define TORUS_TRAINER_TRAIN_UPDATE_H

#include <stdio.h>

#include "trainer/engine/teng.h"
#include "trainer/optim/topt.h"
#include "trainer/optim/topt_loss_scale.h"
#include "trainer/train/ttrain_dstep.h"
#include "trainer/train/ttrain_exchange.h"
#include "trainer/train/ttrain_step.h"

/* The implementation's table (update.c). */
typedef struct ttrain_update_ops ttrain_update_ops;

typedef struct {
    /* set by the caller before open */
    teng_net *net;
    ttrain_exchange *ex;
    topt_sgd *opt;
    ttrain_step *step;                    /* its graph may hold the update */
    topt_loss_scale_state *ls;            /* the host's copy */
    const topt_loss_scale_config *ls_cfg; /* --loss-scale, resolved */
    int dynamic;                          /* the scale changes */
    int rank;                             /* rank 0 warns of skips */
    int max_nonfinite;                    /* --max-nonfinite */
    FILE *mf; /* --metrics (may be NULL): the "diverged" record */
    /* the module's */
    const ttrain_update_ops *ops;
    ttrain_dstep ds;  /* the device implementation's state */
    int skipped;      /* skips in a row (the device's, as last read) */
    double loss_sum;  /* host: the window's loss of applied steps */
    int applied;      /* host: the window's applied steps */
} ttrain_update;

/* Picks the implementation, once: the device step where it can run, else
 * the host's. Call after the checkpoint is restored (*ls is its state). */
int ttrain_update_open(ttrain_update *u);
/* The device implementation ran (for the summary's wording only). */
int ttrain_update_on_device(const ttrain_update *u);
/* Rank 0's banner line about the update (nothing on the host). */
void ttrain_update_describe(const ttrain_update *u, FILE *f);

/* Before a step's forward at learning rate lr and loss scale scale:
 * *bwd_scale is the scale the step's backward is keyed and run with (0:
 * the device's own, so one step graph serves any scale). */
int ttrain_update_begin(ttrain_update *u, double lr, double scale,
                        double *bwd_scale);
/* After the backward: the end of the step's gradient exchange (replayed:
 * a step graph ran the step and the exchange's device end with it). */
int ttrain_update_wait(ttrain_update *u, int replayed);
/* The step's update at lr from gradients that are the loss scale times
 * the true ones (the update divides it out), or its skip: a step whose
 * summed gradients hold inf/nan is skipped on every rank alike and backs
 * the scale off; too many skips in a row end the run. gstep: the global
 * steps done before this one. */
int ttrain_update_apply(ttrain_update *u, long gstep, double lr);
/* The host's view made true: the loss scale in *ls and the skips in a
 * row (device: one wait for its last decision, under the exchange's
 * deadline; skips are warned here, late). With loss_sum and applied not
 * NULL, also the progress window's loss sum and applied steps, and a new
 * window starts. gstep and lr name the moment in messages. */
int ttrain_update_sync(ttrain_update *u, long gstep, double lr,
                       double *loss_sum, int *applied);

#endif
