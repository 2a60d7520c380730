/* ttrain_step.h: a training step's forward and backward (prefix
 * ttrain_step_), run as calls or as the step's CUDA graph, which
 * ttrain_step_graph.h decides: recorded once per plan, global batch, loss
 * scale and restore, after one eager step with them, then replayed. The
 * graph holds the gradient exchange's end (ttrain_exchange_finish_device)
 * and, under the device step, the update's device part. Every rank takes
 * the same decision, as all must launch the same collectives: a
 * recording that fails on any rank leaves every rank eager for good,
 * warned once (torus_warn). Built into torus-train (it links libtcomm).
 * Errors: TORUS_FAIL codes, the message in torus_error_msg() with what
 * failed in front ("step", "step graph"). */
#ifndef TORUS_TRAINER_TRAIN_STEP_H
#define TORUS_TRAINER_TRAIN_STEP_H

#include "trainer/comm/tcomm.h"
#include "trainer/engine/teng.h"
#include "trainer/optim/topt.h"
#include "trainer/train/ttrain_exchange.h"
#include "trainer/train/ttrain_step_graph.h"
#include "trainer/train/ttrain_trace.h"

typedef struct {
    /* set by the caller before open */
    teng_net *net;
    ttrain_exchange *ex;
    topt_sgd *opt;
    tcomm_t *comm;       /* NULL with one process */
    int rank, world;     /* world: the global batch is lbatch * world */
    ttrain_trace *trace; /* may be NULL */
    unsigned restores;   /* checkpoints loaded: a graph before is stale */
    /* the module's */
    ttrain_sg sg;      /* whether to record, replay or run eagerly */
    teng_graph *graph; /* the recording, or NULL */
    int upd_eager;     /* this step's update is the caller's to queue */
} ttrain_step;

/* Whether steps may be graphs: the backend's graphs, TCUDA_GRAPH, an
 * exchange with no host work in the step, no dropout. */
void ttrain_step_open(ttrain_step *s);
/* Forward and backward of one step at local batch lbatch and loss scale
 * key scale (ttrain_sg_key). *replayed: a graph ran them (and the
 * exchange's end with them). */
int ttrain_step_run(ttrain_step *s, int lbatch, double scale, int *replayed);
/* Frees the recording once the device is idle. */
void ttrain_step_close(ttrain_step *s);

#endif
