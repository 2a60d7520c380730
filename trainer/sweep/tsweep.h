/* tsweep.h: the batch-size sweep (prefix tsweep_), the library behind
 * torus-sweep. A sweep lives in one directory:
 *   plan          the grid of tasks, one per (global batch, recipe, LR
 *                 trial), and the settings every task shares (text, written
 *                 by tsweep_plan_write, read back by tsweep_plan_read);
 *   results.jsonl one JSON line per finished task: steps and time to the
 *                 target test top-1, or that the budget ran out first;
 *   work/         per task: torus-train's metrics, checkpoints, attempts.
 * Steps-to-target against the batch then shows the three regimes of
 * Shallue et al. (2019): perfect scaling, diminishing returns, maximal
 * data parallelism; tsweep_regimes_find() places the bends.
 *
 * Everything read from a file is hostile: errors are TORUS_FAIL messages
 * that name the file and line. */
#ifndef TORUS_TRAINER_SWEEP_TSWEEP_H
#define TORUS_TRAINER_SWEEP_TSWEEP_H

#include <stdio.h>

#define TSWEEP_MAX_BATCHES 32
#define TSWEEP_MAX_RECIPES 8
#define TSWEEP_MAX_TRIALS  9
#define TSWEEP_MAX_TASKS \
    (TSWEEP_MAX_BATCHES * TSWEEP_MAX_RECIPES * TSWEEP_MAX_TRIALS)
#define TSWEEP_NAME_LEN    32
#define TSWEEP_ARGS_LEN    1024
#define TSWEEP_LINE_LEN    4096

typedef struct {
    char name[TSWEEP_NAME_LEN]; /* [A-Za-z0-9_.+-], the curve's label */
    char args[TSWEEP_ARGS_LEN]; /* its torus-train options */
    double lr; /* its own "--lr X" among them (0: the plan's --lr) */
} tsweep_recipe;

typedef struct {
    int id, batch, recipe, trial;
    double lr; /* --lr: the base LR at --ref-batch (torus-train scales it) */
} tsweep_task;

typedef struct {
    double target;     /* test top-1 in percent */
    double base_lr;    /* linear-scaling base LR at ref_batch */
    int ref_batch;     /* reference batch of the linear scaling rule */
    int trials;        /* LR trials per (batch, recipe), odd or even */
    double lr_spread;  /* factor between neighbouring trials */
    int epochs;        /* the budget: torus-train's --epochs */
    long max_steps;    /* a step cap per task (0: none) */
    long min_steps;    /* a budget floor in steps (0: none), which needs */
    long dataset_size; /* the training images per epoch (0: unknown) */
    long eval_images;  /* evaluate every ~this many training images */
    double diverge_loss; /* every task's torus-train --diverge-loss (0:
                          * off): a blown-up task ends as diverged */
    char train[TSWEEP_ARGS_LEN];    /* options every task shares */
    char launcher[TSWEEP_ARGS_LEN]; /* prefix such as "srun --mpi=pmix" */
    int nbatches;
    int batch[TSWEEP_MAX_BATCHES]; /* increasing */
    int nrecipes;
    tsweep_recipe recipe[TSWEEP_MAX_RECIPES];
    int ntasks;
    tsweep_task task[TSWEEP_MAX_TASKS];
} tsweep_plan;

/* One finished task (a results line; "diverged" only where it is 1, so
 * the other lines read as they always did). */
typedef struct {
    int task, batch, trial;
    char recipe[TSWEEP_NAME_LEN];
    double lr;
    int reached; /* the target top-1 was reached */
    int diverged; /* torus-train stopped it as diverged (not reached) */
    long steps;  /* global steps to the target (or run, when not reached) */
    double time; /* torus-train wall seconds over all attempts */
    double top1; /* top-1 at the target, or the best seen */
    int line;    /* where it was read */
} tsweep_result;

/* Error codes (TORUS_FAIL). */
enum {
    TSWEEP_OK = 0,
    TSWEEP_EIO = 1,
    TSWEEP_EPARSE = 2,
    TSWEEP_EPLAN = 3,
    TSWEEP_STOPPED = 4, /* a task's torus-train was stopped by a signal */
};

/* ---- plan.c ---- */
/* Defaults: target 0 (must be set), LR 0.1 at 256, 3 trials x2 apart,
 * 10 epochs, evaluation every 10000 images. */
void tsweep_plan_defaults(tsweep_plan *p);
/* Checks the settings and expands the grid into p->task (ids in order
 * batch, recipe, trial). */
int tsweep_plan_expand(tsweep_plan *p);
int tsweep_plan_write(const tsweep_plan *p, const char *path);
int tsweep_plan_read(tsweep_plan *p, const char *path);
/* Parses "32,64,128" or "32:8192" (doubling) into p->batch. */
int tsweep_parse_batches(tsweep_plan *p, const char *s);
/* Adds "NAME=ARGS" as a recipe; an "--lr X" in ARGS centres its LR grid
 * on X instead of the plan's --lr. */
int tsweep_add_recipe(tsweep_plan *p, const char *spec);
/* 1 when LRs a and b are one task's LR: equal to 1e-9 of b (a results
 * line, a plan read back, printed with 17 digits). */
int tsweep_lr_same(double a, double b);
/* The budget of a task at batch b in epochs (torus-train's --epochs):
 * --epochs, or more where --min-steps steps take more epochs at b (an
 * epoch being dataset_size / b steps, the last partial batch dropped). */
int tsweep_task_epochs(const tsweep_plan *p, int batch);
/* Global steps between evaluations for batch b (>= 1). */
long tsweep_eval_every(const tsweep_plan *p, int batch);

