/* fusion/theta.c: the fusion bucket size from the links and the gradients
 * (see theta.h): the latency-bandwidth trade-off of tensor fusion priced
 * with libtcomm's cost model. */
#include "trainer/comm/fusion/theta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm/core/model.h"
#include "trainer/comm/transport/transport.h"

/* Timed all-reduces of the smallest bucket (odd: a middle one). */
#define _BUCKET_RUNS 9

static int _cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What one bucket costs on this machine beyond what the model prices it
 * at: the slowest rank's median time of an all-reduce of TC_THETA_MIN bytes
 * (after a warm-up), with the algorithm algo runs there, less the model's
 * time for it; never below 0. The model's alphas are one message's latency
 * with the cores free; a bucket also pays every member's scheduling, its
 * handshakes, a TCP window that reopens after the wait: on the emulated
 * cluster (8 ranks on 2 cores) about 2.6 ms a bucket in ResNet-50's sync,
 * which a probed in-node alpha of 5 us or 700 us (one scheduling delay or
 * none) priced at random. Collective: every rank calls; all get the same. */
static tcomm_rc _bucket_extra(tcomm_t *c, tcomm_algo algo, tcomm_wire wire,
                              double *extra)
{
    const size_t n = TC_THETA_MIN / sizeof(float);
    tcomm_algo a =
        algo == TCOMM_ALGO_HYBRID ? tc_hybrid_pick(c, n, wire, 0) : algo;
    float *buf = calloc(n, sizeof *buf);
    double each[_BUCKET_RUNS], t = 0;
    tcomm_rc rc =
        tc_agree(c, &c->world, buf != NULL,
                 "allocate the bucket timing's buffer", TCOMM_ERR_NOMEM);
    for (int i = -1; i < _BUCKET_RUNS && !rc; i++) { /* i = -1 warms up */
        double t0 = tcomm_wtime();
        rc = tcomm_allreduce(c, buf, n, a, wire, 0, NULL);
        if (i >= 0)
            each[i] = tcomm_wtime() - t0;
    }
    free(buf);
    if (!rc) {
        qsort(each, _BUCKET_RUNS, sizeof each[0], _cmp_double);
        t = each[_BUCKET_RUNS / 2];
        rc = tcomm_max_double(c, &t); /* every rank the same figure */
    }
    if (!rc) {
        /* An algorithm the model cannot price here (< 0) fails the pick
         * with its own message; it adds nothing. */
        double model = tcomm_model_time(&c->model, a, n, wire);
        *extra = model >= 0 && t > model ? t - model : 0.0;
    }
    return rc;
}

/* What p's first nb buckets cost one after another by the model, each
 * paying extra on top of its price; -1 where the model cannot price algo. */
static double _price(const tcomm_t *c, const tc_plan *p, int nb,
                     tcomm_algo algo, tcomm_wire wire, double extra)
{
    double sum = 0;
    for (int b = 0; b < nb; b++) {
        double t = tcomm_predict(c, algo, p->b[b].count, wire);
        if (t < 0)
            return -1;
        sum += t + extra;
    }
    return sum;
}

/* What the buckets of p, cut at theta, cost one after another, each
 * paying extra on top of the model's price. */
static tcomm_rc _buckets_cost(const tcomm_t *c, tc_plan *p, size_t theta,
                              tcomm_algo algo, tcomm_wire wire, double extra,
                              double *sum)
{
    tcomm_rc rc = tc_plan_cut(p, theta);
    if (rc)
        return rc;
    *sum = _price(c, p, p->nb, algo, wire, extra);
    if (*sum < 0)
        return TORUS_FAIL(TCOMM_ERR_UNSUPPORTED,
                          "fusion: the cost model cannot price %s here for "
                          "--bucket-kb auto",
                          tcomm_algo_name(algo));
    return TCOMM_OK;
}

