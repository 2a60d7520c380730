/* trainer/backends/cuda/cuda_fuse.h: which BN -> residual add -> ReLU
 * chains the cuda backend runs as one cuDNN call (prefix tcuda_fuse_),
 * decided on the engine's layer graph in plain C, so that it is tested
 * without a GPU (tests/unit/test_cuda_host.c).
 *
 * A chain is fused when the backend runs in FP16 NHWC (the layout cuDNN's
 * cudnnBatchNormalizationForwardTrainingEx with
 * CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION needs), the residual add has its
 * ReLU, its first input (the one it writes in place over) comes from a BN
 * layer without its own ReLU whose output nothing else reads, the add's
 * two inputs differ, and the channels are a multiple of 4 (cuDNN's
 * fp16 NHWC kernels). ResNet-50 has 16 such chains, one per bottleneck
 * block; the projection shortcut's BN (the add's second input) is not
 * fused. In training, the BN's forward is then deferred to the add's:
 * y = ReLU(BN(x) + z) in one call, the BN's own output never written;
 * evaluation is unchanged; backward: see tcuda_fuse_reads below. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_FUSE_H
#define TORUS_TRAINER_BACKENDS_CUDA_FUSE_H

#include "trainer/engine/graph.h"

/* For each layer li of net: bn_of[li] = the BN layer that the residual
 * add li runs fused, else -1; deferred[li] = 1 for that BN layer, else 0
 * (both arrays of net->nl). half_nhwc: the backend's FP16 NHWC mode (0:
 * nothing is fused). Returns the number of fused chains. */
int tcuda_fuse_plan(const teng_net *net, int half_nhwc, int *bn_of,
                    unsigned char *deferred);

/* Backward of a fused chain (BN b, add a): one
 * cudnnBatchNormalizationBackwardEx in the forward's mode and ops
 * (spatial persistent, BN_ADD_ACTIVATION) with the forward's reserve
 * space, at the BN's backward slot. The add's backward still masks the
 * shared output gradient in place first (the projection shortcut's BN,
 * the add's other input, runs its backward before BN b's), so the fused
 * call re-applies an idempotent mask and its dz goes to scratch. It reads
 * the add's output y, so the BN reports its own output read with bit 3
 * (backend.h): the add still writes in place there and that storage, which
 * then holds y, lives to the BN's backward. */

/* The engine's bwd_reads bits for a layer whose plain answer is plain;
 * deferred: a BN whose forward runs fused into its add. */
unsigned tcuda_fuse_reads(unsigned plain, int deferred);

/* The cuda backend's whole bwd_reads answer for layer li (backend.h),
 * in plain C so that a CPU stand-in plans with the real read sets:
 * deferred as tcuda_fuse_plan set it (NULL: nothing fused). The loss
 * layer's workspace (per-row losses) is read by the device step after
 * the backward, hence TENG_READS_WS_LATE there. */
unsigned tcuda_bwd_reads(const teng_net *net, const unsigned char *deferred,
                         int li);

/* After compile: 1 when the fused backward of BN b (deferred into add a)
 * can read y at its slot: the add's output shares the BN output's
 * storage (the in-place add bit 3 allows), or nothing is reused. */
int tcuda_fuse_bwd_ok(const teng_net *net, int b, int a);

/* The run-time rule for a fused call's cuDNN status, forward and
 * backward alike: success keeps the chain, "not supported" unfuses it for
 * good (the unfused calls run instead, now and after), anything else is
 * an error. */
typedef enum {
    TCUDA_FUSE_KEEP,
    TCUDA_FUSE_UNFUSE,
    TCUDA_FUSE_FAIL
} tcuda_fuse_action;
tcuda_fuse_action tcuda_fuse_status(int ok, int not_supported);

/* ---- every BN's call (tcuda_bn_plan) ----
 *
 * In FP16 NHWC training every BN whose channels are a multiple of 4 runs
 * cuDNN's Ex calls (cudnnBatchNormalizationForwardTrainingEx and
 * BackwardEx) in CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode, with the ops
 * that cover what follows it: BN_ADD_ACTIVATION for a chain above (the BN
 * deferred into its add), BN_ACTIVATION where the BN has its ReLU (no
 * separate activation call forward, no separate ReLU-mask pass
 * backward), BN otherwise. The rest (FP32 NCHW mode, odd channels, a
 * switch off) runs the legacy spatial calls, a BN with ReLU then adding
 * one activation call forward and one mask pass backward: a "separate
 * activation pass" in the plan report. Evaluation runs the inference
 * call in every mode. Each Ex call sits behind the backend's own seam
 * (cuda_exec.c, _bn_ex_fwd/_bn_ex_bwd), so that a graph-API version can
 * replace it without touching the engine. */
