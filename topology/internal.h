/*
 * internal.h: helpers shared between the files of libtoruslayout but not
 * part of its public API (error formatting, strict number parsing, and the
 * switch-map queries the layout needs).
 */
#ifndef TORUS_LAYOUT_INTERNAL_H
#define TORUS_LAYOUT_INTERNAL_H

#include "topology/torus_layout.h"

/* printf into an optional err buffer; returns rc so callers can
 * `return torus_layout_errf(err, len, TORUS_LAYOUT_EINVAL, "...")`. */
torus_layout_rc torus_layout_errf(char *err, size_t errlen, torus_layout_rc rc,
                                  const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Strict decimal parse of [p, end): digits only, no sign, no overflow of
 * `max`. Returns false on anything else. */
bool torus_layout_parse_uint(const char *p, const char *end, uint64_t max,
                             uint64_t *out);

/* Deepest switch tree accepted (real fat trees have 2 to 4 levels). It
 * bounds every walk up the tree and rules out cycles. */
#define TORUS_LAYOUT_DEPTH_MAX 64

/* No switch: the value torus_layout_topo_resolve() stores for unknown nodes. */
#define TORUS_NO_SWITCH UINT32_MAX

/* For each of `count` names, the index of its leaf switch, or TORUS_NO_SWITCH
 * when the map does not list it. */
torus_layout_rc torus_layout_topo_resolve(const torus_layout_topo_t *topo,
                                          const char *const *names,
                                          size_t count, uint32_t *leaf,
                                          char *err, size_t errlen);
/* Parent of switch `sw` (TORUS_NO_SWITCH at a root) and its name. */
uint32_t torus_layout_topo_parent(const torus_layout_topo_t *topo, uint32_t sw);
const char *torus_layout_topo_name(const torus_layout_topo_t *topo,
                                   uint32_t sw);

/* What the cost model needs to know about one layout: the slowest link each
 * ring crosses and how many rings share one node's network port. */
typedef struct torus_layout_shape {
    uint64_t tasks;      /* P */
    uint32_t rows, cols; /* R x C */
    uint32_t ngroups;
    uint32_t max_group_tasks;     /* tasks in the biggest group */
    torus_layout_link row_link;   /* slowest hop of the slowest row ring */
    torus_layout_link col_link;   /* slowest hop of the slowest column ring */
    torus_layout_link flat_link;  /* slowest hop of one ring over all tasks */
    torus_layout_link group_link; /* slowest hop inside the slowest group */
    uint32_t row_flows;           /* row rings leaving one node at once */
    uint32_t col_flows;           /* column rings leaving one node at once */
} torus_layout_shape_t;

/* The alpha-beta model itself (cost.c). */
void torus_layout_model(const torus_layout_shape_t *shape,
                        const torus_layout_cost_t *cost, uint64_t bytes,
                        torus_layout_prediction_t *out);

/* True when `s` is a hostlist libslurm can take without blowing up: every
 * host expression has at most one [range] group, brackets are balanced and
 * not nested. libslurm expands multi-dimensional expressions such as
 * "a[1-500]b[1-500]c[1-500]" eagerly (125M hosts, gigabytes), and node
 * lists can come from a job's environment. Expansion stays libslurm's job. */
bool torus_layout_hostlist_sane(const char *s);

/* FNV-1a, the one hash the library uses for name tables. */
uint64_t torus_layout_hash(const char *s);

#endif /* TORUS_LAYOUT_INTERNAL_H */
