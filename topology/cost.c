/*
 * cost.c: link parameters and the alpha-beta model that `auto` uses to pick
 * the number of columns, and that torus-layout prints as its prediction.
 *
 * Model (documented in docs/env-contract.md): sending s bytes over a link of
 * class k costs alpha_k + s * f / bw_k, where f is the number of rings that
 * leave one node through the same port at once. A ring step waits for its
 * slowest hop, so each ring is charged at the slowest class it crosses.
 *   ring reduce-scatter (or all-gather) over p:  (p-1) * (alpha + (n/p) f/bw)
 *   ring all-reduce over p:                     2(p-1) * (alpha + (n/p) f/bw)
 *   2D torus (Sony):   RS over the row (C), all-reduce of n/C over the
 *                      column (R), AG over the row.
 *   hierarchical (Tencent): reduce inside each group (RS + gather), ring
 *                      all-reduce across group leaders, broadcast back.
 *   flat ring:         one all-reduce ring over all P tasks.
 */
#include "config.h"

#include <string.h>

#include "topology/internal.h"

void torus_layout_cost_defaults(torus_layout_cost_t *cost)
{
    /* Intra-node: shared memory or NVLink-class copies. Leaf: one 100 Gb/s
     * hop through a switch. Cross: the spine path, 2:1 oversubscribed as in
     * most fat trees, so half the leaf bandwidth and twice the latency. */
    cost->latency_s[TORUS_LINK_NODE] = 1e-6;
    cost->bandwidth_Bps[TORUS_LINK_NODE] = 50e9;
    cost->latency_s[TORUS_LINK_LEAF] = 5e-6;
    cost->bandwidth_Bps[TORUS_LINK_LEAF] = 12.5e9;
    cost->latency_s[TORUS_LINK_CROSS] = 10e-6;
    cost->bandwidth_Bps[TORUS_LINK_CROSS] = 6.25e9;
    /* ResNet-50's fp32 gradient, the workload torus is built around. */
    cost->bytes = 100u << 20;
}

/* key -> (link class, is-latency); bytes handled separately. */
static const struct {
    const char *key;
    torus_layout_link link;
    bool latency;
} _keys[] = {
    {"node_lat_us", TORUS_LINK_NODE, true},
    {"node_bw_gbs", TORUS_LINK_NODE, false},
    {"leaf_lat_us", TORUS_LINK_LEAF, true},
    {"leaf_bw_gbs", TORUS_LINK_LEAF, false},
    {"cross_lat_us", TORUS_LINK_CROSS, true},
    {"cross_bw_gbs", TORUS_LINK_CROSS, false},
};

bool torus_layout_cost_is_key(const char *key)
{
    if (strcmp(key, "bytes") == 0)
        return true;
    for (size_t i = 0; i < sizeof _keys / sizeof _keys[0]; i++)
        if (strcmp(key, _keys[i].key) == 0)
            return true;
    return false;
}

torus_layout_rc torus_layout_parse_bytes(const char *text, uint64_t *out)
{
    size_t len = strnlen(text, 32);
    if (len == 0 || len >= 32)
        return TORUS_LAYOUT_EINVAL;
    uint64_t mult = 1;
    switch (text[len - 1]) {
    case 'K':
    case 'k':
        mult = 1ull << 10;
        len--;
        break;
    case 'M':
    case 'm':
        mult = 1ull << 20;
        len--;
        break;
    case 'G':
    case 'g':
        mult = 1ull << 30;
        len--;
        break;
    default:
        break;
    }
    uint64_t v;
    /* 1 TiB bound keeps n/p products far from double precision trouble. */
    if (!torus_layout_parse_uint(text, text + len, (1ull << 40) / mult, &v) ||
        v == 0)
        return TORUS_LAYOUT_EINVAL;
    *out = v * mult;
    return TORUS_LAYOUT_OK;
}

