/* ttrain_input.h: torus-train's input for each step, over a data source
 * (ttrain_source.h): the batch of (epoch, step) into the net's input
 * tensor and labels. With 8-bit batches the next step's batch may be
 * fetched ahead and its copy to the device started (staged) while this
 * step runs; two slots alternate so that copy never overwrites the batch
 * in use. Built into torus-train beside the trace (trace.c), which shows
 * the data wait. Errors: TORUS_FAIL, message in torus_error_msg(). */
#ifndef TORUS_TRAINER_TRAIN_INPUT_H
#define TORUS_TRAINER_TRAIN_INPUT_H

#include <stdint.h>

#include "trainer/engine/teng.h"
#include "trainer/train/ttrain_source.h"
#include "trainer/train/ttrain_trace.h"

typedef struct {
    ttrain_source *src;
    teng_net *net;
    ttrain_trace *trace; /* may be NULL */
    int rank;
    int slot;          /* the 8-bit slot the next batch is staged in */
    int staged;        /* next holds the batch fetched ahead */
    ttrain_batch next; /* that batch */
} ttrain_input;

/* This step's batch into the net: the one fetched ahead, if any, else
 * one fetched now. Time spent waiting for the source goes to *data_s. */
int ttrain_input_step(ttrain_input *in, int epoch, long step, int lbatch,
                      double *data_s);
/* Fetches the batch of (epoch, step) ahead and starts its copy. */
int ttrain_input_ahead(ttrain_input *in, int epoch, long step, int lbatch,
                       double *data_s);
/* Samples the net has been given: the source's count less a batch
 * fetched ahead (a checkpoint's position). */
uint64_t ttrain_input_served(const ttrain_input *in);

#endif
