/* trainer/optim/loss_scale.c: the dynamic loss-scale state machine (see
 * topt_loss_scale.h for the transitions). */
#include "trainer/optim/topt_loss_scale.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/engine/step_math.h"
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
    /* The transition the cuda backend's decision kernel runs too. */
    return teng_ls_next(&s->scale, &s->clean, &s->overflows, c->min_scale,
                        c->max_scale, c->growth, c->backoff, c->interval,
                        finite);
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

const char *topt_loss_scale_mode_name(topt_loss_scale_mode mode)
{
    switch (mode) {
    case TOPT_LOSS_SCALE_OFF:
        return "off";
    case TOPT_LOSS_SCALE_STATIC:
        return "static";
    case TOPT_LOSS_SCALE_DYNAMIC:
        return "dynamic";
    default:
        return "auto";
    }
}

/* One number of a mode's text: a scale in [1, 2^24] (integer 0) or an
 * interval in [1, 10^9] (integer 1), the whole field up to ':' or the end.
 * Returns the end of the field, NULL when it is not such a number. */
static const char *_field(const char *p, int integer, double *v)
{
    char *end;
    errno = 0;
    double x = integer ? (double)strtol(p, &end, 10) : strtod(p, &end);
    if (end == p || errno || (*end && *end != ':') ||
        isspace((unsigned char)*p))
        return NULL;
    if (integer ? !(x >= 1 && x <= 1e9) : !(x >= 1 && x <= 16777216.0))
        return NULL;
    *v = x;
    return end;
}

int topt_loss_scale_parse(const char *text, topt_loss_scale_mode *mode,
                          topt_loss_scale_config *c)
{
    topt_loss_scale_config t;
    topt_loss_scale_defaults(&t);
    topt_loss_scale_mode m;
    const char *p;
    double v;
    if (!strcmp(text, "off") || !strcmp(text, "auto")) {
        m = text[0] == 'o' ? TOPT_LOSS_SCALE_OFF : TOPT_LOSS_SCALE_AUTO;
    } else if (!strncmp(text, "static:", 7)) {
        m = TOPT_LOSS_SCALE_STATIC;
        if (!(p = _field(text + 7, 0, &v)) || *p)
            goto bad;
        t.init = t.min_scale = t.max_scale = v;
    } else if (!strncmp(text, "dynamic", 7) && (!text[7] || text[7] == ':')) {
        m = TOPT_LOSS_SCALE_DYNAMIC;
        p = text + 7;
        if (*p == ':' && !(p = _field(p + 1, 0, &t.init)))
            goto bad;
        if (*p == ':') {
            if (!(p = _field(p + 1, 1, &v)) || *p)
                goto bad;
            t.interval = (long)v;
        }
    } else {
        goto bad;
    }
    *mode = m;
    *c = t;
    return TENG_OK;
bad:
    return TORUS_FAIL(TENG_EINVAL,
                      "loss scale '%s': expected off, auto, static:S or "
                      "dynamic[:INIT[:INTERVAL]] with scales in [1, 2^24] "
                      "and an interval in [1, 10^9] steps",
                      text);
}