/* A positive decimal like "12.5": digits, at most one dot, bounded. */
static bool _parse_positive(const char *text, double max, double *out)
{
    size_t len = strnlen(text, 24);
    if (len == 0 || len >= 24)
        return false;
    double v = 0, scale = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (ch == '.' && scale == 0) {
            scale = 1;
        } else if (ch >= '0' && ch <= '9') {
            if (scale > 0) {
                scale /= 10;
                v += (ch - '0') * scale;
            } else {
                v = v * 10 + (ch - '0');
            }
        } else {
            return false;
        }
        if (v > max)
            return false;
    }
    if (!(v > 0))
        return false;
    *out = v;
    return true;
}

torus_layout_rc torus_layout_cost_set(torus_layout_cost_t *cost,
                                      const char *key, const char *value,
                                      char *err, size_t errlen)
{
    if (!value || !*value)
        return torus_layout_errf(err, errlen, TORUS_LAYOUT_EINVAL,
                                 "%s needs a value", key);
    if (strcmp(key, "bytes") == 0) {
        if (torus_layout_parse_bytes(value, &cost->bytes) != TORUS_LAYOUT_OK)
            return torus_layout_errf(
                err, errlen, TORUS_LAYOUT_EINVAL,
                "bytes=%.32s: expected a positive size like 100M (K, M, G "
                "are powers of 1024, at most 1T)",
                value);
        return TORUS_LAYOUT_OK;
    }
    for (size_t i = 0; i < sizeof _keys / sizeof _keys[0]; i++) {
        if (strcmp(key, _keys[i].key) != 0)
            continue;
        double v;
        /* Bounds: 1e6 us is a second of latency, 1e5 GB/s is far beyond any
         * link; both catch unit mistakes rather than real hardware. */
        if (!_parse_positive(value, _keys[i].latency ? 1e6 : 1e5, &v))
            return torus_layout_errf(
                err, errlen, TORUS_LAYOUT_EINVAL,
                "%s=%.32s: expected a positive decimal number%s", key, value,
                _keys[i].latency ? " of microseconds (at most 1000000)"
                                 : " of GB/s (at most 100000)");
        if (_keys[i].latency)
            cost->latency_s[_keys[i].link] = v * 1e-6;
        else
            cost->bandwidth_Bps[_keys[i].link] = v * 1e9;
        return TORUS_LAYOUT_OK;
    }
    return torus_layout_errf(err, errlen, TORUS_LAYOUT_EINVAL,
                             "unknown cost parameter '%.64s'", key);
}

/* (p-1) steps of n/p bytes: one reduce-scatter or one all-gather. */
static double _ring_half(const torus_layout_cost_t *c, uint64_t p, double n,
                         torus_layout_link k, uint32_t flows)
{
    if (p <= 1)
        return 0;
    double chunk = n / (double)p;
    return (double)(p - 1) *
           (c->latency_s[k] +
            chunk * (double)(flows ? flows : 1) / c->bandwidth_Bps[k]);
}

void torus_layout_model(const torus_layout_shape_t *s,
                        const torus_layout_cost_t *cost, uint64_t bytes,
                        torus_layout_prediction_t *out)
{
    double n = (double)bytes;

    out->flat_ring_s = 2 * _ring_half(cost, s->tasks, n, s->flat_link, 1);

    /* Tencent: the group reduce and the broadcast each move n bytes through
     * a ring of the group's tasks (RS + gather, scatter + AG). */
    double in_group =
        2 * _ring_half(cost, s->max_group_tasks, n, s->group_link, 1);
    out->hierarchical_s =
        2 * in_group + 2 * _ring_half(cost, s->ngroups, n, TORUS_LINK_CROSS, 1);

    out->torus2d_s =
        2 * _ring_half(cost, s->cols, n, s->row_link, s->row_flows) +
        2 * _ring_half(cost, s->rows, n / (double)s->cols, s->col_link,
                       s->col_flows);
}
