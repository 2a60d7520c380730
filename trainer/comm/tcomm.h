/* tcomm.h: the public API of torus's communication module (libtcomm).
 *
 * One small C API over two transports: MPI for host memory (CPU runs and CI)
 * and NCCL for device memory (tcomm_nccl.h). Ranks are bootstrapped through
 * PMIx, laid out on an R x C grid and in node groups from the TORUS_* env
 * contract (docs/env-contract.md), and reduced with one of several
 * all-reduce algorithms at fp32, fp16 or bf16 wire precision.
 *
 * Errors: every call returns a tcomm_rc. On failure, torus_error_msg()
 * (common/torus_error.h) returns a one-line message (with the file:line that
 * raised it) for the caller to report once, at its boundary.
 */
#ifndef TORUS_TCOMM_H
#define TORUS_TCOMM_H

#include <stddef.h>
#include <stdint.h>

#include "common/torus_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TCOMM_OK = 0,
    TCOMM_ERR_ARG,       /* bad argument from the caller */
    TCOMM_ERR_ENV,       /* bad TORUS_* value or option */
    TCOMM_ERR_LAUNCH,    /* asked to run distributed without a PMIx server */
    TCOMM_ERR_TRANSPORT, /* MPI/NCCL/PMIx call failed */
    TCOMM_ERR_TIMEOUT,   /* a peer made no progress: lost or stalled rank */
    TCOMM_ERR_LAYOUT,    /* ranks disagree (grid, bucket layout) */
    TCOMM_ERR_NOMEM,
    TCOMM_ERR_UNSUPPORTED /* algorithm not possible on this layout */
} tcomm_rc;

typedef enum {
    TCOMM_ALGO_FLAT = 0, /* the transport's own all-reduce on world */
    TCOMM_ALGO_RING,     /* our ring reduce-scatter + all-gather on world */
    TCOMM_ALGO_HIER,     /* reduce in group, all-reduce of leaders, bcast */
    TCOMM_ALGO_HIER_RS,  /* reduce-scatter in group, slices cross groups */
    TCOMM_ALGO_TORUS2D,  /* RS along rows, AR along columns, AG along rows */
    TCOMM_ALGO_HYBRID,   /* per call: cheapest by the alpha-beta model */
    TCOMM_ALGO_COUNT
} tcomm_algo;

typedef enum {
    TCOMM_WIRE_FP32 = 0,
    TCOMM_WIRE_FP16,
    TCOMM_WIRE_BF16,
    TCOMM_WIRE_COUNT
} tcomm_wire;

/* Flags for tcomm_allreduce. */
#define TCOMM_AVERAGE 1u /* pre-scale by 1/world before the wire cast */
/* tcomm_allreduce_segs only: every piece lies in tcomm_shared_alloc memory,
 * at the same offsets on every rank (tcomm_fusion checks this and sets it
 * itself). Rows or groups on one node then reduce in place. */
#define TCOMM_SHARED 2u

typedef struct {
    int grid_rows, grid_cols; /* --grid RxC; 0 = from TORUS_* or per node */
    int group_size;           /* --group-size N; 0 = from TORUS_* or node */
    double timeout_s;         /* no-progress limit per wait; 0: TCOMM_TIMEOUT,
                               * else 30 s (a value here wins over it) */
    int verbose;
} tcomm_options;

typedef struct {
    int rank, size;             /* world */
    int local_rank, local_size; /* on this node (PMIx) */
    int node_id, nnodes;
    int rows, cols, row, col; /* grid */
    int group, ngroups, group_rank, group_size;
    int groups_uniform; /* every group has the same size */
    const char *source; /* where the layout came from */
    /* The ranks that share this rank's kernel (one machine: a node, or
     * every node of an emulated cluster) and the CPUs they may run on;
     * waits_nap: they outnumber the CPUs, so waits nap from the first
     * poll instead of spinning (TCOMM_POLL_SLEEP unset). */
    int host_ranks, host_cpus, waits_nap;
} tcomm_info;

typedef struct {
    size_t nonfinite; /* inf/nan elements in the result (same on all ranks) */
    tcomm_algo algo_used; /* the algorithm that ran (hybrid resolves) */
    tcomm_wire wire_used; /* the wire it ran on (a fused bucket's hybrid
                           * takes fp32 on one node where the wire loses) */
    double seconds;       /* wall time of the call on this rank */
    int in_place;         /* reduced where it lies in shared memory */
} tcomm_result;

