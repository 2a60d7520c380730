/* schedule.c: learning-rate and batch-size schedules (see topt.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/optim/topt.h"

void topt_schedule_defaults(topt_schedule *s)
{
    memset(s, 0, sizeof(*s));
    s->base_lr = 0.1;
    s->ref_batch = 256;
    s->warmup_epochs = 5;
    s->warmup_start_lr = -1;
    s->decay = TOPT_DECAY_STEP;
    s->poly_power = 2;
    s->nmilestones = 3;
    s->milestones[0] = 30;
    s->milestones[1] = 60;
    s->milestones[2] = 80;
    s->step_gamma = 0.1;
    s->epochs = 90;
    s->dataset_size = 1281167;
    s->nstages = 1;
    s->stage[0] = (topt_stage){0, 256};
}

static const char *_decays[] = {"none", "poly", "step", "cosine"};

int topt_decay_parse(const char *name, topt_decay *out)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, _decays[i])) {
            *out = (topt_decay)i;
            return TENG_OK;
        }
    return TENG_EINVAL;
}

const char *topt_decay_name(topt_decay d)
{
    return d >= 0 && d <= TOPT_DECAY_COSINE ? _decays[d] : "?";
}

int topt_stages_parse(const char *text, topt_schedule *s)
{
    const char *p = text;
    int n = 0;
    if (!strchr(text, ':')) {
        char *end;
        long b = strtol(text, &end, 10);
        if (end == text || *end || b <= 0 || b > (1 << 24)) {
            return TORUS_FAIL(TENG_EINVAL,
                              "batch '%s' is not a positive integer", text);
        }
        s->nstages = 1;
        s->stage[0] = (topt_stage){0, (int)b};
        return TENG_OK;
    }
    while (*p) {
        char *end;
        long e = strtol(p, &end, 10), b;
        if (end == p || *end != ':') {
            return TORUS_FAIL(TENG_EINVAL,
                              "batch schedule '%s': expected EPOCH:BATCH "
                              "at '%s'",
                              text, p);
        }
        p = end + 1;
        b = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || b <= 0 || b > (1 << 24) ||
            e < 0) {
            return TORUS_FAIL(
                TENG_EINVAL, "batch schedule '%s': bad entry at '%s'", text, p);
        }
        if (n == TOPT_MAX_STAGES) {
            return TORUS_FAIL(TENG_EINVAL,
                              "batch schedule '%s': more than %d stages", text,
                              TOPT_MAX_STAGES);
        }
        s->stage[n++] = (topt_stage){(int)e, (int)b};
        p = *end ? end + 1 : end;
    }
    s->nstages = n;
    return TENG_OK;
}

int topt_schedule_validate(const topt_schedule *s)
{
#define _BAD(...) TORUS_FAIL(TENG_EINVAL, __VA_ARGS__)
    if (!(s->base_lr > 0) || !isfinite(s->base_lr))
        return _BAD("base learning rate %g must be > 0", s->base_lr);
    if (s->ref_batch <= 0)
        return _BAD("reference batch %d must be > 0", s->ref_batch);
    if (s->epochs <= 0)
        return _BAD("epochs %d must be > 0", s->epochs);
    if (s->dataset_size <= 0)
        return _BAD("dataset size %ld must be > 0", s->dataset_size);
    if (!(s->warmup_epochs >= 0) || s->warmup_epochs >= s->epochs)
        return _BAD("warmup of %g epochs must be in [0, epochs=%d)",
                    s->warmup_epochs, s->epochs);
    if (s->decay == TOPT_DECAY_POLY && !(s->poly_power > 0))
        return _BAD("poly power %g must be > 0", s->poly_power);
    if (!(s->end_lr >= 0))
        return _BAD("end learning rate %g must be >= 0", s->end_lr);
    if (s->decay == TOPT_DECAY_STEP) {
        if (!(s->step_gamma > 0 && s->step_gamma <= 1))
            return _BAD("step decay factor %g must be in (0, 1]",
                        s->step_gamma);
        for (int i = 0; i < s->nmilestones; i++)
            if (!(s->milestones[i] > 0) ||
                (i && s->milestones[i] <= s->milestones[i - 1]))
                return _BAD("step milestones must be positive and "
                            "increasing (milestone %d = %g)",
                            i + 1, s->milestones[i]);
    }
    if (s->nstages < 1 || s->stage[0].epoch != 0)
        return _BAD("the batch schedule must start at epoch 0");
    for (int i = 0; i < s->nstages; i++) {
        if (s->stage[i].global_batch <= 0)
            return _BAD("batch schedule: batch %d at epoch %d must be > 0",
                        s->stage[i].global_batch, s->stage[i].epoch);
        if (s->stage[i].global_batch > s->dataset_size)
            return _BAD("batch schedule: batch %d at epoch %d is larger "
                        "than the dataset (%ld)",
                        s->stage[i].global_batch, s->stage[i].epoch,
                        s->dataset_size);
        if (i && s->stage[i].epoch <= s->stage[i - 1].epoch)
            return _BAD("batch schedule: epochs must increase (%d after %d)",
                        s->stage[i].epoch, s->stage[i - 1].epoch);
    }
    return TENG_OK;
#undef _BAD
}

int topt_batch_at(const topt_schedule *s, int epoch)
{
    int b = s->stage[0].global_batch;
    for (int i = 1; i < s->nstages; i++)
        if (epoch >= s->stage[i].epoch)
            b = s->stage[i].global_batch;
    return b;
}

long topt_steps_in_epoch(const topt_schedule *s, int epoch)
{
    /* Whole global batches only: every step has the same global batch,
     * which keeps the loss normaliser and the LR scaling exact. */
    long n = s->dataset_size / topt_batch_at(s, epoch);
    return n > 0 ? n : 1;
}

double topt_peak_lr(const topt_schedule *s, int global_batch)
{
    return s->base_lr * (double)global_batch / (double)s->ref_batch;
}

double topt_lr_at(const topt_schedule *s, double t)
{
    double peak = topt_peak_lr(s, topt_batch_at(s, (int)floor(t)));
    if (t < s->warmup_epochs) {
        /* Goyal et al. ramp from the reference LR; below the reference
         * batch there is nothing to ramp up to, so start at the peak. */
        double start = s->warmup_start_lr >= 0 ? s->warmup_start_lr
                       : s->base_lr < peak     ? s->base_lr
                                               : peak;
        return start + (peak - start) * t / s->warmup_epochs;
    }
    double p = (t - s->warmup_epochs) / (s->epochs - s->warmup_epochs);
    p = p < 0 ? 0 : p > 1 ? 1 : p;
    switch (s->decay) {
    case TOPT_DECAY_POLY:
        return s->end_lr + (peak - s->end_lr) * pow(1.0 - p, s->poly_power);
    case TOPT_DECAY_COSINE:
        return s->end_lr + (peak - s->end_lr) * 0.5 * (1.0 + cos(M_PI * p));
    case TOPT_DECAY_STEP: {
        double lr = peak;
        for (int i = 0; i < s->nmilestones; i++)
            if (t >= s->milestones[i])
                lr *= s->step_gamma;
        return lr;
    }
    default:
        return peak;
    }
}

double topt_lr_at_step(const topt_schedule *s, int epoch, long step)
{
    return topt_lr_at(s, epoch + (double)step /
                                     (double)topt_steps_in_epoch(s, epoch));
}
