/* trainer/backends/cuda/tcuda_plan.h: the cuda backend's plan report
 * without a GPU (prefix tcuda_plan_): for a net as the model builds it,
 * what the cuda backend would run, from the same host-C decisions the
 * backend takes at plan (cuda_fuse.h: each BN's call and fused ops under
 * the switches), and how each convolution's algorithms are chosen.
 * torus-train --dry-run prints it for --backend cuda / cuda-fp16; it
 * needs no device, no driver and no CUDA library (built into
 * libtorustrain, like the fusion rules). */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_PLAN_H
#define TORUS_TRAINER_BACKENDS_CUDA_PLAN_H

#include <stdio.h>

#include "trainer/engine/teng.h"

/* How the convolution algorithms are chosen (one for the whole run):
 * cuDNN's heuristics (TCUDA_TUNE=0), measured ("tuned": measured at the
 * first plan or read from the tune cache, which without the device the
 * plan cannot tell apart), or all from the tune cache. */
typedef enum {
    TCUDA_ALGO_HEURISTIC = 0,
    TCUDA_ALGO_TUNED,
    TCUDA_ALGO_CACHED
} tcuda_algo_source;

typedef struct {
    int half_nhwc;            /* cuda-fp16 (else cuda: FP32 NCHW) */
    tcuda_algo_source conv;   /* for every convolution */
} tcuda_plan_in;

typedef struct {
    int bn;       /* BN layers */
    int bn_ex;    /* of them on an Ex mode ("fused") */
    int separate; /* separate activation passes: legacy BNs with a ReLU */
    int conv;     /* convolution layers */
    int stem_cp;  /* the padded stem's input channels, 0: not padded */
} tcuda_plan_totals;

/* Prints the per-layer plan and the total line ("BN fused 53/53,
 * separate activation passes 0", ..., the stem's input channels) of net under the environment's
 * switches (tcuda_switches_getenv) to f; fills *tot. 0, or TENG_ENOMEM
 * after TORUS_FAIL. */
int tcuda_plan_report(const teng_net *net, const tcuda_plan_in *in, FILE *f,
                      tcuda_plan_totals *tot);

/* The name of a source ("heuristic", "tuned", "cached"). */
const char *tcuda_algo_source_name(tcuda_algo_source s);

#endif