typedef struct tcomm tcomm_t;

const char *tcomm_algo_name(tcomm_algo a);
const char *tcomm_wire_name(tcomm_wire w);
/* Parse a name ("flat", "ring", "hier", "hier-rs", "torus2d", "hybrid" /
 * "fp32", "fp16", "bf16"); -1 if unknown. */
int tcomm_algo_parse(const char *s);
int tcomm_wire_parse(const char *s);
size_t tcomm_wire_bytes(tcomm_wire w);
/* Monotonic seconds, for timing collectives. */
double tcomm_wtime(void);

/* Parse the layout options tools accept: "--grid" RxC, "--group-size" N.
 * Returns TCOMM_ERR_ENV with a message naming the option on bad values. */
TORUS_MUST_CHECK tcomm_rc tcomm_options_set(tcomm_options *o, const char *name,
                                            const char *value);

/* Bootstrap: PMIx, then MPI (unless a singleton), then communicators. */
TORUS_MUST_CHECK tcomm_rc tcomm_init(const tcomm_options *opt, tcomm_t **out);
/* Collective: first agrees, within the deadline, that every rank is here
 * (a rank lost at the very end aborts the job naming it, exit 5), then
 * frees everything and finalizes MPI if tcomm_init started it. */
void tcomm_finalize(tcomm_t *c);
/* Start-up is over: call it just before the first training step. From
 * before MPI_Init until then a watchdog ends this rank (exit 4, with
 * "start-up did not finish within S s") if start-up takes longer than
 * TCOMM_STARTUP_TIMEOUT seconds, or else 4 x the timeout, at least 20 s
 * (read again every second, so tcomm_set_timeout moves it). Building the
 * model, opening the data and loading a checkpoint are all covered. A
 * caller that never calls it ends start-up at its first tcomm_allreduce,
 * tcomm_allreduce_segs or tcomm_nccl_allreduce. Idempotent. */
void tcomm_startup_done(tcomm_t *c);
void tcomm_info_get(const tcomm_t *c, tcomm_info *info);

/* In-place all-reduce of count fp32 values in host memory. Every rank gets a
 * bitwise-identical result. */
TORUS_MUST_CHECK tcomm_rc tcomm_allreduce(tcomm_t *c, float *buf, size_t count,
                                          tcomm_algo algo, tcomm_wire wire,
                                          unsigned flags, tcomm_result *res);

/* A piece of a gradient vector: count fp32 values at p (host memory). */
typedef struct {
    float *p;
    size_t count;
} tcomm_seg;

/* All-reduce the concatenation of nsegs pieces as one vector, without the
 * caller packing them. Where a row (torus2d) or group (hier-rs) shares a
 * node, the pieces are cast straight into shared memory and the results
 * decoded straight back: the fused-bucket fast path; with TCOMM_SHARED
 * they are reduced where they lie. With TCOMM_ALGO_HYBRID on one node the
 * cost model also picks the wire: fp32 where the 16-bit wire's casts cost
 * more than its halved bytes save (res->wire_used says which ran). */
TORUS_MUST_CHECK tcomm_rc tcomm_allreduce_segs(tcomm_t *c,
                                               const tcomm_seg *segs, int nsegs,
                                               tcomm_algo algo, tcomm_wire wire,
                                               unsigned flags,
                                               tcomm_result *res);

/* Gradient memory that the ranks of a node share (collective on world;
 * every rank asks for the same bytes; one such block per tcomm_t, freed
 * by tcomm_shared_free or tcomm_finalize). Zero-filled, 64-byte aligned.
 * Buckets of gradients that live in it at the same offsets on every rank
 * are all-reduced in place where the row (torus2d) or group (hier-rs)
 * shares a node: each member sums its chunk straight from the others'
 * gradients and writes the result into all of them, the least memory
 * traffic an all-reduce on a node can have. Where nothing is shared (one
 * rank, TCOMM_SHM=0) it is plain memory and everything works as before.
 * Every rank succeeds or every rank fails: a rank that cannot allocate
 * (no memory, no room in the backing directory) fails with its reason,
 * and every other rank fails naming it ("rank 3 could not allocate its
 * shared gradient memory"); none waits in a collective it skipped. The
 * memory is OpenMPI's: files in /dev/shm (docs/comm.md). */
TORUS_MUST_CHECK tcomm_rc tcomm_shared_alloc(tcomm_t *c, size_t bytes,
                                             void **out);
