/*
 * torus_layout.h: public API of libtoruslayout, the topology-aware 2D-torus
 * layout used by spank_torus.so and the torus-layout tool.
 *
 * The library turns "which nodes did Slurm give this step, how many tasks on
 * each, and which switches are they under" into an R x C grid of tasks plus
 * node groups (one per leaf switch). It is pure computation: no RPCs, no
 * global state, so every slurmstepd that feeds it the same inputs gets the
 * same answer (the plugin relies on that to avoid any controller traffic).
 *
 * Conventions (common/torus_error.h): functions return a torus_layout_rc
 * (0 = success); on failure they record one sentence naming the input (file
 * and line, option, node) with TORUS_FAIL. Callers report torus_error_msg()
 * once, at their boundary (torus-layout's main, the SPANK callback).
 */
#ifndef TORUS_LAYOUT_H
#define TORUS_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/torus_error.h"

#include "topology/torus_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes. */
typedef enum torus_layout_rc {
    TORUS_LAYOUT_OK = 0,
    TORUS_LAYOUT_EINVAL, /* malformed input (spec, number, list, file line) */
    TORUS_LAYOUT_ENOFIT, /* an explicit RxC that cannot hold this step */
    TORUS_LAYOUT_ENOMEM, /* allocation failed */
    TORUS_LAYOUT_EIO,    /* a file could not be read */
    TORUS_LAYOUT_ERANGE, /* input exceeds a documented bound */
} torus_layout_rc;

/* Longest accepted spec / name / list, so hostile input cannot balloon. */
#define TORUS_LAYOUT_SPEC_MAX 32  /* "auto", "off", "RxC" */
#define TORUS_LAYOUT_NAME_MAX 256 /* a node or switch name */
#define TORUS_LAYOUT_LIST_MAX \
    (1u << 20) /* a hostlist or tasks-per-node string */
#define TORUS_LAYOUT_NODES_MAX (1u << 20) /* nodes in one step */
#define TORUS_LAYOUT_TASKS_MAX (1u << 30) /* tasks in one step */

const char *torus_layout_strerror(torus_layout_rc rc);

/* ------------------------------------------------------------------ spec */

typedef enum torus_layout_spec_kind {
    TORUS_SPEC_OFF = 0,
    TORUS_SPEC_AUTO,
    TORUS_SPEC_EXPLICIT,
} torus_layout_spec_kind;

typedef struct torus_layout_spec {
    torus_layout_spec_kind kind;
    uint32_t rows, cols; /* only for TORUS_SPEC_EXPLICIT */
} torus_layout_spec_t;

/* Parse "auto", "off" or "RxC" (R, C >= 1, decimal, no signs or spaces). */
TORUS_MUST_CHECK torus_layout_rc
torus_layout_spec_parse(const char *text, torus_layout_spec_t *out);
/* Write the canonical text of a spec ("auto", "off", "4x2"). */
void torus_layout_spec_format(const torus_layout_spec_t *spec, char *buf,
                              size_t len);

/* ------------------------------------------------------------- cost model */

/* The parameters and the model are libtoruscost's (topology/torus_cost.h),
 * shared with libtcomm: torus_cost_defaults(), torus_cost_set() with the
 * plugstack/tool keys, torus_cost_is_key(). */

/* Predicted all-reduce times, in seconds, for one layout. */
typedef struct torus_layout_prediction {
    double flat_ring_s;    /* one ring over all tasks, in torus order */
    double hierarchical_s; /* reduce in group, ring across groups, broadcast */
    double
        torus2d_s; /* row reduce-scatter, column all-reduce, row all-gather */
} torus_layout_prediction_t;

/* ------------------------------------------------------------ switch map */