tcomm_rc tc_theta_pick(const tcomm_t *c, tc_plan *p, tcomm_algo algo,
                       tcomm_wire wire, double extra, size_t *theta, char *why,
                       size_t whylen)
{
    size_t total = 0;
    for (int i = 0; i < p->nt; i++)
        total += p->count[i];
    double whole = tcomm_predict(c, algo, total, wire), sum = 0, prev = -1;
    if (whole < 0)
        return TORUS_FAIL(TCOMM_ERR_UNSUPPORTED,
                          "fusion: the cost model cannot price %s here for "
                          "--bucket-kb auto",
                          tcomm_algo_name(algo));
    whole += extra;
    size_t t = TC_THETA_MIN;
    for (;; t *= 2) {
        tcomm_rc rc = _buckets_cost(c, p, t, algo, wire, extra, &sum);
        if (rc)
            return rc;
        if (sum <= TC_THETA_SLACK * whole || t >= TC_THETA_MAX)
            break;
        prev = sum;
    }
    char before[64] = "", links[256];
    tcomm_links_text(c, links, sizeof links);
    if (prev >= 0)
        snprintf(before, sizeof before, "; %zu KiB: %.2f ms", t >> 11,
                 prev * 1e3);
    /* At the cap the rule may be unmet (a latency so high that even two
     * buckets cost over 10% more); the sentence says which case it is. */
    int met = sum <= TC_THETA_SLACK * whole;
    char rule[128];
    if (met)
        snprintf(rule, sizeof rule,
                 "the smallest power of two from %zu KiB whose buckets",
                 TC_THETA_MIN >> 10);
    else
        snprintf(rule, sizeof rule,
                 "the largest size auto takes: no power of two from %zu to "
                 "%zu KiB has buckets",
                 TC_THETA_MIN >> 10, TC_THETA_MAX >> 10);
    snprintf(why, whylen,
             "%s the cost model prices within %.0f%% of one all-reduce of "
             "all %zu gradients (%.2f ms vs %.2f ms%s; %s, %s wire; %.2f ms "
             "a bucket measured beyond the model; links: %s)",
             rule, (TC_THETA_SLACK - 1) * 100, total, sum * 1e3, whole * 1e3,
             before, tcomm_algo_name(algo), tcomm_wire_name(wire), extra * 1e3,
             links);
    *theta = t;
    return TCOMM_OK;
}

int tc_theta_candidates(size_t proposal, size_t out[TC_THETA_TRIALS])
{
    static const size_t fixed[] = {(size_t)1 << 20, (size_t)4 << 20,
                                   (size_t)16 << 20};
    int n = 0, placed = 0;
    for (int i = 0; i < 3; i++) {
        if (!placed && proposal <= fixed[i]) {
            placed = 1;
            if (proposal < fixed[i])
                out[n++] = proposal;
        }
        out[n++] = fixed[i];
    }
    if (!placed)
        out[n++] = proposal;
    return n;
}

int tc_theta_keep(const double *secs, int n)
{
    double least = secs[0];
    for (int k = 1; k < n; k++)
        least = secs[k] < least ? secs[k] : least;
    int k = 0;
    while (secs[k] > TC_THETA_TIE * least)
        k++;
    return k;
}

tcomm_rc tc_theta_uniform(tc_plan *p, int *same)
{
    tcomm_rc rc = tc_plan_cut(p, TC_THETA_MIN);
    int nb = p->nb;
    *same = 1;
    int *first = rc ? NULL : malloc(sizeof *first * (size_t)(nb ? nb : 1));
    if (!rc && !first)
        rc =
            TORUS_FAIL(TCOMM_ERR_NOMEM, "fusion: no memory for %d buckets", nb);
    for (int b = 0; !rc && b < nb; b++)
        first[b] = p->b[b].first;
    /* Every size, not only the two ends: equal counts at the ends would
     * not prove equal cuts in between without an argument on the greedy
     * cut, and nine cuts of the tensor list cost nothing next to a probe. */
    for (size_t t = 2 * TC_THETA_MIN; !rc && *same && t <= TC_THETA_MAX;
         t *= 2) {
        rc = tc_plan_cut(p, t);
        *same = !rc && p->nb == nb;
        for (int b = 0; *same && b < nb; b++)
            *same = p->b[b].first == first[b];
    }
    free(first);
    return rc;
}

/* With p cut: how many of its first buckets hold TC_THETA_TRIAL_BYTES of
 * gradients (or all), and the tensors they end at. */
static int _trial_buckets(const tc_plan *p, int *nt)
{
    int nb = 0;
    size_t floats = 0;
    *nt = 0;
    while (nb < p->nb && floats * sizeof(float) < TC_THETA_TRIAL_BYTES) {
        const tc_pbucket *b = &p->b[nb++];
        floats += b->count;
        *nt = b->first + b->n;
    }
    return nb;
}

/* The first nt tensors copied into keep and zeroed (save), or copied back
 * from keep. */
static void _trial_keep(const tcomm_seg *segs, int nt, float *keep, int save)
{
    for (int i = 0; i < nt; keep += segs[i++].count) {
        size_t bytes = segs[i].count * sizeof(float);
        if (save) {
            memcpy(keep, segs[i].p, bytes);
            memset(segs[i].p, 0, bytes);
        } else {
            memcpy(segs[i].p, keep, bytes);
        }
    }
}

/* What the trial runs on: the tensors as pieces, the fusion's algorithm,
 * wire and flags, and the cost a bucket measured beyond the model. */
typedef struct {
    tcomm_t *c;
    tc_plan *p;
    const tcomm_seg *segs;
    tcomm_algo algo;
    tcomm_wire wire;
    unsigned flags;
    double extra;
} _trial_ctx;

/* One pass: p cut at theta, its trial buckets all-reduced back to back
 * from a barrier; the slowest rank's seconds, projected to all gradients
 * by the model's price of all buckets over its price of the trial's (the
 * trial's first buckets hold the large tensors of the last layers, so
 * small sizes cut them into fewer buckets per byte than the rest: the
 * bytes alone made 1 MiB look 15-27% faster than it then ran). The closing
 * agreement is also the point after which no rank writes into another's
 * gradients (in place). */
