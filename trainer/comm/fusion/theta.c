/* fusion/theta.c: the fusion bucket size from the links and the gradients
 * (see theta.h): the latency-bandwidth trade-off of tensor fusion priced
 * with libtcomm's cost model. */
#include "trainer/comm/fusion/theta.h"

#include <stdio.h>

#include "trainer/comm/core/model.h"

/* What the buckets of p, cut at theta, cost one after another. */
static tcomm_rc _buckets_cost(const tcomm_t *c, tc_plan *p, size_t theta,
                              tcomm_algo algo, tcomm_wire wire, double *sum)
{
    tcomm_rc rc = tc_plan_cut(p, theta);
    *sum = 0;
    for (int b = 0; !rc && b < p->nb; b++) {
        double t = tcomm_predict(c, algo, p->b[b].count, wire);
        if (t < 0)
            return TORUS_FAIL(TCOMM_ERR_UNSUPPORTED,
                              "fusion: the cost model cannot price %s here "
                              "for --bucket-kb auto",
                              tcomm_algo_name(algo));
        *sum += t;
    }
    return rc;
}

tcomm_rc tc_fusion_theta(const tcomm_t *c, tc_plan *p, tcomm_algo algo,
                         tcomm_wire wire, size_t *theta, char *why,
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
    size_t t = TC_THETA_MIN;
    for (;; t *= 2) {
        tcomm_rc rc = _buckets_cost(c, p, t, algo, wire, &sum);
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
    snprintf(why, whylen,
             "%zu KiB, %d buckets: the smallest power of two from %zu KiB "
             "whose buckets the cost model prices within %.0f%% of one "
             "all-reduce of all %zu gradients (%.2f ms vs %.2f ms%s; %s, "
             "%s wire; links: %s)",
             t >> 10, p->nb, TC_THETA_MIN >> 10, (TC_THETA_SLACK - 1) * 100,
             total, sum * 1e3, whole * 1e3, before, tcomm_algo_name(algo),
             tcomm_wire_name(wire), links);
    *theta = t;
    return TCOMM_OK;
}