/* Where the topology came from; the text goes into TORUS_SOURCE. */
typedef enum torus_layout_source {
    TORUS_SOURCE_TREE = 0, /* topology.conf of topology/tree */
    TORUS_SOURCE_ADDR,     /* SLURM_TOPOLOGY_ADDR strings */
    TORUS_SOURCE_NODELIST, /* no topology: every node under one switch */
    TORUS_SOURCE_BLOCK,    /* BlockName= lines (topology/block) */
    TORUS_SOURCE_TORUS3D,  /* torus:x:y:z coordinates (topology/torus3d) */
    TORUS_SOURCE_RING,     /* ring:position coordinates (topology/ring) */
} torus_layout_source;

/* The network forms of Slurm's topology plugins that the map can hold. A
 * map holds one kind; the layout applies the same rule to each: rows inside
 * a node, then inside the lowest level (leaf switch, block, or a physical
 * ring of torus3d/ring), columns across. */
typedef enum torus_layout_topo_kind {
    TORUS_TOPO_ANY = 0, /* parse: whichever one kind the file holds */
    TORUS_TOPO_TREE,    /* SwitchName= / switches: */
    TORUS_TOPO_BLOCK,   /* BlockName= + BlockSizes= / blocks: */
    TORUS_TOPO_TORUS3D, /* name:x:y:z addresses */
    TORUS_TOPO_RING,    /* name:position addresses */
} torus_layout_topo_kind;

/* "tree", "block", "torus3d", "ring" ("any" for TORUS_TOPO_ANY). */
const char *torus_layout_topo_kind_name(torus_layout_topo_kind kind);

/* Most BlockSizes= levels accepted (Slurm allows a handful). */
#define TORUS_LAYOUT_BLOCK_LEVELS_MAX 16

const char *torus_layout_source_name(torus_layout_source source);

/* Switches and the nodes under each leaf. Opaque. */
typedef struct torus_layout_topo torus_layout_topo_t;

/* Bounds on the topology.conf a reader accepts. Every slurmstepd of every
 * step reads and parses the whole file (spank_torus(8) has the cost), so the
 * plugin's default is far below Slurm's own limit; plugstack topology_max=
 * and torus-layout --topology-max move it within [MIN, MAX]. */
#define TORUS_LAYOUT_TOPO_FILE_DEFAULT (4u << 20)
#define TORUS_LAYOUT_TOPO_FILE_MIN     (64u << 10)
#define TORUS_LAYOUT_TOPO_FILE_MAX     (64u << 20)

/* Parse a topology.conf (SwitchName=, Nodes=, Switches=; # comments;
 * trailing-backslash continuation). A file larger than max_bytes (checked
 * with fstat before anything is read, and again while reading) fails with
 * TORUS_LAYOUT_ERANGE. Errors name the file and line. Keeps the tree lines
 * (BlockName=/BlockSizes= lines are checked and set aside). */
TORUS_MUST_CHECK torus_layout_rc torus_layout_topo_load(
    const char *path, size_t max_bytes, torus_layout_topo_t **out);
/* Same, from text already in memory (`name` is used in messages). */
TORUS_MUST_CHECK torus_layout_rc torus_layout_topo_parse(
    const char *text, size_t len, const char *name, torus_layout_topo_t **out);
/* Same, keeping the lines of `kind`: TORUS_TOPO_TREE (SwitchName=),
 * TORUS_TOPO_BLOCK (BlockName=, BlockSizes=: each size a power-of-two
 * multiple of the one before; every block needs Nodes=), or TORUS_TOPO_ANY
 * (the one form the file holds; both forms is an error naming the file). */
TORUS_MUST_CHECK torus_layout_rc torus_layout_topo_load_kind(
    const char *path, size_t max_bytes, torus_layout_topo_kind kind,
    torus_layout_topo_t **out);
TORUS_MUST_CHECK torus_layout_rc torus_layout_topo_parse_kind(
    const char *text, size_t len, const char *name, torus_layout_topo_kind kind,
    torus_layout_topo_t **out);
