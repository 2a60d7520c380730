/* ttrain_diverge.h: torus-train's divergence rule on a finite loss (prefix
 * ttrain_diverge_, --diverge-loss and --diverge-points). A run whose loss
 * explodes far above where it started has diverged even while the loss
 * stays finite: it can sit at chance for its whole budget, and the
 * inf/nan rule (--max-nonfinite) never fires. The rule looks at the loss
 * of the global batch as the progress lines print it (the mean over the
 * applied steps since the last line), the one value of the loss that both
 * update paths have (the device step hands its loss back only there), and
 * stops the run once that loss is above the limit at `points` progress
 * points in a row: one noisy window passes. Off with limit 0. The count
 * lives in this process only: a resumed run counts afresh.
 * Plain C, no rank logic: the caller passes a loss every rank agrees on.
 * Errors: TORUS_FAIL (TTRAIN_EDIVERGED), the message in torus_error_msg()
 * with "training diverged" in front, as for the inf/nan rule. */
#ifndef TORUS_TRAINER_TRAIN_DIVERGE_H
#define TORUS_TRAINER_TRAIN_DIVERGE_H

#include <stdio.h>

typedef struct {
    /* set by the caller */
    double limit; /* --diverge-loss (0: off) */
    int points;   /* --diverge-points: progress points in a row */
    FILE *mf;     /* --metrics (may be NULL): the "diverged" record */
    /* the module's */
    int above;  /* progress points in a row above the limit so far */
    long first; /* the global step of the first of them */
} ttrain_diverge;

/* The rule is on (a limit was given). */
int ttrain_diverge_on(const ttrain_diverge *d);
/* The loss of the progress point at global step gstep (lr: its LR, for
 * the message). Above the limit (an infinite loss too) counts; at or
 * below it starts the count again; NaN (every step of the window skipped:
 * the inf/nan rule's case) leaves the count as it is. Returns 0 to go
 * on, or TTRAIN_EDIVERGED when this is the points-th in a row: then the
 * message names the steps, the loss and the limit, and the "diverged"
 * record (ttrain_metrics_diverged) is written first. */
int ttrain_diverge_check(ttrain_diverge *d, long gstep, double lr,
                         double loss);

#endif
