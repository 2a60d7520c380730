/* core/comm.h: the state of a tcomm_t that every layer of libtcomm reads
 * (layer core): the communicator, the sub-group handles the algorithms run
 * on, reusable scratch buffers, the chunk arithmetic every algorithm and
 * the shared-memory transport agree on, and the cost model's choice of
 * algorithm. Nothing outside trainer/comm/ includes it. Transports fill
 * and use the MPI/PMIx handles (transport/), the algorithms run on the
 * groups (algo/), bootstrap/ creates and frees it all. */
#ifndef TORUS_TCOMM_CORE_COMM_H
#define TORUS_TCOMM_CORE_COMM_H

#include <mpi.h>
#include <pmix.h>
#include <pthread.h>

#include "trainer/comm/core/error.h"
#include "trainer/comm/core/model.h"
#include "trainer/comm/core/route.h"
#include "trainer/comm/tcomm.h"

/* A shared-memory segment per member of an on-node group
 * (transport/shm.c). */
typedef struct {
    MPI_Win win;
    unsigned char **seg; /* seg[j]: member j's segment, mapped here */
    size_t bytes;
} tc_shm;

/* One communicator the algorithms run on: a row, a column, a group, ... .
 * rank/size are inside it; comm is MPI_COMM_NULL for a singleton run or for
 * ranks that are not members (leaders). */
typedef struct {
    MPI_Comm comm;
    int rank, size;
    const char *name; /* for messages: "row", "column", ... */
    int *world;       /* world rank of each member, to name lost peers */
    int on_node;      /* all members share one node's memory */
    int all_on_node;  /* so do the members of every group of its kind
                       * (rows, groups): agreed by the world at start-up */
    tc_shm shm;
    /* arena[j]: member j's tcomm_shared_alloc block, mapped here; NULL
     * when the group cannot reduce in place (algo/shared_grads.c). */
    unsigned char **arena;
} tc_group;

/* The block of tcomm_shared_alloc: one segment per rank of the node's
 * shared-memory domain (win), or plain memory (win == MPI_WIN_NULL). */
typedef struct {
    MPI_Win win;
    unsigned char *mine;
    size_t bytes; /* usable; a small header for the in-place path follows */
} tc_arena;

/* Scratch that grows and is reused across calls (first touch is costly). */
typedef struct {
    void *p;
    size_t bytes;
} tc_buf;

/* The wire-format buffers of one thread's ring steps: send chunk (a),
 * receive chunk (b), whole message (c). */
typedef struct {
    tc_buf a, b, c;
} tc_scratch;

struct tcomm {
    tcomm_info info;
    int singleton;
    int pmix_up, mpi_up;
    pmix_proc_t me;
    double timeout_s;
    unsigned long poll_yield, poll_sleep; /* wait: spins before yield / nap */
    size_t seg_bytes;                     /* ring step segment (TCOMM_SEG_KB) */
    int pipeline;                         /* most pieces (TCOMM_PIPELINE) */
    int thread_multiple;                  /* MPI_THREAD_MULTIPLE provided */
    int verbose;
    tc_group world, row, col, node, group, leaders, peers;
    /* The ranks that share this node's memory (MPI_COMM_TYPE_SHARED),
     * split at start-up for tcomm_shared_alloc; MPI_COMM_NULL without
     * shared memory. */
    tc_group shmdom;
    tc_scratch scr;           /* the calling thread's wire buffers */
    tc_scratch scr_pipe;      /* the pipeline's network thread's */
    tc_buf accum;             /* fp32 staging */
    tc_buf pack;              /* tcomm_allreduce_segs' contiguous copy */
    tcomm_model_params model; /* for hybrid; probed or default */
    MPI_Op op_fp16, op_bf16;  /* flat all-reduce on 16-bit wires */
    MPI_Datatype dt_half;     /* 2-byte element for those ops */
    MPI_Comm blame;           /* world dup for lost-rank reports */
    /* One lost-rank search per process: the pipeline's two threads can
     * time out together, and two searches would take each other's
     * reports. The second waits and reuses the first one's answer. */
    pthread_mutex_t blame_mu;
    int lost;       /* the answer: world rank, -1 none; -2 before a search */
    /* Set once a wait gave up on a peer (tcomm_peer_lost); either thread
     * of the pipeline may set it. */
    volatile int peer_lost;
    int use_shm;    /* TCOMM_SHM=0 turns shared memory off */
    tc_arena arena; /* tcomm_shared_alloc */
    int group_key;  /* this rank's order in its group */
    /* Start-up's deadline (bootstrap/watchdog.c), armed in tcomm_init and
     * disarmed by tcomm_startup_done, or else by the first all-reduce of
     * the caller's data, which sets started (read by the watchdog). */
    struct tc_watchdog *startup;
    volatile int started;
    char source[96];
};

