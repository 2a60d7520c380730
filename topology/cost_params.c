/* topology/cost_params.c: the machine parameters of the one cost model
 * (torus_cost.h): their documented defaults, the test machine's measured
 * values, and setting them by key, the same keys for every consumer
 * (plugstack arguments, torus-layout --cost, libtcomm's TCOMM_COST).
 * Every value is bounded so that a unit mistake is an error, not a model
 * of an impossible machine. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/torus_error.h"
#include "topology/torus_cost.h"

void torus_cost_defaults(torus_cost_t *m)
{
    *m = (torus_cost_t){0};
    /* Node: shared memory or NVLink-class copies. Leaf: one 100 Gb/s hop
     * through a switch. Cross: the spine path, 2:1 oversubscribed as in most
     * fat trees, so half the leaf bandwidth and twice the latency. */
    m->link[TORUS_LINK_NODE] = (torus_cost_link_t){1e-6, 50e9};
    m->link[TORUS_LINK_LEAF] = (torus_cost_link_t){5e-6, 12.5e9};
    m->link[TORUS_LINK_CROSS] = (torus_cost_link_t){10e-6, 6.25e9};
    m->rails = 1;
    /* Adds and casts at GPU memory speed: far from the bottleneck. */
    m->reduce_Bps = 400e9;
    m->convert_Bps = 400e9;
    /* ResNet-50's fp32 gradient, the workload torus is built around. */
    m->bytes = 100u << 20;
    m->P = m->ranks_per_node = m->rows = m->cols = m->group_size = 1;
    m->pipeline = 1;
}

void torus_cost_local_machine(torus_cost_t *m)
{
    /* Shared memory between ranks (OpenMPI vader) and loopback TCP between
     * emulated nodes, measured by tcomm_probe_links; one switch, so the
     * spine is the loopback too. */
    m->link[TORUS_LINK_NODE] = (torus_cost_link_t){3e-6, 3e9};
    m->link[TORUS_LINK_LEAF] = (torus_cost_link_t){30e-6, 1.5e9};
    m->link[TORUS_LINK_CROSS] = m->link[TORUS_LINK_LEAF];
    m->rails = 1;
    m->reduce_Bps = 6e9;
    m->convert_Bps = 6e9;
}

/* key -> what it sets, and the bound that catches unit mistakes (1e6 us is
 * a second of latency, 1e5 GB/s is far beyond any link or memory). */
typedef enum { _LAT, _BW, _RATE_REDUCE, _RATE_CONVERT, _RAILS } _kind;
static const struct {
    const char *key;
    _kind kind;
    torus_cost_link_class link;
} _keys[] = {
    {"node_lat_us", _LAT, TORUS_LINK_NODE},
    {"node_bw_gbs", _BW, TORUS_LINK_NODE},
    {"leaf_lat_us", _LAT, TORUS_LINK_LEAF},
    {"leaf_bw_gbs", _BW, TORUS_LINK_LEAF},
    {"cross_lat_us", _LAT, TORUS_LINK_CROSS},
    {"cross_bw_gbs", _BW, TORUS_LINK_CROSS},
    {"reduce_gbs", _RATE_REDUCE, TORUS_LINK_NODE},
    {"convert_gbs", _RATE_CONVERT, TORUS_LINK_NODE},
    {"rails", _RAILS, TORUS_LINK_NODE},
};
enum { _NKEYS = sizeof _keys / sizeof _keys[0] };

bool torus_cost_is_key(const char *key)
{
    if (strcmp(key, "bytes") == 0)
        return true;
    for (size_t i = 0; i < _NKEYS; i++)
        if (strcmp(key, _keys[i].key) == 0)
            return true;
    return false;
}

/* Documentation of key i (0-based, "bytes" last) for spank_torus(8) and
 * torus-layout(1): the text is built from the table and the defaults
 * above, so a new key or a new default reaches the man page by itself. */
static const char *const _link_words[] = {
    [TORUS_LINK_NODE] = "between the tasks of one node",
    [TORUS_LINK_LEAF] = "between nodes under one leaf switch",
    [TORUS_LINK_CROSS] = "between nodes under different leaf switches",
};

const char *torus_cost_key_doc(size_t i, const char **value, char *help,
                               size_t n)
{
    torus_cost_t d;
    torus_cost_defaults(&d);
    if (i == _NKEYS) {
        *value = "SIZE";
        snprintf(help, n,
                 "All-reduce size that auto optimises the grid for; K, M, G "
                 "are powers of 1024 (default %lluM).",
                 (unsigned long long)(d.bytes >> 20));
        return "bytes";
    }
    if (i > _NKEYS)
        return NULL;
    const torus_cost_link_t *l = &d.link[_keys[i].link];
    const char *w = _link_words[_keys[i].link];
    switch (_keys[i].kind) {
    case _LAT:
        *value = "US";
        snprintf(help, n,
                 "Latency of one message %s, in microseconds "
                 "(default %g).",
                 w, l->alpha_s * 1e6);
        break;
    case _BW:
        *value = "GBS";
        snprintf(help, n, "Bandwidth %s, in GB/s (default %g).", w,
                 l->bw_Bps / 1e9);
        break;
    case _RATE_REDUCE:
    case _RATE_CONVERT:
        *value = "GBS";
        snprintf(
            help, n, "GB/s at which one task %s (default %g).",
            _keys[i].kind == _RATE_REDUCE ? "adds fp32 values"
                                          : "casts fp32 to 16 bits",
            (_keys[i].kind == _RATE_REDUCE ? d.reduce_Bps : d.convert_Bps) /
                1e9);
        break;
    case _RAILS:
        *value = "N";
        snprintf(help, n, "Inter-node links per node (default %d).", d.rails);
        break;
    }
    return _keys[i].key;
}