/* Parse a topology.yaml (Slurm 25.05+): a list of topologies, each with
 * `topology: NAME` first, optional `cluster_default: true`, and one of
 * `tree: {switches: [{switch, children, nodes}]}`,
 * `block: {block_sizes: [..], blocks: [{block, nodes}]}` or `flat: true`.
 * `want` names the partition's topology (PartitionName=.. Topology=);
 * NULL picks as Slurm does for a partition without one: the first with
 * cluster_default: true, else the first. A flat topology yields a map of
 * no switches (*out NULL, *flat true). Errors name the file and line. */
TORUS_MUST_CHECK torus_layout_rc torus_layout_topo_parse_yaml(
    const char *text, size_t len, const char *name, const char *want,
    torus_layout_topo_t **out, bool *flat);
TORUS_MUST_CHECK torus_layout_rc torus_layout_topo_load_yaml(
    const char *path, size_t max_bytes, const char *want,
    torus_layout_topo_t **out, bool *flat);
/* The Topology= of partition `partition` in slurm.conf at `conf_path` into
 * buf ("" when the partition names none or is not there). Include lines are
 * not followed. Errors name the file and line. */
TORUS_MUST_CHECK torus_layout_rc torus_layout_partition_topology(
    const char *conf_path, const char *partition, char *buf, size_t len);
/* SLURM_TOPOLOGY_ADDR values, one per line ('#' comments, blank lines), as
 * torus_layout_topo_add_addr() takes them; errors name the file and line. */
TORUS_MUST_CHECK torus_layout_rc torus_layout_topo_parse_addr(
    const char *text, size_t len, const char *name, torus_layout_topo_t **out);
/* True when `path` names a topology.yaml (ends in .yaml or .yml). */
bool torus_layout_topo_is_yaml(const char *path);
/* Load a topology file: a name ending in .yaml or .yml is a topology.yaml
 * (`want` as above; the chosen topology must be of `kind` unless ANY), one
 * ending in .addr a list of addresses, any other a topology.conf keeping
 * the lines of `kind`. */
TORUS_MUST_CHECK torus_layout_rc torus_layout_topo_load_any(
    const char *path, size_t max_bytes, torus_layout_topo_kind kind,
    const char *want, torus_layout_topo_t **out, bool *flat);
/* Which form a map holds (TORUS_TOPO_ANY for an empty one). */
torus_layout_topo_kind torus_layout_topo_kind_of(const torus_layout_topo_t *t);
/* BlockSizes= of a block map (count; *sizes points into the map). */
uint32_t torus_layout_topo_block_sizes(const torus_layout_topo_t *t,
                                       const uint32_t **sizes);
/* An empty map, to be filled with torus_layout_topo_add_addr(). */
TORUS_MUST_CHECK torus_layout_rc
torus_layout_topo_new(torus_layout_topo_t **out);
/* Add one SLURM_TOPOLOGY_ADDR value, e.g. "spine.leaf1.n2" (root first,
 * node last). A bare "n2" adds a node under no switch. The coordinate
 * forms "NAME:X:Y:Z.node" (topology/torus3d) and "NAME:POS.node"
 * (topology/ring) give the node's place on torus or ring NAME; a map holds
 * one form only. */
TORUS_MUST_CHECK torus_layout_rc
torus_layout_topo_add_addr(torus_layout_topo_t *topo, const char *addr);
void torus_layout_topo_free(torus_layout_topo_t *topo);
/* The topology.conf Slurm reads: next to slurm.conf. `conf_path` is the
 * slurm.conf path; NULL means $SLURM_CONF, then /etc/slurm/slurm.conf. */
TORUS_MUST_CHECK torus_layout_rc
torus_layout_topo_conf_path(const char *conf_path, char *buf, size_t len);
/* Same for any file next to slurm.conf ("topology.yaml"). */
TORUS_MUST_CHECK torus_layout_rc torus_layout_conf_sibling(
    const char *conf_path, const char *file, char *buf, size_t len);
