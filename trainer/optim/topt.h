/* topt.h: the large-batch recipe (prefix topt_): learning-rate and
 * batch-size schedules, and momentum SGD with LARS.
 *
 * Schedule (all in epochs, fractional within an epoch):
 *   peak(B)  = base_lr * B / ref_batch                (linear scaling)
 *   warmup   : linear from warmup_start_lr to peak(B) over warmup_epochs
 *   decay    : poly  end + (peak-end) * (1-p)^power  (MLPerf LARS: 2)
 *              cosine end + (peak-end) * (1+cos(pi p))/2
 *              step  peak * gamma^(milestones passed)
 *              where p is the progress from the end of warmup to the end
 *   B(epoch) : the global batch from the Sony-style batch schedule, so the
 *              learning rate follows every batch change.
 *
 * Update, per parameter tensor, with grads already summed over ranks of a
 * loss normalised by the global batch (remark 3):
 *   g' = g + wd * w                           (remark 1: wd as lambda*w)
 *   trust = eta*|w| / (|g| + wd*|w| + eps)     (LARS, fp32 norms; 1 when a
 *                                              norm is 0 or the tensor is
 *                                              excluded)
 *   v = m * (lr_t / lr_{t-1}) * v + lr_t * trust * g'   (remark 2:
 *                                              momentum correction)
 *   w = w - v
 * Bias and BN tensors get neither weight decay nor LARS when
 * exclude_bn_bias is set (the default, as Tencent and MLPerf do).
 */
#ifndef TORUS_TRAINER_OPTIM_H
#define TORUS_TRAINER_OPTIM_H

#include <stddef.h>

#include "trainer/engine/step_math.h"
#include "trainer/engine/teng.h"
#include "trainer/optim/topt_loss_scale.h"

typedef enum {
    TOPT_DECAY_NONE,
    TOPT_DECAY_POLY,
    TOPT_DECAY_STEP,
    TOPT_DECAY_COSINE,
} topt_decay;

#define TOPT_MAX_MILESTONES 16
#define TOPT_MAX_STAGES     16

typedef struct {
    int epoch;        /* from this epoch on ... */
    int global_batch; /* ... the global batch is this */
} topt_stage;

typedef struct {
    double base_lr;         /* LR at the reference batch */
    int ref_batch;          /* 256 */
    double warmup_epochs;   /* 0: no warmup */
    double warmup_start_lr; /* < 0: min(base_lr, peak) (Goyal: start at
                             * the reference LR eta) */
    topt_decay decay;
    double poly_power; /* 2 */
    double end_lr;     /* floor of poly and cosine */
    int nmilestones;
    double milestones[TOPT_MAX_MILESTONES]; /* epochs, increasing */
    double step_gamma;                      /* 0.1 */
    int epochs;                             /* total */
    long dataset_size;                      /* training samples per epoch */
    int nstages;                            /* >= 1; stage[0].epoch == 0 */
    topt_stage stage[TOPT_MAX_STAGES];
} topt_schedule;

typedef struct {
    double momentum;         /* 0.9 */
    double weight_decay;     /* lambda */
    int lars;                /* per-tensor trust ratio */
    double lars_eta;         /* 0.001 */
    double lars_eps;         /* 1e-9: guards 0/0 */
    int exclude_bn_bias;     /* 1: no LARS and no wd on bias/BN tensors */
    int momentum_correction; /* 1: scale v by lr_t / lr_{t-1} */
} topt_config;

/* Defaults: Goyal et al.'s ImageNet recipe (base 0.1 at 256, 5 warmup
 * epochs, step decay at 30/60/80, 90 epochs, batch 256). */