typedef enum {
    TCUDA_BN_NONE = 0,   /* not a BN layer */
    TCUDA_BN_LEGACY,     /* spatial; ReLU as separate passes */
    TCUDA_BN_EX,         /* Ex, persistent, ops BN */
    TCUDA_BN_EX_ACT,     /* Ex, persistent, ops BN_ACTIVATION */
    TCUDA_BN_EX_ADD_ACT, /* deferred into its add: BN_ADD_ACTIVATION */
} tcuda_bn_mode;

/* The switches of the backend's fast paths (environment variables, "0"
 * turns one off; unset or anything else: on). half_nhwc is the mode's. */
typedef struct {
    int half_nhwc; /* backend cuda-fp16 */
    int bn_ex;     /* TCUDA_BN_EX: BN through the Ex calls */
    int fuse;      /* TCUDA_FUSE: BN + add + ReLU as one call */
    int pad_stem;  /* TCUDA_PAD_STEM: the input padded to 4 channels */
} tcuda_switches;

/* The switches from the environment (getenv), half_nhwc as given. */
void tcuda_switches_getenv(tcuda_switches *sw, int half_nhwc);

/* Each layer's BN mode into mode[nl] (TCUDA_BN_NONE for other layers),
 * and bn_of/deferred as tcuda_fuse_plan sets them (sw->fuse). Returns the
 * number of BNs on an Ex mode. */
int tcuda_bn_plan(const teng_net *net, const tcuda_switches *sw, int *bn_of,
                  unsigned char *deferred, unsigned char *mode);

/* ---- what each BN runs now (tcuda_bn_state) ----
 *
 * The backend's per-net BN state, arrays of the net's nl layers: plan =
 * the mode tcuda_bn_plan chose; mode = the mode it runs now (LEGACY once
 * cuDNN declined the Ex forward); bwd_ex = 1 while the BN's backward runs
 * the Ex call; fuse_bn/deferred as tcuda_fuse_plan, add_of[BN] = its add;
 * nfused: the chains still fused; nex: BNs the plan put on an Ex mode. */
typedef struct {
    int *fuse_bn, *add_of;
    unsigned char *deferred, *bwd_ex, *plan, *mode;
    int nfused, nex;
} tcuda_bn_state;

/* Plans net under sw into *s (every Ex BN's backward Ex until declined).
 * TENG_OK, or TENG_ENOMEM after TORUS_FAIL; close in any case. */
int tcuda_bn_state_open(tcuda_bn_state *s, const teng_net *net,
                        const tcuda_switches *sw);
void tcuda_bn_state_close(tcuda_bn_state *s);

/* cuDNN declined BN b's Ex call, for good: forward (at plan, from its
 * size queries, or at run time): the BN runs the legacy calls both ways
 * and its chain, if any, runs unfused; backward: only its backward runs
 * the legacy call. */
void tcuda_bn_decline(tcuda_bn_state *s, int b, int forward);

/* What layer li's forward runs (training: 1 in a training step). */
typedef enum {
    TCUDA_CALL_PLAIN,     /* the layer's own call (a BN: legacy) */
    TCUDA_CALL_DEFERRED,  /* nothing: a BN whose forward is its add's */
    TCUDA_CALL_ADD_FUSED, /* an add running its BN's Ex call */
    TCUDA_CALL_EX         /* a BN's Ex call */
} tcuda_bn_call;
tcuda_bn_call tcuda_bn_fwd_call(const tcuda_bn_state *s, int li,
                                int training);

/* A legacy BN call of BN b counts as a fallback (tcuda_fastpath.h): the
 * plan put b on an Ex mode, and this is training. */
int tcuda_bn_fallback(const tcuda_bn_state *s, int b, int training);

/* The padded stem (cuda_stem.h): the convolution layer that alone reads
 * the data input, when the switches allow (FP16 NHWC, TCUDA_PAD_STEM),
 * the data input's channels are not a multiple of 4 and no gradient of
 * the input is asked for (teng_net_set_input_grad); else -1. *cp: the
 * channels it reads, the input's rounded up to a multiple of 4 (the
 * input's own when -1). */
int tcuda_stem_plan(const teng_net *net, const tcuda_switches *sw, int *cp);

/* Whether mode runs the Ex calls; the name of its ops ("BN",
 * "BN_ACTIVATION", "BN_ADD_ACTIVATION"; "legacy" for TCUDA_BN_LEGACY). */
int tcuda_bn_is_ex(int mode);
const char *tcuda_bn_ops_name(int mode);

#endif