size_t torus_layout_topo_switch_count(const torus_layout_topo_t *topo);

/* ----------------------------------------------------------- node lists */

/* How many names a Slurm hostlist holds, without expanding it (libslurm
 * keeps ranges as ranges): callers check a count they trust against this
 * before torus_layout_names_expand() allocates one string per name. */
TORUS_MUST_CHECK torus_layout_rc torus_layout_names_count(const char *hostlist,
                                                          size_t *count);
/* Expand a Slurm hostlist ("n[001-004],m7") with libslurm, in order. The
 * array and the names are freed with torus_layout_names_free(). */
TORUS_MUST_CHECK torus_layout_rc torus_layout_names_expand(const char *hostlist,
                                                           char ***names,
                                                           size_t *count);
void torus_layout_names_free(char **names, size_t count);
/* Compress names back to a ranged hostlist string (malloc'd). */
char *torus_layout_names_compress(char *const *names, size_t count);

/* Parse Slurm's tasks-per-node syntax ("8(x3),4" or "2") into one count per
 * node. `nnodes` is how many nodes the list must cover; a single bare
 * number covers every node (the tool's --tasks-per-node 8). */
TORUS_MUST_CHECK torus_layout_rc torus_layout_tasks_parse(const char *text,
                                                          size_t nnodes,
                                                          uint32_t *counts);

/* ------------------------------------------------------------ plugstack */

/* First switch-map source spank_torus.so tries (plugstack topology=). */
typedef enum torus_layout_topo_pref {
    TORUS_TOPO_PREF_TREE = 0, /* topology.conf, then flat, then nodelist */
    TORUS_TOPO_PREF_ADDR,     /* flat (TopologyPlugin=topology/none), then
                               * nodelist */
    TORUS_TOPO_PREF_NONE,     /* nodelist */
} torus_layout_topo_pref;

const char *torus_layout_topo_pref_name(torus_layout_topo_pref pref);

/* Most NICs (rails) plugstack nics= lists. */
#define TORUS_LAYOUT_NICS_MAX 16

/* The arguments of spank_torus.so's plugstack.conf line. */
typedef struct torus_layout_plugstack {
    torus_layout_spec_t default_spec; /* default= (off) */
    torus_layout_topo_pref topology;  /* topology= (tree) */
    size_t topology_max;              /* topology_max= (4M) */
    torus_cost_t cost;                /* node_lat_us= ... bytes= */
    bool verbose;                     /* verbose */
    /* topology_file=: an absolute path read instead of Slurm's own file
     * (.yaml/.yml: topology.yaml, .addr: SLURM_TOPOLOGY_ADDR lines, else
     * topology.conf), "" when not given. */
    char topology_file[128];
    /* nics=mlx5_0,mlx5_1[:port]: one NIC per rail, column c uses
     * nics[c % nnics] (NCCL_IB_HCA, UCX_NET_DEVICES). */
    char nics[TORUS_LAYOUT_NICS_MAX][32];
    uint32_t nnics;
} torus_layout_plugstack_t;

/* Parse plugstack arguments (the words after the plugin path) into cfg,
 * defaults first. Strict: every argument is key=value from plugstack.c's
 * table or the cost model's keys, or the flag `verbose`. The plugin and
 * torus-layout --check-plugstack both call this. Returns
 * TORUS_LAYOUT_EINVAL with a message starting "plugstack.conf: ". */
TORUS_MUST_CHECK torus_layout_rc torus_layout_plugstack_parse(
    int ac, char *const *av, torus_layout_plugstack_t *cfg);

/* One plugstack argument, for documentation: key, value syntax (NULL for
 * a bare flag) and a sentence (NULL when plugstack.c has none). */
typedef struct torus_layout_plugstack_doc {
    const char *key, *value, *help;
} torus_layout_plugstack_doc_t;

/* Fill d with argument i (0-based) of those torus_layout_plugstack_parse
 * accepts: plugstack.c's table, verbose, then the cost model's keys (whose
 * text is written into buf[n]). Returns 0, or 1 past the last. */
