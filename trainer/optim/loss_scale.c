/* trainer/optim/loss_scale.c: the dynamic loss-scale state machine (see
 * topt_loss_scale.h for the transitions). */
#include "trainer/optim/topt_loss_scale.h"

#include <math.h>

#include "common/torus_error.h"
#include "trainer/engine/teng.h"

void topt_loss_scale_defaults(topt_loss_scale_config *c)
{
    /* The usual mixed-precision settings (Micikevicius et al.; the
     * PyTorch and Apex defaults): start at 2^16, halve on overflow, double
     * after 2000 clean steps. */
    *c = (topt_loss_scale_config){.init = 65536.0,
                                  .min_scale = 1.0,
                                  .max_scale = 16777216.0,
                                  .growth = 2.0,
                                  .backoff = 0.5,
                                  .interval = 2000};
}

int topt_loss_scale_validate(const topt_loss_scale_config *c)
{
    const char *why = NULL;
    if (!(c->min_scale > 0) || !isfinite(c->max_scale))
        why = "the bounds must be finite and > 0";
    else if (!(c->min_scale <= c->max_scale))
        why = "the minimum is above the maximum";
    else if (!(c->init >= c->min_scale && c->init <= c->max_scale))
        why = "the initial scale is outside [minimum, maximum]";
    else if (!(c->growth > 1) || !isfinite(c->growth))
        why = "the growth factor must be finite and > 1";
    else if (!(c->backoff > 0 && c->backoff < 1))
        why = "the backoff factor must be in (0, 1)";
    else if (c->interval < 1)
        why = "the growth interval must be >= 1 step";
    if (!why)
        return TENG_OK;
    return TORUS_FAIL(TENG_EINVAL,
                      "loss scale: %s (initial %g, min %g, max %g, growth %g, "
                      "backoff %g, interval %ld)",
                      why, c->init, c->min_scale, c->max_scale, c->growth,
                      c->backoff, c->interval);
}

void topt_loss_scale_init(topt_loss_scale_state *s,
                          const topt_loss_scale_config *c)
{
    *s = (topt_loss_scale_state){.scale = c->init};
}

int topt_loss_scale_update(topt_loss_scale_state *s,
                           const topt_loss_scale_config *c, int finite)
{
    if (!finite) {
        double b = s->scale * c->backoff;
        s->scale = b < c->min_scale ? c->min_scale : b;
        s->clean = 0;
        s->overflows++;
        return 0;
    }
    if (++s->clean >= c->interval) {
        double g = s->scale * c->growth;
        s->scale = g > c->max_scale ? c->max_scale : g;
        s->clean = 0;
    }
    return 1;
}

int topt_loss_scale_restore(topt_loss_scale_state *s,
                            const topt_loss_scale_config *c, double scale,
                            long clean, long overflows)
{
    if (!(scale >= c->min_scale && scale <= c->max_scale))
        return TORUS_FAIL(TENG_EINVAL,
                          "loss scale: saved scale %g is outside [%g, %g]",
                          scale, c->min_scale, c->max_scale);
    if (clean < 0 || clean >= c->interval)
        return TORUS_FAIL(TENG_EINVAL,
                          "loss scale: saved clean-step count %ld is outside "
                          "[0, %ld)",
                          clean, c->interval);
    if (overflows < 0)
        return TORUS_FAIL(TENG_EINVAL,
                          "loss scale: saved overflow count %ld is negative",
                          overflows);
    *s = (topt_loss_scale_state){scale, clean, overflows};
    return TENG_OK;
}