void tcomm_shared_free(tcomm_t *c);

/* Small helpers on world (host memory). Every one of them, like every
 * other call here that waits for other ranks, has the no-progress deadline
 * (tcomm_options.timeout_s, TCOMM_TIMEOUT, tcomm_set_timeout): a rank that
 * is lost or stopped turns into TCOMM_ERR_TIMEOUT or TCOMM_ERR_TRANSPORT
 * with "rank N is lost or stalled" naming it (the same rank on every
 * waiting rank), never a hang. A rank that is killed is also noticed by
 * the launcher (srun, mpirun), which ends the job naming its task. */
TORUS_MUST_CHECK tcomm_rc tcomm_barrier(tcomm_t *c);
TORUS_MUST_CHECK tcomm_rc tcomm_bcast_bytes(tcomm_t *c, void *buf, size_t bytes,
                                            int root);
TORUS_MUST_CHECK tcomm_rc tcomm_max_double(tcomm_t *c,
                                           double *v); /* in place, world max */
TORUS_MUST_CHECK tcomm_rc tcomm_sum_double(tcomm_t *c, double *v,
                                           int n); /* in place */

/* A barrier on world with its own deadline of seconds (<= 0: none),
 * whatever the timeout: for a point where some ranks legitimately wait
 * long, e.g. the ranks that do not write a checkpoint waiting for rank 0
 * to write and fsync it. A killed rank still ends the job through the
 * launcher, and an MPI error naming a peer still fails the wait; only a
 * stopped (SIGSTOP, hung) rank goes unnoticed until the deadline. */
TORUS_MUST_CHECK tcomm_rc tcomm_barrier_timeout(tcomm_t *c, double seconds);
/* Set the no-progress deadline of every later wait to seconds (<= 0:
 * none) and return the previous one, e.g. around a long wait:
 *     double t = tcomm_set_timeout(c, 600); ...; tcomm_set_timeout(c, t);
 * Every rank must make the same change at the same point of its
 * collectives, or a rank with the short deadline blames a rank with the
 * long one. Call it only while no fusion bucket is in flight (between
 * steps). */
double tcomm_set_timeout(tcomm_t *c, double seconds);

/* PMIx exchange: publish a blob under key, fence, read a peer's blob. */
TORUS_MUST_CHECK tcomm_rc tcomm_pmix_put(tcomm_t *c, const char *key,
                                         const void *data, size_t len);
TORUS_MUST_CHECK tcomm_rc tcomm_pmix_fence(tcomm_t *c);
TORUS_MUST_CHECK tcomm_rc tcomm_pmix_get(tcomm_t *c, int rank, const char *key,
                                         void *data, size_t len);

/* Ends the whole job with code after printing msg (used when a rank is
 * lost): every rank, a stopped one too, under any launcher (PMIx_Abort;
 * a launcher that waits for every task is not left waiting). */
void tcomm_abort(tcomm_t *c, int code, const char *msg);
/* The exit status libtcomm ends a job with when it gives up on a lost or
 * stalled rank (its deadline threads), for a program to use too: a job
 * script tells "a node died, relaunch on the rest" from "the run is
 * broken" by it. 3 and 4 are taken (torus-train's requeue, start-up). */
enum { TCOMM_EXIT_LOST = 5 };
/* 1 once a wait on c gave up on a peer: it returned TCOMM_ERR_TIMEOUT or
 * TCOMM_ERR_TRANSPORT naming a lost or stalled rank; 0 otherwise (also
 * for NULL). */
int tcomm_peer_lost(const tcomm_t *c);

/* Seconds the cost model predicts for an all-reduce of count values on
 * this layout with the current (default or probed) link parameters;
 * negative when the algorithm cannot run here. */
double tcomm_predict(const tcomm_t *c, tcomm_algo algo, size_t count,
                     tcomm_wire wire);

/* Measure alpha/beta of intra- and inter-node links with a short probe
 * (bootstrap/probe.c) and store them for the hybrid algorithm (collective on
 * world). */
TORUS_MUST_CHECK tcomm_rc tcomm_probe_links(tcomm_t *c);

/* The link parameters the model prices with (defaults, TCOMM_COST, or what
 * tcomm_probe_links measured) as one line of text in buf (snprintf's
 * contract: the length it wanted). */
int tcomm_links_text(const tcomm_t *c, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
