/* ttrain_metrics.h: torus-train's --metrics file (prefix ttrain_metrics_):
 * one JSON object per line, appended by rank 0 alone and flushed record by
 * record, so that a sweep (trainer/sweep/run.c) reads a run that is still
 * going or that crashed. The records: a progress line's; an evaluation's;
 * "target_top1" when --target-top1 is reached; "diverged" when the run
 * ends on inf/nan gradients or a loss past --diverge-loss (a record a
 * sweep can tell from a crash).
 * A run resumed from a checkpoint first drops the records past it
 * (ttrain_metrics_trim), so the file holds each global step once.
 * Every call but open and trim takes a NULL file (no --metrics, or another rank)
 * and then does nothing. Errors: TORUS_FAIL (TTRAIN_EIO), the message in
 * torus_error_msg(). */
#ifndef TORUS_TRAINER_TRAIN_METRICS_H
#define TORUS_TRAINER_TRAIN_METRICS_H

#include <stdio.h>

/* *out: path opened for appending on rank 0, else NULL (path "": none). */
int ttrain_metrics_open(const char *path, int rank, FILE **out);

/* On resuming at global step `at`: drops path's records whose global_step
 * is past it (the run that stopped after that checkpoint recorded steps
 * that are trained again), counted in *dropped. The kept lines stay byte
 * for byte; they go to a new file of a unique name beside the file
 * (FILE.trim.XXXXXX, FILE being path with its symlinks resolved), which
 * is renamed over FILE, and only when something was dropped. A symlinked
 * path stays a link: its target is trimmed.
 * Records without a global_step are kept. A line
 * that is not a JSON object, or a global_step that is not an integer >= 0,
 * is TTRAIN_EFORMAT naming path:line, and path is left as it was. A
 * missing file is no error. Errors: TTRAIN_EFORMAT, TTRAIN_EIO,
 * TTRAIN_ENOMEM. */
int ttrain_metrics_trim(const char *path, long at, long *dropped);

/* A progress line: the window's throughput, loss (not finite: every step
 * was skipped; written as null, which JSON has for NaN), learning rate,
 * global batch and the shares of the window spent waiting. */
typedef struct {
    int epoch;
    long step, global_step;
    double images_per_s, loss, lr;
    int global_batch;
    double data_wait, comm_wait;
} ttrain_metrics_progress;

void ttrain_metrics_step(FILE *f, const ttrain_metrics_progress *p);
/* An evaluation (top-1 and top-5 in %, seconds into the run). */
void ttrain_metrics_eval(FILE *f, int epoch, long gstep, double top1,
                         double top5, double loss, double t);
void ttrain_metrics_target(FILE *f, double target, long gstep, double top1,
                           double t);
void ttrain_metrics_diverged(FILE *f, long gstep);
void ttrain_metrics_close(FILE *f);

#endif
