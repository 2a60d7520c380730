/* cost_model.h: the alpha-beta cost model of the all-reduce algorithms
 * exactly as libtcomm runs them (step counts, chunk sizes, how many flows
 * share a node's links). The hybrid algorithm picks with it per bucket, and
 * `torus-bench --model` prints it for clusters up to thousands of ranks.
 *
 * A link is (alpha = seconds per message, bw = bytes per second). A step of
 * a ring moves one chunk over every link of the ring at once, so a step
 * costs alpha + chunk * flows / (bw * rails) on its slowest link, where
 * flows is how many ring edges leave one node at once. */
#ifndef TORUS_TCOMM_COST_MODEL_H
#define TORUS_TCOMM_COST_MODEL_H

#include <stddef.h>

#include "trainer/comm/tcomm.h"

typedef struct {
    double alpha_s; /* latency per message */
    double bw_Bps;  /* bandwidth, bytes per second */
} tcomm_link;

typedef struct {
    int P;              /* ranks */
    int ranks_per_node; /* contiguous ranks share a node */
    int rows, cols;     /* torus2d grid (rows * cols == P) */
    int group_size;     /* hier / hier-rs group (contiguous ranks) */
    int rails; /* inter-node links per node (columns can use their own) */
    tcomm_link intra, inter;
    double reduce_Bps;  /* fp32 bytes/s one rank adds (decode + add) */
    double convert_Bps; /* fp32 bytes/s one rank casts to a 16-bit wire */
    int shm;            /* rows/groups inside a node reduce in shared memory */
    int pipeline;       /* most pieces of a pipelined torus2d/hier (1: none) */
    unsigned in_place;  /* TCOMM_MODEL_INPLACE_*: this call's gradients lie in
                         * tcomm_shared_alloc memory and these rows sum them in
                         * place (shared_grads.c); 0 for the packed paths */
} tcomm_model_params;

#define TCOMM_MODEL_INPLACE_ROWS   1u /* torus2d rows */
#define TCOMM_MODEL_INPLACE_GROUPS 2u /* hier-rs groups */

/* Defaults measured on this project's 2-core test machine (shared memory
 * within a node, loopback TCP between emulated nodes); see the issue note. */
void tcomm_model_defaults(tcomm_model_params *m, int P, int ranks_per_node);

/* Predicted seconds for an all-reduce of count fp32 values sent as wire.
 * Returns a negative value when the algorithm cannot run on this layout
 * (torus2d without a grid, hier-rs with unequal groups). */
double tcomm_model_time(const tcomm_model_params *m, tcomm_algo a, size_t count,
                        tcomm_wire wire);

/* How many pieces a pipelined message of wire_bytes runs in, with at most
 * pipeline of them: the rule pipeline.c cuts by, so model and run agree
 * (1: not cut). */
int tcomm_model_pieces(int pipeline, double wire_bytes);

/* The cheapest runnable algorithm among flat, ring, hier, hier-rs and
 * torus2d for this message. */
tcomm_algo tcomm_model_best(const tcomm_model_params *m, size_t count,
                            tcomm_wire wire);

/* The link limit: seconds for the least data a node must send through its
 * inter-node links in any all-reduce, 2(N-1)/N * S / (bw * rails), with N
 * nodes and S the message in wire bytes. 0 on one node. */
double tcomm_model_link_limit(const tcomm_model_params *m, size_t count,
                              tcomm_wire wire);

#endif
