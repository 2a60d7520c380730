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

/* Read a whole file of at most max_bytes (fstat first, then bounded). */
torus_layout_rc torus_layout_file_read(const char *path, size_t max_bytes,
                                       char **buf, size_t *len);

/* Fix the kind of a map being filled (EINVAL when it already holds
 * another). A torus3d/ring kind creates the coordinate table. */
torus_layout_rc torus_layout_topo_set_kind(torus_layout_topo_t *t,
                                           torus_layout_topo_kind kind);
/* Add a switch/block entry by name, as a topology.conf line does (yaml.c
 * fills maps through this). `nodes`/`children` may be NULL. */
torus_layout_rc torus_layout_topo_define(torus_layout_topo_t *t,
                                         const char *name, bool block,
                                         const char *nodes,
                                         const char *children, uint32_t line,
                                         const char *file);
/* Set BlockSizes from text "4,16" (as the topology.conf line). */
torus_layout_rc torus_layout_topo_define_sizes(torus_layout_topo_t *t,
                                               const char *text, uint32_t line,
                                               const char *file);
/* Finish a map filled by define: link parents, check, set the kind. */
torus_layout_rc torus_layout_topo_finish(torus_layout_topo_t *t,
                                         const char *file,
                                         torus_layout_topo_kind kind);

/* ------------------------------------------------ coordinates (coords.c) */

/* Where torus3d/ring nodes sit: one entry per node address. */
typedef struct torus_layout_coords torus_layout_coords_t;
torus_layout_rc torus_layout_coords_new(torus_layout_coords_t **out);
void torus_layout_coords_free(torus_layout_coords_t *c);
/* The kind of "NAME:X:Y:Z.node" (torus3d) or "NAME:POS.node" (ring), addr
 * of len bytes; TORUS_LAYOUT_EINVAL naming it when it is neither. */
torus_layout_rc torus_layout_coords_kind(const char *addr, size_t len,
                                         torus_layout_topo_kind *kind);
/* Add such an address to c. The map's kind is switchmap.c's to check
 * (torus_layout_topo_add_addr): coords.c knows the table, not the map, so
 * that switchmap.c calls down into it and never the other way. */
torus_layout_rc torus_layout_coords_add_addr(torus_layout_coords_t *c,
                                             const char *addr, size_t len);
/* switchmap.c: the map's coordinate table (NULL for a switch tree). */
const torus_layout_coords_t *
torus_layout_topo_coords(const torus_layout_topo_t *t);

/* The node order of a torus3d/ring step (see coords.c): order[pos] = node
 * id, group[node] (one group per row line), *nodes_per_row the row length
 * in nodes that makes every ring physical (1 when only rows inside nodes
 * are), and a sentence for the layout's reason. */
typedef struct torus_layout_coord_order {
    size_t *order;
    uint32_t *group;
    uint32_t ngroups;
    size_t nodes_per_row;
    char note[160];
} torus_layout_coord_order_t;
torus_layout_rc torus_layout_coords_order(const torus_layout_coords_t *c,
                                          const char *const *names,
                                          size_t count,
                                          torus_layout_coord_order_t *out);

/* Name of the (first) torus or ring of a coordinate map, for group names. */
const char *torus_layout_coords_net(const torus_layout_coords_t *c);

/* FNV-1a, the one hash the library uses for name tables. */
uint64_t torus_layout_hash(const char *s);

#endif /* TORUS_LAYOUT_INTERNAL_H */