/* A positive decimal like "12.5": digits, at most one dot, at most `max`. */
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

int torus_cost_parse_bytes(const char *text, uint64_t *out)
{
    size_t len = strnlen(text, 32);
    if (len == 0 || len >= 32)
        return TORUS_COST_EINVAL;
    const char *units = "KMG", *u = strchr(units, text[len - 1] & ~0x20);
    uint64_t mult = 1;
    if (text[len - 1] >= 'A' && u && *u) {
        mult = 1ull << (10 * (u - units + 1));
        len--;
    }
    char digits[32];
    memcpy(digits, text, len);
    digits[len] = '\0';
    /* Whole numbers only; 1 TiB keeps n/p products far from double
     * precision trouble. */
    double v;
    if (!_parse_positive(digits, (double)((1ull << 40) / mult), &v) ||
        strchr(digits, '.') || (digits[0] == '0'))
        return TORUS_COST_EINVAL;
    *out = (uint64_t)v * mult;
    return TORUS_COST_OK;
}

/* The message for a value `key` does not accept. */
static int _bad_value(const char *key, const char *value, _kind kind)
{
    static const char *const want[] = {
        [_LAT] = "a positive decimal number of microseconds (at most 1000000)",
        [_BW] = "a positive decimal number of GB/s (at most 100000)",
        [_RATE_REDUCE] = "a positive decimal number of GB/s (at most 100000)",
        [_RATE_CONVERT] = "a positive decimal number of GB/s (at most 100000)",
        [_RAILS] = "a whole number of links per node, 1 to 64",
    };
    return TORUS_FAIL(TORUS_COST_EINVAL, "%s=%.32s: expected %s", key, value,
                      want[kind]);
}

static int _set_one(torus_cost_t *m, size_t i, const char *value)
{
    double v;
    _kind kind = _keys[i].kind;
    double max = kind == _LAT ? 1e6 : kind == _RAILS ? 64 : 1e5;
    if (!_parse_positive(value, max, &v) || (kind == _RAILS && v != floor(v)))
        return _bad_value(_keys[i].key, value, kind);
    switch (kind) {
    case _LAT:
        m->link[_keys[i].link].alpha_s = v * 1e-6;
        break;
    case _BW:
        m->link[_keys[i].link].bw_Bps = v * 1e9;
        break;
    case _RATE_REDUCE:
        m->reduce_Bps = v * 1e9;
        break;
    case _RATE_CONVERT:
        m->convert_Bps = v * 1e9;
        break;
    case _RAILS:
        m->rails = (int)v;
        break;
    }
    return TORUS_COST_OK;
}

int torus_cost_set(torus_cost_t *m, const char *key, const char *value)
{
    if (!value || !*value)
        return TORUS_FAIL(TORUS_COST_EINVAL, "%s needs a value", key);
    if (strcmp(key, "bytes") == 0) {
        if (torus_cost_parse_bytes(value, &m->bytes) != TORUS_COST_OK)
            return TORUS_FAIL(TORUS_COST_EINVAL,
                              "bytes=%.32s: expected a positive size like "
                              "100M (K, M, G are powers of 1024, at most 1T)",
                              value);
        return TORUS_COST_OK;
    }
    for (size_t i = 0; i < _NKEYS; i++)
        if (strcmp(key, _keys[i].key) == 0)
            return _set_one(m, i, value);
    return TORUS_FAIL(TORUS_COST_EINVAL, "unknown cost parameter '%.64s'", key);
}

int torus_cost_set_list(torus_cost_t *m, const char *list, const char *what)
{
    char item[96];
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ", ");
        if (n >= sizeof item)
            return TORUS_FAIL(TORUS_COST_EINVAL, "%s: '%.32s...' is too long",
                              what, p);
        memcpy(item, p, n);
        item[n] = '\0';
        p += n;
        p += strspn(p, ", ");
        if (n == 0)
            continue;
        char *eq = strchr(item, '=');
        if (!eq)
            return TORUS_FAIL(TORUS_COST_EINVAL, "%s: '%s' is not key=value",
                              what, item);
        *eq = '\0';
        int rc = torus_cost_set(m, item, eq + 1);
        if (rc)
            return torus_error_prefix(rc, "%s", what);
    }
    return TORUS_COST_OK;
}

int torus_cost_check(const torus_cost_t *m)
{
    for (int k = 0; k < TORUS_LINK_COUNT; k++)
        if (!(m->link[k].alpha_s >= 0) || !(m->link[k].bw_Bps > 0))
            return TORUS_FAIL(TORUS_COST_EINVAL, "bad link parameters");
    if (!(m->reduce_Bps > 0) || !(m->convert_Bps > 0) || m->rails < 1)
        return TORUS_FAIL(TORUS_COST_EINVAL, "bad rates or rails");
    if (m->bytes == 0)
        return TORUS_FAIL(TORUS_COST_EINVAL, "bytes must be positive");
    return TORUS_COST_OK;
}
