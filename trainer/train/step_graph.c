/* train/step_graph.c: when to record, replay or run the step eagerly
 * (see ttrain_step_graph.h). */
#include "trainer/train/ttrain_step_graph.h"

#include <string.h>

void ttrain_sg_init(ttrain_sg *s, const char *env, int supported,
                    int host_exchange, int dropout)
{
    memset(s, 0, sizeof *s);
    if (env && !strcmp(env, "0"))
        s->off = "TCUDA_GRAPH=0";
    else if (!supported)
        s->off = "the backend records no graphs";
    else if (host_exchange)
        s->off = "the gradient exchange sums on the host";
    else if (dropout)
        s->off = "dropout masks change every step";
}

static int _same(const ttrain_sg_key *a, const ttrain_sg_key *b)
{
    /* The loss scale compares as bits: a graph holds exactly that value. */
    return a->plan == b->plan && a->global_batch == b->global_batch &&
           !memcmp(&a->loss_scale, &b->loss_scale, sizeof a->loss_scale) &&
           a->gen == b->gen;
}

ttrain_sg_act ttrain_sg_next(ttrain_sg *s, const ttrain_sg_key *k, int *drop)
{
    *drop = 0;
    if (s->off || s->failed) {
        *drop = s->have;
        s->have = 0;
        return TTRAIN_SG_EAGER;
    }
    if (!_same(&s->key, k) || !s->warm) {
        *drop = s->have;
        s->have = 0;
        s->key = *k;
        s->warm = 1; /* this step: the warm-up */
        return TTRAIN_SG_EAGER;
    }
    return s->have ? TTRAIN_SG_REPLAY : TTRAIN_SG_RECORD;
}

int ttrain_sg_recorded(ttrain_sg *s, int ok)
{
    if (ok) {
        s->have = 1;
        s->records++;
        return 0;
    }
    s->have = 0;
    int first = !s->failed;
    s->failed = 1;
    return first;
}

void ttrain_sg_set_update(ttrain_sg *s, int on)
{
    on = on != 0;
    if (on != s->update)
        s->warm = 0; /* the recording held (or lacked) the update */
    s->update = on;
}

int ttrain_sg_update_eager(const ttrain_sg *s, int ran)
{
    return !(ran && s->update);
}

void ttrain_sg_replayed(ttrain_sg *s)
{
    s->replays++;
}

const char *ttrain_sg_state(const ttrain_sg *s)
{
    static __thread char buf[96];
    if (s->failed)
        return "failed (eager)";
    if (!s->off)
        return s->update ? "on (the update included)" : "on";
    strcpy(buf, "off: ");
    strncat(buf, s->off, sizeof buf - 6);
    return buf;
}