/* ---- results.c ---- */
/* Reads every line of path (a missing file is an empty one) and checks it
 * against the plan: *out (malloc'd, *n entries). */
int tsweep_results_read(const char *path, const tsweep_plan *p,
                        tsweep_result **out, int *n);
/* Appends one line under an exclusive lock (array tasks finish at once). */
int tsweep_results_append(const char *path, const tsweep_result *r);
/* The result of task id, or NULL. */
const tsweep_result *tsweep_results_find(const tsweep_result *r, int n, int id);

/* ---- run.c ---- */
/* Runs task id of the plan in sweep directory dir with the torus-train
 * program train (launched through p->launcher), unless the results hold
 * it already; its lines (the command, the outcome, a skip) go to out, the
 * program's stream. Returns 0 (done, now or before), TSWEEP_STOPPED when
 * torus-train was stopped by a signal after writing its checkpoint (run
 * again: it resumes), or another code with the error recorded. */
int tsweep_run_task(const tsweep_plan *p, const char *dir, int id,
                    const char *train, FILE *out);

/* Re-reads the evaluations of finished task r->task (DIR/work/task-ID.jsonl)
 * at a lower target top-1 (0 < target <= the plan's; the tasks stopped at
 * the plan's): r becomes the first evaluation at or above it (reached,
 * global step, top-1, the time of that evaluation in its torus-train run),
 * or not reached with the best top-1 seen. */
int tsweep_task_at(const tsweep_plan *p, const char *dir, double target,
                   tsweep_result *r);

/* ---- outcome.c ---- */
/* What the metrics file path says of a task, into r (reached, steps,
 * top-1; the time too at target >= 0): target < 0, torus-train's
 * "target_top1" record; target >= 0, the first evaluation at or above it
 * (see tsweep_task_at). A bad line is an error naming path:line. */
int tsweep_outcome(const char *path, double target, tsweep_result *r);
/* *diverged = 1 when torus-train recorded that the run diverged. */
int tsweep_diverged(const char *path, int *diverged);
/* Appends {"sweep_time_before":before} to the metrics file path before an
 * attempt (evaluations' times restart at 0 in every torus-train run). */
int tsweep_mark(const char *path, double before);

/* ---- regime.c ---- */
/* Where a steps-to-target curve leaves perfect scaling and where it stops
 * gaining. Points are in increasing batch order; steps <= 0 or not finite
 * mean the target was not reached at that batch. The reference is the
 * first reached point: perfect(i) = steps[ref] * batch[ref] / batch[i].
 *   leave: the first point after ref whose steps exceed tol * perfect (or
 *          that did not reach the target); perfect scaling holds up to
 *          the point before it;
 *   stop:  the last point that still gained: the first reached point
 *          that no larger batch beats, a larger batch beating it when it
 *          cuts the steps by at least (batch ratio)^gain_min (a miss
 *          never does); the last point is none (still gaining).
 * All are indices, -1 when the sweep shows no such point (ref -1: no
 * point reached the target). */
typedef struct {
    int ref, leave, last_perfect, stop;
} tsweep_regimes;

#define TSWEEP_PERFECT_TOL 1.25
#define TSWEEP_GAIN_MIN    0.1

void tsweep_regimes_find(const int *batch, const double *steps, int n,
                         double tol, double gain_min, tsweep_regimes *out);

/* ---- merge.c ---- */
/* Adds sweep part b (its plan, its results rb[nb], read from bdir) to
 * the parts before it (a, *ra, *na; from[i] the directory that task
 * a->task[i] came from, kept in step, TSWEEP_MAX_TASKS long): the plans
 * must agree in every setting but the batches, the LRs (lr, trials,
 * lr-spread, a recipe's "--lr X") and the launcher, and plan no task
 * (batch, recipe, LR) twice. a becomes the plan of every task of both,
 * sorted by batch, recipe and LR (ids and trials renumbered), and *ra
 * (realloc'd) every result of both, renumbered to it. Errors name the
 * directories concerned; a refused part leaves a as it was. Results that
 * tsweep_task_at re-reads must be re-read before the merge (it finds a
 * task's metrics by the id in its own part). Not reentrant (a static
 * plan; the sweep runs one thread). */
int tsweep_merge(tsweep_plan *a, const char **from, tsweep_result **ra,
                 int *na, const tsweep_plan *b, const tsweep_result *rb,
                 int nb, const char *bdir);

/* ---- report.c ---- */
/* The best trial per (recipe, batch): steps[r * nbatches + b] (0 when no
 * trial reached the target) and which result it came from (NULL: none);
 * on equal steps the one first in r (the results file's order; merged
 * parts in the order given). */
typedef struct {
    double steps[TSWEEP_MAX_RECIPES * TSWEEP_MAX_BATCHES];
    const tsweep_result *best[TSWEEP_MAX_RECIPES * TSWEEP_MAX_BATCHES];
    int finished[TSWEEP_MAX_RECIPES * TSWEEP_MAX_BATCHES]; /* trials */
    int planned[TSWEEP_MAX_RECIPES * TSWEEP_MAX_BATCHES]; /* trials in the
                                      * plan (a merged one: per point) */
    tsweep_regimes reg[TSWEEP_MAX_RECIPES];
} tsweep_summary;

void tsweep_summarize(const tsweep_plan *p, const tsweep_result *r, int n,
                      double tol, double gain_min, tsweep_summary *s);
void tsweep_print_table(const tsweep_plan *p, const tsweep_summary *s, FILE *f);
/* Draws the PNG with gnuplot (log-log: steps to target against batch, a
 * curve per recipe, its perfect-scaling line and marks). */
int tsweep_plot(const tsweep_plan *p, const tsweep_summary *s, const char *png,
                int width, int height, const char *title);

#endif
