/* ttrain_tdata_source.h: torus-train's packed-dataset source (prefix
 * ttrain_tdata_).
 *
 * A torus-pack directory holds a train split and a test split
 * (train-index.txt, test-index.txt). Training batches come from libtdata's
 * prefetching loader (this rank's slice of each epoch's global
 * permutation, random crop + flip, normalised with the index's mean/std)
 * behind the ttrain_source interface, without a copy (as float batches, or
 * as 8-bit ones that the backend normalises and mirrors: the GPU input
 * path). Evaluation runs this
 * rank's slice of the test split in order and counts top-1/top-5 hits;
 * the caller reduces the counts across ranks. */
#ifndef TORUS_TRAINER_TRAIN_TDATA_SOURCE_H
#define TORUS_TRAINER_TRAIN_TDATA_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/engine/teng.h"
#include "trainer/models/tmodel.h"
#include "trainer/train/ttrain_source.h"

/* Opens DIR's train split (and checks that the test split is there and
 * matches it), for rank of world. *train_size is the number of training
 * images (one epoch). Returns 0, or nonzero after TORUS_FAIL naming the
 * file. */
int ttrain_tdata_open(ttrain_source *s, const char *dir, const tmodel_spec *m,
                      int rank, int world, uint64_t seed, long *train_size);

/* From the next start on, training batches are 8-bit (ttrain_batch.px:
 * u8 NHWC, flips deferred, in buffers from teng_backend_host_alloc(bk),
 * page-locked on a GPU) for teng_net_stage_input_u8, which makes the
 * float batches of before, bit for bit. Evaluation stays float. */
void ttrain_tdata_use_u8(ttrain_source *s, teng_backend *bk);

/* From the next start on, training batches are decoded by n threads
 * (>= 1; 1 until called). The batches do not depend on n. */
void ttrain_tdata_set_decode_threads(ttrain_source *s, int n);

/* Evaluates net on this rank's slice of the test split in batches of at
 * most batch (the net's batch is restored afterwards): adds the hits,
 * the samples and the summed loss to the counters. Returns 0, or -1 with
 * the reason in torus_error_msg() (naming the rank). */
int ttrain_tdata_eval(ttrain_source *s, teng_net *net, int batch,
                      double counts[4]);

#endif
