/* topology/torus_cost.h: the one alpha-beta cost model of torus's all-reduce
 * algorithms (libtoruscost). Both consumers price with it:
 *   - libtoruslayout: `auto` picks the grid whose torus2d time is least, and
 *     torus-layout prints ring / hier / torus2d for the chosen grid;
 *   - libtcomm: `hybrid` picks the cheapest algorithm per bucket and
 *     `torus-bench --model` prints every algorithm (trainer/comm/core/model.h
 *     is a thin shim over this header).
 * So the plugin and the trainer cannot disagree about what is cheapest: they
 * read the same struct through the same functions.
 *
 * A link class is (alpha = seconds per message, bw = bytes per second):
 * inside a node, between nodes under one leaf switch, across the spine; a
 * node has `rails` inter-node links. A ring step moves one chunk over every
 * edge of its ring at once and costs alpha + chunk * share / (bw) on its
 * slowest edge, where share = ceil(flows / rails) counts the ring edges that
 * leave one node together. The formulas are in cost_model.c and
 * docs/env-contract.md ("Cost model").
 *
 * Pure computation, no Slurm, no MPI: layer 1 (includes only common/). */
#ifndef TORUS_COST_MODEL_H
#define TORUS_COST_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes; EINVAL has the value of TORUS_LAYOUT_EINVAL so that the
 * layout library passes it up unchanged. */
typedef enum torus_cost_rc {
    TORUS_COST_OK = 0,
    TORUS_COST_EINVAL = 1, /* unknown key, malformed or out-of-range value */
} torus_cost_rc;

/* Link classes, fastest first. */
typedef enum torus_cost_link_class {
    TORUS_LINK_NODE = 0, /* two ranks on one node (shared memory / NVLink) */
    TORUS_LINK_LEAF,     /* two nodes under one leaf switch, in one block
                          * (topology/block), or torus neighbours */
    TORUS_LINK_CROSS,    /* two nodes under different leaf switches (spine)
                          * or in different blocks */
    TORUS_LINK_COUNT,
} torus_cost_link_class;

typedef struct torus_cost_link {
    double alpha_s; /* latency per message */
    double bw_Bps;  /* bandwidth, bytes per second (per rail between nodes) */
} torus_cost_link_t;

/* The algorithms the model prices, in tcomm_algo's order (the shim in
 * trainer/comm checks that at compile time). */
typedef enum torus_cost_algo {
    TORUS_COST_FLAT = 0, /* MPI's own all-reduce (recursive doubling or
                          * Rabenseifner, whichever is cheaper) */
    TORUS_COST_RING,     /* one ring over all ranks, contiguous */
    TORUS_COST_HIER,     /* reduce in group, ring of leaders, broadcast */
    TORUS_COST_HIER_RS,  /* reduce-scatter in group, slices across groups */
    TORUS_COST_TORUS2D,  /* RS along rows, AR along columns, AG along rows */
    TORUS_COST_ALGO_COUNT,
} torus_cost_algo;

/* in_place bits: this call's gradients lie in node-shared memory and these
 * rings sum them in place (trainer/comm/algo/shared_grads.c). */
#define TORUS_COST_INPLACE_ROWS   1u /* torus2d rows */
#define TORUS_COST_INPLACE_GROUPS 2u /* hier-rs groups */

/* Everything the model reads: the machine (links, rails, rates: settable by
 * key, see torus_cost_set) and the layout being priced (filled by the caller:
 * the layout library per candidate grid, libtcomm from its communicators).
 * Ranks sit contiguously, ranks_per_node to a node. */
