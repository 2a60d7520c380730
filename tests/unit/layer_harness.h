/* layer_harness.h: helpers for the trainer tests: a backend, deterministic
 * random fills, and the finite-difference gradient check of a whole net
 * against the engine's backward pass. */
#ifndef TORUS_TESTS_LAYER_HARNESS_H
#define TORUS_TESTS_LAYER_HARNESS_H

#include <check.h>
#include <stddef.h>

#include "trainer/engine/backend.h"
#include "trainer/engine/teng.h"

/* The oneDNN backend on 1 thread (aborts the test on failure). */
teng_backend *lh_backend(void);

/* Runs a suite and returns the process exit status. */
int lh_run(Suite *s);

/* Uniform in [lo, hi). */
void lh_fill(float *v, size_t n, unsigned seed, float lo, float hi);
/* Distinct values at least 0.05 apart and at least 0.025 from zero, in
 * random order: no ties for max pooling, no ReLU kinks within h = 0.01. */
void lh_fill_spaced(float *v, size_t n, unsigned seed);

/* Gradient check: L = sum(out * r) for a random r (or the net's loss if
 * out < 0; labels must be set). Compares dL/dparam for
 * every param and dL/dinput (if the net computes it) with central
 * differences at step h, on up to `samples` elements of each. Returns the
 * number of mismatches, |fd - an| > atol + rtol * |an|, and describes the
 * first one in msg. Samples at a kink (differences at h and h/2 disagree)
 * are skipped; more than a quarter of them skipped counts as a failure. */
int lh_gradcheck(teng_net *net, int out, const float *input, double h,
                 double atol, double rtol, int samples, char *msg,
                 size_t msglen);

#endif
