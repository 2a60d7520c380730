/* tcomm_internal.h: what the tcomm_* source files share and nothing else
 * includes: the communicator state, the sub-group handles the algorithms run
 * on, the wire conversion kernels and the error macro. */
#ifndef TORUS_TCOMM_INTERNAL_H
#define TORUS_TCOMM_INTERNAL_H

#include <mpi.h>
#include <pmix.h>
#include <pthread.h>
#include <stdarg.h>

#include "trainer/comm/cost_model.h"
#include "trainer/comm/layout_env.h"
#include "trainer/comm/tcomm.h"

/* Record an error message with the place that raised it, and return rc. */
tcomm_rc tcomm_set_error_(tcomm_rc rc, const char *file, int line,
                          const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define TC_FAIL(rc, ...) tcomm_set_error_((rc), __FILE__, __LINE__, __VA_ARGS__)

/* One communicator the algorithms run on: a row, a column, a group, ... .
 * rank/size are inside it; comm is MPI_COMM_NULL for a singleton run or for
 * ranks that are not members (leaders). */
/* A shared-memory segment per member of an on-node group (shm_node.c). */
typedef struct {
    MPI_Win win;
    unsigned char **seg; /* seg[j]: member j's segment, mapped here */
    size_t bytes;
} tc_shm;

typedef struct {
    MPI_Comm comm;
    int rank, size;
    const char *name; /* for messages: "row", "column", ... */
    int *world;       /* world rank of each member, to name lost peers */
    int on_node;      /* all members share one node's memory */
    tc_shm shm;
    /* arena[j]: member j's tcomm_shared_alloc block, mapped here; NULL
     * when the group cannot reduce in place (shared_grads.c). */
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

/* A deadline for tcomm_init's MPI start-up (startup_watchdog.c): ends the
 * process with TC_EXIT_STARTUP and a message if not disarmed in time. */
enum { TC_EXIT_STARTUP = 4 }; /* 3 is torus-train's "checkpointed, requeue" */
/* Launchers take the whole job down as soon as one rank exits or aborts:
 * a rank that gives up first lingers this long so that the ranks that saw
 * the same failure a moment later can say so too. */
enum { TC_LINGER_S = 2 };
typedef struct {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int armed, disarmed, rank;
    double limit_s;
} tc_watchdog;
void tc_watchdog_arm(tc_watchdog *w, int rank, double limit_s);
void tc_watchdog_disarm(tc_watchdog *w);

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
    tc_scratch scr;           /* the calling thread's wire buffers */
    tc_scratch scr_pipe;      /* the pipeline's network thread's */
    tc_buf accum;             /* fp32 staging */
    tc_buf pack;              /* tcomm_allreduce_segs' contiguous copy */
    tcomm_model_params model; /* for hybrid; probed or default */
    MPI_Op op_fp16, op_bf16;  /* flat all-reduce on 16-bit wires */
    MPI_Datatype dt_half;     /* 2-byte element for those ops */
    MPI_Comm blame;           /* world dup for lost-rank reports */
    tc_watchdog startup;      /* armed during tcomm_init */
    /* One lost-rank search per process: the pipeline's two threads can
     * time out together, and two searches would take each other's
     * reports. The second waits and reuses the first one's answer. */
    pthread_mutex_t blame_mu;
    int lost;       /* the answer, world rank; -1 before any search */
    int use_shm;    /* TCOMM_SHM=0 turns shared memory off */
    tc_arena arena; /* tcomm_shared_alloc */
    int group_key;  /* this rank's order in its group */
    char source[96];
};

void *tc_buf_get(tc_buf *b, size_t bytes);
void tc_buf_free(tc_buf *b);

/* Wire kernels (wire.c): dispatch once to AVX-512, F16C or scalar code. */
void tc_encode(tcomm_wire w, const float *src, void *dst, size_t n);
void tc_decode(tcomm_wire w, const void *src, float *dst, size_t n);
void tc_decode_add(tcomm_wire w, const void *src, float *acc, size_t n);
/* tc_decode that also returns how many values are inf/nan. */
size_t tc_decode_count(tcomm_wire w, const void *src, float *dst, size_t n);
void tc_scale(float *x, size_t n, float s);
size_t tc_count_nonfinite(const float *x, size_t n);
/* Round fp32 values to what the wire can carry, in place. */
void tc_round_to_wire(tcomm_wire w, float *x, size_t n, void *tmp);

/* Point-to-point with a no-progress deadline (backend_mpi.c). peer ranks are
 * inside g. Returns TCOMM_ERR_TIMEOUT naming the peer's world rank. */
tcomm_rc tc_sendrecv(tcomm_t *c, const tc_group *g, const void *sbuf,
                     size_t sbytes, int dst, void *rbuf, size_t rbytes,
                     int src);
/* Ring steps move in segments: about seg bytes (TCOMM_SEG_KB; 0: whole
 * steps), grown so that a message has at most TC_MAXSEG of them, in whole
 * elements of eb bytes. A function of the message's length alone, so that
 * sender and receiver cut it alike (every rank has the same seg). */
enum { TC_MAXSEG = 64 };
static inline size_t tc_seg_size(size_t bytes, size_t seg, size_t eb)
{
    size_t least = (bytes + TC_MAXSEG - 1) / TC_MAXSEG;
    if (seg == 0 || seg > bytes)
        seg = bytes;
    if (seg < least)
        seg = least;
    seg = (seg + eb - 1) / eb * eb;
    return seg ? seg : eb;
}
/* Poll one request to completion with the deadline; peer names the rank
 * (inside g) blamed if it never completes. */
tcomm_rc tc_wait_req(tcomm_t *c, const tc_group *g, MPI_Request *r, int peer);
tcomm_rc tc_send(tcomm_t *c, const tc_group *g, const void *buf, size_t bytes,
                 int dst);
tcomm_rc tc_recv(tcomm_t *c, const tc_group *g, void *buf, size_t bytes,
                 int src);
void tc_store_free(tcomm_t *c);
tcomm_rc tc_mpi_ops_create(tcomm_t *c);
void tc_mpi_ops_free(tcomm_t *c);
/* After a wait on world rank suspect failed or timed out: every rank that
 * is stuck tells all others whom it waits for; following that chain from
 * suspect to a rank that never reported names the lost one. */
int tc_find_lost_rank(tcomm_t *c, int suspect);
tcomm_rc tc_flat_allreduce(tcomm_t *c, float *buf, size_t count, tcomm_wire w);

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
/* Both at once: where chunk (or pipeline piece) i of n starts, and its length.
 */
static inline void tc_chunk(size_t count, int n, int i, size_t *off,
                            size_t *len)
{
    *off = tc_chunk_off(count, n, i);
    *len = tc_chunk_len(count, n, i);
}

/* Building blocks (algo_ring.c). x is fp32, in place; s is the calling
 * thread's scratch (&c->scr, or &c->scr_pipe on the pipeline's thread). */
tcomm_rc tc_ring_reduce_scatter(tcomm_t *c, tc_scratch *s, const tc_group *g,
                                float *x, size_t count, tcomm_wire w);
/* After a reduce-scatter: the all-gather. Each member's own chunk is first
 * rounded to the wire, so every rank ends with identical values. */
tcomm_rc tc_ring_allgather(tcomm_t *c, tc_scratch *s, const tc_group *g,
                           float *x, size_t count, tcomm_wire w);
tcomm_rc tc_ring_allreduce(tcomm_t *c, tc_scratch *s, const tc_group *g,
                           float *x, size_t count, tcomm_wire w);

/* shm_node.c: the same reduce-scatter / all-gather contract as the ring
 * versions, through shared memory, for groups that live on one node. Each
 * member reads every other member's slice directly: two passes over the
 * data instead of a message per step. */
void tc_shm_probe(tcomm_t *c, tc_group *g);
void tc_shm_free(tc_group *g);
tcomm_rc tc_shm_reserve(tcomm_t *c, tc_group *g, size_t bytes);
tcomm_rc tc_shm_sync(tcomm_t *c, tc_group *g);
tcomm_rc tc_shm_sync_win(tcomm_t *c, const tc_group *g, MPI_Win win);
tcomm_rc tc_shm_reduce_scatter(tcomm_t *c, tc_group *g, float *x, size_t count,
                               tcomm_wire w);
tcomm_rc tc_shm_allgather(tcomm_t *c, tc_group *g, float *x, size_t count,
                          tcomm_wire w);
/* The same on the part of the segments that starts at element at, so that
 * consecutive pieces of one message (pipelined torus2d, hier-rs and hier)
 * never share bytes. */
tcomm_rc tc_shm_reduce_scatter_at(tcomm_t *c, tc_group *g, float *x,
                                  size_t count, tcomm_wire w, size_t at);
tcomm_rc tc_shm_allgather_at(tcomm_t *c, tc_group *g, float *x, size_t count,
                             tcomm_wire w, size_t at);
/* Shared memory when the group is on one node, else the ring. */
tcomm_rc tc_reduce_scatter(tcomm_t *c, tc_group *g, float *x, size_t count,
                           tcomm_wire w);
tcomm_rc tc_allgather(tcomm_t *c, tc_group *g, float *x, size_t count,
                      tcomm_wire w);

/* pipeline.c: a message in K pieces through three stages. The caller's
 * thread runs pre(i) for every piece, then post(i) for every piece; a
 * network thread runs net(i) as soon as pre(i) is done, and post(i) waits
 * for net(i). So the network stage of one piece overlaps the node stages
 * of the others. net runs on another thread: it must use &c->scr_pipe and
 * communicators the other stages do not. The first error wins; both
 * threads stop. */
typedef tcomm_rc (*tc_stage_fn)(tcomm_t *c, void *ctx, int piece);
tcomm_rc tc_pipeline_run(tcomm_t *c, int K, tc_stage_fn pre, tc_stage_fn net,
                         tc_stage_fn post, void *ctx);
/* How many pieces a message of wire_bytes runs in (1: not worth it, or not
 * possible: MPI without MPI_THREAD_MULTIPLE, TCOMM_PIPELINE=1). */
int tc_pipeline_pieces(const tcomm_t *c, size_t wire_bytes);

/* algo_hier.c, algo_torus2d.c */
tcomm_rc tc_hier_allreduce(tcomm_t *c, float *x, size_t count, tcomm_wire w);
tcomm_rc tc_2d_allreduce(tcomm_t *c, tc_group *rows, const tc_group *cols,
                         float *x, size_t count, tcomm_wire w);

/* allreduce_segs.c: call fn on every piece of the range [from, from + len)
 * of the vector that the pieces s[0..ns) make up: p and n are the piece's
 * part of the range, at its position in the range. */
typedef void (*tc_piece_fn)(float *p, size_t n, size_t at, void *arg);
void tc_seg_walk(const tcomm_seg *s, int ns, size_t from, size_t len,
                 tc_piece_fn fn, void *arg);

/* shared_grads.c. holds: 1 when this rank has a shared block (not plain
 * memory) and the count floats at p lie in it (count 0: any p). in_place:
 * 1 when a call with flags reduces over g in place if its pieces lie in
 * the block (g on one node, knowing the members' blocks; NULL g: 0); what
 * tcomm_allreduce_segs runs and hybrid prices. covers: 1 when every piece
 * does and g can reduce in place. allreduce: the in-place
 * all-reduce of such pieces over rows (members on one node), then cols
 * (across nodes; size 1 for none). */
int tc_shared_holds(const tcomm_t *c, const float *p, size_t count);
int tc_shared_in_place(const tc_group *g, unsigned flags);
int tc_shared_covers(const tcomm_t *c, const tc_group *g, const tcomm_seg *s,
                     int ns);
tcomm_rc tc_shared_allreduce(tcomm_t *c, tc_group *rows, const tc_group *cols,
                             const tcomm_seg *s, int ns, size_t count,
                             tcomm_wire w, float scale, size_t *bad);

/* algo_hybrid.c: the algorithm the model picks for a message of count
 * floats; flags: the call's, TCOMM_SHARED prices the in-place sum. */
tcomm_algo tc_hybrid_pick(const tcomm_t *c, size_t count, tcomm_wire w,
                          unsigned flags);

#endif