typedef struct torus_cost {
    /* machine */
    torus_cost_link_t link[TORUS_LINK_COUNT];
    int rails;          /* inter-node links per node */
    double reduce_Bps;  /* fp32 bytes/s one rank adds (decode + add) */
    double convert_Bps; /* fp32 bytes/s one rank casts to or from a 16-bit
                         * wire (a round trip costs 2 bytes / convert_Bps) */
    uint64_t bytes;     /* the all-reduce size `auto` optimises for */
    /* layout */
    int P;              /* ranks */
    int ranks_per_node; /* contiguous ranks share a node */
    int rows, cols;     /* torus2d grid (rows * cols == P) */
    int group_size;     /* hier / hier-rs group (contiguous ranks) */
    int leaf_ranks;     /* ranks under one leaf switch; a ring whose aligned
                         * span does not fit one leaf crosses the spine;
                         * 0: every node under one leaf */
    int shm;            /* rows/groups inside a node reduce in shared memory */
    int pipeline;       /* most pieces of a pipelined torus2d/hier (1: none) */
    unsigned in_place;  /* TORUS_COST_INPLACE_* (0 for the packed paths) */
} torus_cost_t;

/* The documented cluster defaults (docs/env-contract.md, "Cost model"):
 * 100 Gb/s leaves under a 2:1 spine, one rail, one rank on one node. */
void torus_cost_defaults(torus_cost_t *m);
/* The machine part measured on this project's 2-core test machine (shared
 * memory inside a node, loopback TCP between emulated nodes): libtcomm's
 * starting point before it probes. Leaves the layout part alone. */
void torus_cost_local_machine(torus_cost_t *m);

/* Set one machine parameter by its key (plugstack arg, torus-layout --cost,
 * TCOMM_COST for libtcomm): node_lat_us, node_bw_gbs, leaf_lat_us,
 * leaf_bw_gbs, cross_lat_us, cross_bw_gbs, rails, reduce_gbs, convert_gbs,
 * bytes. Returns 0, or TORUS_COST_EINVAL with TORUS_FAIL's message set. */
int torus_cost_set(torus_cost_t *m, const char *key, const char *value);
/* Apply "key=value,key=value" (commas or spaces between). `what` names the
 * source in messages (e.g. "TCOMM_COST"). */
int torus_cost_set_list(torus_cost_t *m, const char *list, const char *what);
/* True when `key` names a cost parameter (lets callers reject unknown keys). */
bool torus_cost_is_key(const char *key);
/* Key i of the cost model (0-based) for documentation: returns its name,
 * sets *value to its value's syntax (US, GBS, N, SIZE) and writes a
 * sentence with its unit and default into help[n]; NULL past the last. */
const char *torus_cost_key_doc(size_t i, const char **value, char *help,
                               size_t n);
/* Parse a byte count with an optional K, M or G suffix (powers of 1024). */
int torus_cost_parse_bytes(const char *text, uint64_t *out);
/* 0 when every parameter can be priced with, else TORUS_COST_EINVAL. */
int torus_cost_check(const torus_cost_t *m);

/* Predicted seconds for an all-reduce of `count` fp32 values sent with
 * `wire_bytes` bytes per value (4: fp32, 2: fp16/bf16). Negative when the
 * algorithm cannot run on this layout (torus2d without a grid, hier-rs with
 * unequal groups). */
double torus_cost_time(const torus_cost_t *m, torus_cost_algo a, size_t count,
                       int wire_bytes);
/* The cheapest runnable algorithm (ties keep the earlier, simpler one). */
torus_cost_algo torus_cost_best(const torus_cost_t *m, size_t count,
                                int wire_bytes);
/* Pieces a pipelined message of wire_bytes runs in, at most `pipeline`: the
 * rule trainer/comm/algo/pipeline.c cuts by (1: not cut). parts: the chunks
 * one piece is cut into on its network ring (torus2d, hier-rs: P; hier: the
 * number of groups), each of which is one ring step's message. */
int torus_cost_pieces(int pipeline, double wire_bytes, int parts);
/* Seconds for the least data a node must send in any all-reduce,
 * 2(N-1)/N * S / (bw_leaf * rails), N nodes. 0 on one node. */
double torus_cost_link_limit(const torus_cost_t *m, size_t count,
                             int wire_bytes);

#ifdef __cplusplus
}
#endif

#endif /* TORUS_COST_MODEL_H */