static tcomm_rc _trial_pass(const _trial_ctx *x, size_t theta, double *secs)
{
    int nt;
    tcomm_rc rc = tc_plan_cut(x->p, theta);
    int nb = _trial_buckets(x->p, &nt);
    if (!rc)
        rc = tcomm_barrier(x->c);
    double t0 = tcomm_wtime();
    for (int b = 0; !rc && b < nb; b++) {
        tcomm_result r = {0};
        rc = tcomm_allreduce_segs(x->c, x->segs + x->p->b[b].first,
                                  x->p->b[b].n, x->algo, x->wire, x->flags, &r);
    }
    *secs = tcomm_wtime() - t0;
    if (!rc)
        rc = tcomm_max_double(x->c, secs);
    double part = _price(x->c, x->p, nb, x->algo, x->wire, x->extra),
           all = _price(x->c, x->p, x->p->nb, x->algo, x->wire, x->extra);
    if (part > 0 && all > 0)
        *secs *= all / part;
    return rc;
}

tcomm_rc tc_theta_time(const size_t *cand, int n, tc_theta_pass_fn pass,
                       void *ctx, double *secs)
{
    for (int k = 0; k < n; k++) {
        double cold;
        tcomm_rc rc = pass(ctx, cand[k], &cold);
        if (!rc)
            rc = pass(ctx, cand[k], &secs[k]);
        if (rc)
            return rc;
    }
    return TCOMM_OK;
}

static tcomm_rc _pass(void *ctx, size_t theta, double *secs)
{
    return _trial_pass(ctx, theta, secs);
}

/* Times each of the n sizes in cand (ascending) into secs
 * (tc_theta_time); the gradients kept and put back. */
static tcomm_rc _trial(const _trial_ctx *x, const size_t *cand, int n,
                       double *secs)
{
    int nt = 0, most = 0;
    size_t keepn = 0;
    for (int k = 0; k < n; k++) { /* the largest prefix of any size */
        tcomm_rc rc = tc_plan_cut(x->p, cand[k]);
        if (rc)
            return rc;
        _trial_buckets(x->p, &nt);
        most = nt > most ? nt : most;
    }
    for (int i = 0; i < most; i++)
        keepn += x->segs[i].count;
    float *keep = malloc(keepn ? keepn * sizeof *keep : 1);
    tcomm_rc rc = tc_agree(x->c, &x->c->world, keep != NULL,
                           "allocate the theta trial's copy of the gradients",
                           TCOMM_ERR_NOMEM);
    if (rc) {
        free(keep);
        return rc;
    }
    _trial_keep(x->segs, most, keep, 1);
    rc = tc_theta_time(cand, n, _pass, (void *)x, secs);
    _trial_keep(x->segs, most, keep, 0);
    free(keep);
    return rc;
}

tcomm_rc tc_fusion_theta(tcomm_t *c, tc_plan *p, const tcomm_seg *segs,
                         tcomm_algo algo, tcomm_wire wire, unsigned flags,
                         size_t *theta, char *why, size_t whylen)
{
    double extra = 0, secs[TC_THETA_TRIALS];
    size_t proposal = 0, cand[TC_THETA_TRIALS];
    char rule[640], times[256] = "";
    tcomm_rc rc = _bucket_extra(c, algo, wire, &extra);
    if (!rc)
        rc = tc_theta_pick(c, p, algo, wire, extra, &proposal, rule,
                           sizeof rule);
    int pnb = p->nb, n = tc_theta_candidates(proposal, cand);
    const _trial_ctx x = {c, p, segs, algo, wire, flags, extra};
    if (!rc)
        rc = _trial(&x, cand, n, secs);
    if (rc)
        return rc;
    int best = tc_theta_keep(secs, n);
    for (int k = 0, at = 0; k < n && at < (int)sizeof times; k++)
        at += snprintf(times + at, sizeof times - (size_t)at,
                       "%s%zu KiB: %.2f ms", k ? ", " : "", cand[k] >> 10,
                       secs[k] * 1e3);
    rc = tc_plan_cut(p, cand[best]);
    if (rc)
        return rc;
    snprintf(why, whylen,
             "%zu KiB, %d buckets: the smallest within %.1f%% of the fastest "
             "in a trial on the first %zu MiB of gradients, each size timed "
             "after an untimed pass at it (%s; the slowest "
             "rank's time, projected to all gradients by the cost model) of "
             "1, 4 and 16 MiB and the cost model's proposal, %zu KiB (%d "
             "buckets): %s",
             cand[best] >> 10, p->nb, (TC_THETA_TIE - 1) * 100,
             TC_THETA_TRIAL_BYTES >> 20, times, proposal >> 10, pnb, rule);
    *theta = cand[best];
    return TCOMM_OK;
}