int torus_layout_plugstack_doc(size_t i, torus_layout_plugstack_doc_t *d,
                               char *buf, size_t n);

/* ---------------------------------------------------------------- layout */

typedef struct torus_layout_input {
    size_t nnodes;
    const char *const *nodes; /* names, in Slurm (step node id) order */
    const uint32_t *tasks;    /* tasks on each node */
    /* NULL: every node under one switch. Reported as source "nodelist",
     * unless `source` is TORUS_SOURCE_ADDR (a flat topology, proven by
     * SLURM_TOPOLOGY_ADDR_PATTERN=node). */
    const torus_layout_topo_t *topo;
    torus_layout_source source; /* what `topo` was built from */
    torus_layout_spec_t spec;
    torus_cost_t cost; /* machine part; the layout part is filled here */
} torus_layout_input_t;

/* Where one task sits. */
typedef struct torus_layout_task {
    uint32_t row,
        col; /* TORUS_COORD; also its position in the column / row ring */
    uint32_t group;      /* TORUS_GROUP */
    uint32_t group_rank; /* position in its group's ring */
    uint32_t
        node_index; /* TORUS_NODE_INDEX: its node's position in torus order */
} torus_layout_task_t;

typedef struct torus_layout torus_layout_t;

/* Compute the layout. On success *out is set even when the torus ended up
 * off (spec off, non-uniform tasks per node): check torus_layout_enabled().
 * An explicit spec that does not fit returns TORUS_LAYOUT_ENOFIT. */
TORUS_MUST_CHECK torus_layout_rc
torus_layout_compute(const torus_layout_input_t *in, torus_layout_t **out);
void torus_layout_free(torus_layout_t *layout);

bool torus_layout_enabled(const torus_layout_t *layout);
uint32_t torus_layout_rows(const torus_layout_t *layout);
uint32_t torus_layout_cols(const torus_layout_t *layout);
uint32_t torus_layout_tasks_per_node(const torus_layout_t *layout);
size_t torus_layout_node_count(const torus_layout_t *layout);
uint64_t torus_layout_task_count(const torus_layout_t *layout);
uint32_t torus_layout_group_count(const torus_layout_t *layout);
torus_layout_source torus_layout_source_of(const torus_layout_t *layout);
/* One sentence on why this shape (or why the torus is off). */
const char *torus_layout_reason(const torus_layout_t *layout);
/* Slurm node id of the node at torus position `pos`. */
size_t torus_layout_node_at(const torus_layout_t *layout, size_t pos);
/* Group of the node with Slurm node id `node`. */
uint32_t torus_layout_node_group(const torus_layout_t *layout, size_t node);
/* Name of the leaf switch of group `g` (or "-" without a topology). */
const char *torus_layout_group_switch(const torus_layout_t *layout, uint32_t g);
/* Place local task `local` of Slurm node id `node`. */
TORUS_MUST_CHECK torus_layout_rc
torus_layout_place(const torus_layout_t *layout, size_t node, uint32_t local,
                   torus_layout_task_t *out);
/* Block distribution (Slurm's default): the node and local id of global id. */
TORUS_MUST_CHECK torus_layout_rc
torus_layout_block_task(const torus_layout_t *layout, uint64_t procid,
                        size_t *node, uint32_t *local);
/* Rows that span more than one leaf switch (0 for a clean layout). */
uint32_t torus_layout_rows_crossing_leaves(const torus_layout_t *layout);
/* Predicted all-reduce times of `bytes` (fp32) on this layout, by the one
 * cost model with `cost`'s machine parameters. */
void torus_layout_predict(const torus_layout_t *layout,
                          const torus_cost_t *cost, uint64_t bytes,
                          torus_layout_prediction_t *out);

#ifdef __cplusplus
}
#endif

#endif /* TORUS_LAYOUT_H */