/* buffer.c: b grown to at least bytes (NULL: no memory; b unchanged). */
void *tc_buf_get(tc_buf *b, size_t bytes);
void tc_buf_free(tc_buf *b);

/* Chunk i of n (n parts of count, first count%n one longer). */
static inline size_t tc_chunk_off(size_t count, int n, int i)
{
    size_t q = count / (size_t)n, r = count % (size_t)n;
    return q * (size_t)i + ((size_t)i < r ? (size_t)i : r);
}
static inline size_t tc_chunk_len(size_t count, int n, int i)
{
    return count / (size_t)n + ((size_t)i < count % (size_t)n ? 1 : 0);
}
/* Both at once: where chunk (or pipeline piece) i of n starts, and its
 * length. */
static inline void tc_chunk(size_t count, int n, int i, size_t *off,
                            size_t *len)
{
    *off = tc_chunk_off(count, n, i);
    *len = tc_chunk_len(count, n, i);
}

/* fold.c: the passes over the whole message that tcomm_allreduce adds
 * around an algorithm: the 1/P pre-scale before it and the inf/nan count
 * after. Where the node stage runs in shared memory they fold into its
 * casts (tc_shm_*_at), so that they overlap the network with the rest of
 * the pipeline instead of standing before and after it with the links
 * idle. tc_fold_* does them on their own where an algorithm cannot fold.
 * Here, below the algorithms, so that allreduce.c calls hier.c and
 * torus2d.c and they call down into core, never back. */
typedef struct {
    float scale; /* 1: none (a plain sum) */
    size_t *bad; /* add the result's inf/nan count here; NULL: none */
} tc_fold;
void tc_fold_before(tc_fold *f, float *x, size_t count);
void tc_fold_after(tc_fold *f, const float *x, size_t count);

/* pick.c. in_place: 1 when a call with flags reduces over g in place if
 * its pieces lie in the shared block (g on one node, knowing the members'
 * blocks; NULL g: 0); what tcomm_allreduce_segs runs and hybrid prices.
 * hybrid_pick: the algorithm the cost model picks for a message of count
 * floats; flags: the call's, TCOMM_SHARED prices the in-place sum. */
int tc_shared_in_place(const tc_group *g, unsigned flags);
/* The group a fused bucket's node stage runs on for algorithm a: torus2d's
 * row, hier-rs's group where the groups are uniform, else none (NULL). A
 * macro so that c's constness carries over. */
#define TC_ALGO_ROWS(c, a)                                                 \
    ((a) == TCOMM_ALGO_TORUS2D                               ? &(c)->row   \
     : (a) == TCOMM_ALGO_HIER_RS && (c)->info.groups_uniform ? &(c)->group \
                                                             : NULL)
/* How many pieces a message of wire_bytes runs in (1: not worth it, or not
 * possible: MPI without MPI_THREAD_MULTIPLE, TCOMM_PIPELINE=1). parts: as
 * torus_cost_pieces; the same on every rank, so that all cut alike. Part
 * of a route (tc_route_pick), not asked again by the algorithms. */
int tc_pipeline_pieces(const tcomm_t *c, size_t wire_bytes, int parts);
tcomm_algo tc_hybrid_pick(const tcomm_t *c, size_t count, tcomm_wire w,
                          unsigned flags);
/* hybrid_pick that also chooses the wire: on one node every step is in
 * the node, where a 16-bit wire saves no link bytes but costs its casts;
 * there the cost model prices fp32 against *w (casts at the probed
 * convert rate) and *w becomes fp32 where the wire loses. Across nodes
 * *w stays: the inter-node wire is the one asked for. */
tcomm_algo tc_hybrid_pick_wire(const tcomm_t *c, size_t count, unsigned flags,
                               tcomm_wire *w);

#endif
