/*
 * internal.h: helpers shared between the files of libtoruslayout but not
 * part of its public API (strict number parsing, and the
 * switch-map queries the layout needs).
 */
#ifndef TORUS_LAYOUT_INTERNAL_H
#define TORUS_LAYOUT_INTERNAL_H

#include "common/torus_error.h"
#include "topology/torus_layout.h"

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
                                          size_t count, uint32_t *leaf);
/* Parent of switch `sw` (TORUS_NO_SWITCH at a root) and its name. */
uint32_t torus_layout_topo_parent(const torus_layout_topo_t *topo, uint32_t sw);
const char *torus_layout_topo_name(const torus_layout_topo_t *topo,
                                   uint32_t sw);

/* True when `s` is a hostlist libslurm can take without blowing up: every
 * host expression has at most one [range] group, brackets are balanced and
 * not nested. libslurm expands multi-dimensional expressions such as
 * "a[1-500]b[1-500]c[1-500]" eagerly (125M hosts, gigabytes), and node
 * lists can come from a job's environment. Expansion stays libslurm's job. */
bool torus_layout_hostlist_sane(const char *s);

/* FNV-1a, the one hash the library uses for name tables. */
uint64_t torus_layout_hash(const char *s);

#endif /* TORUS_LAYOUT_INTERNAL_H */
