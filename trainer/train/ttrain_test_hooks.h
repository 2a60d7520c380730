/* ttrain_test_hooks.h: fault injection for the tests, read from the
 * environment, and compiled out of release builds (configure
 * --disable-test-hooks, as the Debian package is built): there every call
 * does nothing, whatever the environment says.
 * - TTRAIN_TEST_SLEEP=WHERE:RANK:STEP:S makes rank RANK sleep S seconds
 *   (at most an hour) at global step STEP (0: every step), WHERE being
 *   "ckpt" (before writing a checkpoint: an fsync to a slow shared file
 *   system), "step" (before the forward pass: a stalled rank) or "start"
 *   (once, before the model is built: a slow start-up, STEP 0);
 * - TTRAIN_TEST_OVERFLOW=RANK:STEP makes rank RANK's gradients overflow
 *   at global step STEP (0: every step);
 * - TTRAIN_TEST_SERVED=DIR makes each rank append a line "EPOCH STEP ID..."
 *   for every training batch a packed dataset serves it (the sample ids)
 *   to DIR/served-RANK.txt: the tests check that each sample is served
 *   once per epoch, and in the same global batch, on any number of
 *   ranks. */
#ifndef TORUS_TRAINER_TRAIN_TEST_HOOKS_H
#define TORUS_TRAINER_TRAIN_TEST_HOOKS_H

#include <stdint.h>

void ttrain_test_sleep(const char *where, int rank, long step);
/* 1 when this rank's gradients are to overflow at this step. */
int ttrain_test_overflow(int rank, long step);
/* Records the n sample ids of one training batch (TTRAIN_TEST_SERVED). */
void ttrain_test_served(int rank, uint64_t epoch, uint64_t step,
                        const uint64_t *ids, int n);

#endif
