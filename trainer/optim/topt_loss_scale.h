/* trainer/optim/topt_loss_scale.h: dynamic loss scaling for mixed precision
 * (prefix topt_loss_scale_), a host state machine in plain C.
 *
 * The loss is multiplied by `scale` before backward so small fp16
 * gradients do not flush to zero; the update divides the gradients by it
 * again. After each backward the caller tells the machine whether the
 * unscaled gradients were all finite (teng_net_grads_finite):
 *   overflow (inf/nan): scale = max(scale * backoff, min_scale), the clean
 *                       counter restarts at 0, and the step is SKIPPED
 *                       (the caller must not apply the update);
 *   finite:             the counter grows; when it reaches `interval`
 *                       clean steps in a row, scale = min(scale * growth,
 *                       max_scale) and the counter restarts at 0.
 * With powers of two for every factor and bound (the defaults), scaling and
 * unscaling are exact in binary floating point.
 *
 * Checkpoints: topt_loss_scale_state is the whole state; a checkpoint
 * saves `scale` and `clean` (and may save `overflows`, a count for logs)
 * and gives them back through topt_loss_scale_restore, which checks them
 * against the config (a file is hostile).
 *
 * Modes (topt_loss_scale_parse, torus-train's --loss-scale): "off" (no
 * scaling), "static:S" (always S, overflowing steps still skipped),
 * "dynamic[:INIT[:INTERVAL]]" (the machine above with those two settings
 * replacing the defaults), "auto" (dynamic when the backend computes in
 * fp16/bf16, off in fp32: the caller resolves it). */
#ifndef TORUS_TRAINER_OPTIM_LOSS_SCALE_H
#define TORUS_TRAINER_OPTIM_LOSS_SCALE_H

#include <stddef.h>

typedef struct {
    double init;      /* first scale: 65536 (2^16) */
    double min_scale; /* backoff floor: 1 */
    double max_scale; /* growth ceiling: 2^24 */
    double growth;    /* > 1: 2 */
    double backoff;   /* in (0, 1): 0.5 */
    long interval;    /* clean steps in a row before growing: 2000 */
} topt_loss_scale_config;

typedef struct {
    double scale;   /* current loss scale */
    long clean;     /* clean steps in a row since the last change, in
                     * [0, interval) */
    long overflows; /* steps skipped so far (logs only) */
} topt_loss_scale_state;

void topt_loss_scale_defaults(topt_loss_scale_config *c);
/* TENG_EINVAL after TORUS_FAIL giving the reason when a value is out of
 * range. */
int topt_loss_scale_validate(const topt_loss_scale_config *c);
void topt_loss_scale_init(topt_loss_scale_state *s,
                          const topt_loss_scale_config *c);
/* One step's outcome; returns 1 when the step is applied, 0 when it is
 * skipped (overflow). */
int topt_loss_scale_update(topt_loss_scale_state *s,
                           const topt_loss_scale_config *c, int finite);
/* State from a checkpoint: TENG_EINVAL (after TORUS_FAIL naming the value)
 * unless scale is finite in [min_scale, max_scale], clean in
 * [0, interval) and overflows >= 0; s is unchanged on error. */
int topt_loss_scale_restore(topt_loss_scale_state *s,
                            const topt_loss_scale_config *c, double scale,
                            long clean, long overflows);

typedef enum {
    TOPT_LOSS_SCALE_AUTO,
    TOPT_LOSS_SCALE_OFF,
    TOPT_LOSS_SCALE_STATIC,
    TOPT_LOSS_SCALE_DYNAMIC,
} topt_loss_scale_mode;

/* Parses a mode (see above) into *mode and *c (the defaults, then what the
 * text sets; static:S sets init = min = max = S). Scales must be finite in
 * [1, 2^24], the interval in [1, 10^9]. TENG_EINVAL after TORUS_FAIL
 * quoting the text and what is wrong; *mode and *c are then unchanged. */
int topt_loss_scale_parse(const char *text, topt_loss_scale_mode *mode,
                          topt_loss_scale_config *c);
/* "off", "static", "dynamic", "auto". */
const char *topt_loss_scale_mode_name(topt_loss_scale_mode mode);

#endif