void topt_schedule_defaults(topt_schedule *s);
void topt_config_defaults(topt_config *c);
/* TENG_EINVAL after TORUS_FAIL naming the value out of range. */
int topt_schedule_validate(const topt_schedule *s);
int topt_config_validate(const topt_config *c);
/* "poly", "step", "cosine", "none". */
int topt_decay_parse(const char *name, topt_decay *out);
const char *topt_decay_name(topt_decay d);
/* "0:256,10:512,20:1024" or a plain "1024"; TENG_EINVAL after TORUS_FAIL
 * quoting the text and the bad entry. */
int topt_stages_parse(const char *text, topt_schedule *s);

int topt_batch_at(const topt_schedule *s, int epoch);
long topt_steps_in_epoch(const topt_schedule *s, int epoch);
double topt_peak_lr(const topt_schedule *s, int global_batch);
double topt_lr_at(const topt_schedule *s, double epoch);
/* The LR at (epoch, step within the epoch). */
double topt_lr_at_step(const topt_schedule *s, int epoch, long step);

float topt_lars_trust(float wnorm, float gnorm, float eta, float wd, float eps);

typedef struct {
    topt_config cfg;
    teng_net *net;
    void *velocity; /* engine optimizer state (teng_optstate_alloc) */
    double prev_lr; /* 0 before the first step */
    long steps;
    /* Per param tensor, host memory allocated once: */
    float *trust;        /* the LARS trust of the last step (for logs) */
    float *w2, *g2;      /* sums of squares of weights and gradients */
    teng_sgd_args *args; /* the update each tensor gets this step */
} topt_sgd;

int topt_sgd_init(topt_sgd *o, teng_net *net, const topt_config *cfg);
/* One update of every param from its gradient at learning rate lr: the
 * hyper-parameters are worked out here, the norms and the update run in
 * the engine (two calls for all norms, one for all updates). */
int topt_sgd_step(topt_sgd *o, double lr);
/* The same step from gradients that are grad_scale (> 0, finite) times
 * the true ones (loss scaling): 1/grad_scale is folded into every
 * tensor's arguments and the LARS gradient norm; with a power of two the
 * result is bit for bit topt_sgd_step's on the unscaled gradients. */
int topt_sgd_step_scaled(topt_sgd *o, double lr, double grad_scale);
/* Param i's constant hyper-parameters (its weight decay, 0 on an excluded
 * BN/bias tensor; whether LARS scales it; eta, eps), and the momentum the
 * next step at learning rate lr uses (momentum correction: scaled by
 * lr / the previous step's lr): what a device that forms the update
 * arguments itself (teng_sgd_hyper) is given. */
teng_tensor_hyper topt_sgd_tensor_hyper(const topt_sgd *o, int i);
double topt_sgd_momentum(const topt_sgd *o, double lr);
/* The device step (teng.h, teng_net_dstep_*): open it with every tensor's
 * constants, the momentum config and the optimizer's prev_lr, and the
 * loss-scale part of ls (its momentum fields are filled here) at state
 * s; then each step queues the whole update on the device. The device
 * keeps prev_lr from then on: a checkpoint must copy it back
 * (topt_sgd_dstep_seen) into o->prev_lr first. */
int topt_sgd_dstep_open(topt_sgd *o, const teng_dstep_config *ls,
                        const teng_dstep_state *s);
/* parts: teng_net_dstep's (TENG_DSTEP_ALL, or one part for a step graph) */
int topt_sgd_dstep(topt_sgd *o, double lr, unsigned parts);
/* The host's copies follow the device step: from the state read before
 * (was) to the one just read (now, teng_net_dstep_read), the steps it
 * applied are counted, its prev_lr is taken back, and ls becomes the
 * device's loss-scale state. */
void topt_sgd_dstep_seen(topt_sgd *o, topt_loss_scale_state *ls,
                         const teng_dstep_state *was,
                         const teng_dstep_state *now);
/* Param id's momentum buffer in canonical layout (for checkpoints). */
int topt_sgd_state_read(topt_sgd *o, int id, float *dst);
int topt_sgd_state_write(topt_sgd *o, int id, const float *src);
void topt_sgd_free(topt_sgd *o);

#endif
