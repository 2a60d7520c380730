/* trainer/train/ttrain_ckpt_schema.h: the schema half of checkpoints
 * (ckpt_schema.c), for the I/O half (checkpoint.c) and nothing else: the
 * files' names and the checks of the values a file records. Public
 * functions of the schema (ttrain_ckpt_new_run, ttrain_ckpt_clean,
 * ttrain_ckpt_check) are in ttrain_checkpoint.h.
 * Errors: TORUS_FAIL with TTRAIN_CKPT_EBAD, the message naming the value. */
#ifndef TORUS_TTRAIN_CKPT_SCHEMA_H
#define TORUS_TTRAIN_CKPT_SCHEMA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "trainer/train/ttrain_checkpoint.h"

/* One checkpoint file of a directory. */
typedef struct {
    long step;
    char run[TTRAIN_RUN_LEN];
    struct timespec mtime;
} ttrain_ckpt_entry;

/* Parses "ckpt-<step>-<run>.h5" exactly; 0 or -1. */
int ttrain_ckpt_parse_name(const char *name, long *step, char *run);
/* The checkpoints in dir (only run's unless run is NULL), highest step
 * first: the count (0 when dir does not exist or on no memory) and a
 * malloc'd array in *out. Regular files only, unless any_kind. */
int ttrain_ckpt_list(const char *dir, const char *run, int any_kind,
                     ttrain_ckpt_entry **out);
/* The file's name (tdata_ckpt_name's): 0, or TTRAIN_CKPT_EBAD. */
int ttrain_ckpt_name(char *out, size_t n, const char *dir, long step,
                     const char *run);
/* After step was saved: keep the run's newest `keep` up to step; remove
 * the run's files of later steps. */
void ttrain_ckpt_prune(const char *dir, const char *run, long step, int keep);

/* Optimizer and skipped steps within the global steps, the previous LR
 * finite and consistent with them. */
int ttrain_ckpt_check_counts(const ttrain_progress *p, long opt_steps,
                             double prev_lr);
/* The position (epoch, step, global step) and the samples served over
 * all ranks against plan s. */
int ttrain_ckpt_check_plan(const ttrain_progress *p, int64_t samples,
                           const topt_schedule *s);

#endif
