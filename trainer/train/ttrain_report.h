/* ttrain_report.h: what torus-train tells on its output (prefix
 * ttrain_report_): the banner of the run's setup (model, memory,
 * backend, device, input, loss scale, exchange) and the summary at its
 * end (throughput, peak memory of the host and the device, loss scale,
 * best accuracy, the state hash of the final weights, step graphs, the
 * exchange's time). The program gathers the facts once, after the net
 * is built, and passes its stdout (rank 0's; the other ranks' goes to
 * /dev/null). Built into torus-train (the exchange's lines). Prints to
 * the FILE it is given, nothing else; no errors. */
#ifndef TORUS_TRAINER_TRAIN_REPORT_H
#define TORUS_TRAINER_TRAIN_REPORT_H

#include <stdio.h>

#include "trainer/comm/tcomm.h"
#include "trainer/engine/teng.h"
#include "trainer/optim/topt_loss_scale.h"
#include "trainer/train/ttrain_exchange.h"
#include "trainer/train/ttrain_options.h"
#include "trainer/train/ttrain_step_graph.h"

typedef struct {
    /* set by the caller */
    const ttrain_config *cfg;
    const tcomm_info *info;
    teng_net *net;
    teng_backend *bk;
    const ttrain_exchange *ex;
    const ttrain_sg *sg;
    int device; /* a GPU backend's device, else -1 */
    const char *device_why;
    topt_loss_scale_mode ls_mode;
    const topt_loss_scale_config *ls_cfg;
    const topt_loss_scale_state *ls;
    /* the module's */
    size_t dev_peak; /* the most device memory seen in use */
} ttrain_report;

/* What the run did, for the summary. */
typedef struct {
    long gstep;      /* global step at the end */
    double images;   /* trained by this run */
    double seconds;  /* this run's training time */
    double best;     /* best test top-1 in %, <0: no evaluation */
    double best_at;  /* seconds into the run when it was reached */
    int dstep;       /* the device step ran (reductions not timed) */
    int target_left; /* --target-top1 set, not reached, not stopped */
} ttrain_tally;

/* The banner. max_local: the largest local batch; decode_threads: the
 * training images' (0: no packed dataset); u8: 8-bit input batches. */
void ttrain_report_setup(const ttrain_report *rp, int max_local,
                         int decode_threads, int u8, FILE *f);
/* Device memory in use now, kept if more than seen so far (GPU backends;
 * the arenas are allocated at compile, so a step's own use shows after
 * the first progress line). */
void ttrain_report_device_peak(ttrain_report *rp);
/* The summary: first the throughput and the peak memory of the host and
 * the device, then (after the caller has read the device's loss scale)
 * the rest. */
void ttrain_report_done(ttrain_report *rp, const ttrain_tally *t, FILE *f);
void ttrain_report_summary(const ttrain_report *rp, const ttrain_tally *t,
                           FILE *f);

/* --dry-run with a cuda backend (cuda, gpu, cuda-fp16): the plan the cuda
 * backend would run for cfg's model, with no GPU (tcuda_plan.h): per
 * layer each BN's call and fused ops and how each convolution's
 * algorithms are chosen, then the total line. Nothing for another
 * backend. 0, or an error code after TORUS_FAIL. */
int ttrain_report_cuda_plan(const ttrain_config *cfg, FILE *f);

#endif
