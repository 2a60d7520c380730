/* transport/transport.h: how libtcomm's ranks move bytes (layer transport,
 * above core): MPI point-to-point and collectives with a no-progress
 * deadline, MPI's own all-reduce and the agreement on success (mpi.c), the
 * guard thread of blocking calls (guard.c) and the lost-rank search both
 * use (lost.c), a node's shared memory (shm.c) and its windows' guarded allocation
 * (shm_win.c), and the PMIx key-value store (pmix.c): the host
 * transports. The host algorithms (algo/ring.c, hier.c, torus2d.c, ...) are
 * built from these. The NCCL transport (nccl.c) is apart: its public face
 * is tcomm_nccl.h, and what its algorithms (algo/nccl_allreduce.c) use is
 * nccl_transport.h. */
#ifndef TORUS_TCOMM_TRANSPORT_H
#define TORUS_TCOMM_TRANSPORT_H

#include "config.h"
#include "trainer/comm/core/comm.h"

/* mpi.c. A request of a nonblocking transfer, completed by tc_wait_req. */
typedef MPI_Request tc_req;
/* mpi.c. Point-to-point with a no-progress deadline; peer ranks are inside
 * g. Returns TCOMM_ERR_TRANSPORT naming a lost peer's world rank, or
 * TCOMM_ERR_TIMEOUT. */
tcomm_rc tc_sendrecv(tcomm_t *c, const tc_group *g, const void *sbuf,
                     size_t sbytes, int dst, void *rbuf, size_t rbytes,
                     int src);
/* Poll one request to completion with the deadline; peer names the rank
 * (inside g) blamed if it never completes. */
tcomm_rc tc_wait_req(tcomm_t *c, const tc_group *g, tc_req *r, int peer);
/* Post a send of bytes at buf to dst (receive from src) and return at
 * once; *r completes through tc_wait_req, and buf is the transport's until
 * then. For a stream of pieces in flight together (the ring's segments):
 * transfers between one pair of ranks on one communicator are matched in
 * the order they were posted. A message over 2 GiB is refused
 * (TCOMM_ERR_ARG); a post that MPI refuses fails as a wait would, naming
 * the lost rank. */
tcomm_rc tc_isend(tcomm_t *c, const tc_group *g, const void *buf, size_t bytes,
                  int dst, tc_req *r);
tcomm_rc tc_irecv(tcomm_t *c, const tc_group *g, void *buf, size_t bytes,
                  int src, tc_req *r);
/* The same for a nonblocking collective over g, with no single peer to
 * suspect: on expiry the lost-rank search names the rank that never
 * reported; what names the call in messages ("max all-reduce"). */
tcomm_rc tc_wait_coll(tcomm_t *c, const tc_group *g, MPI_Request *r,
                      const char *what);
/* mpi_rc is what starting the collective (MPI_Ixxx) returned: an error, or
 * tc_wait_coll on r. */
tcomm_rc tc_coll_start(tcomm_t *c, const tc_group *g, int mpi_rc,
                       MPI_Request *r, const char *what);
/* Agree across g, within the deadline, whether every member succeeded
 * (ok) at what ("allocate the shared segment"), before anyone enters a
 * collective that a failed member would skip. All ok: TCOMM_OK on every
 * member. Else every member fails: the failed one with fail_rc and its
 * own message, the others with fail_rc naming the lowest failed rank. */
tcomm_rc tc_agree(tcomm_t *c, const tc_group *g, int ok, const char *what,
                  tcomm_rc fail_rc);
/* The same, carrying the blame across stages: a member that failed because
 * an earlier agreement named rank *who (>= 0) blames that rank, not
 * itself. Out: *who is the rank every member names (-1: all ok). */
tcomm_rc tc_agree_why(tcomm_t *c, const tc_group *g, int ok, int *who,
                      const char *what, tcomm_rc fail_rc);
tcomm_rc tc_send(tcomm_t *c, const tc_group *g, const void *buf, size_t bytes,
                 int dst);
tcomm_rc tc_recv(tcomm_t *c, const tc_group *g, void *buf, size_t bytes,
                 int src);
tcomm_rc tc_mpi_ops_create(tcomm_t *c);
void tc_mpi_ops_free(tcomm_t *c);
/* lost.c. After a wait on world rank suspect failed or timed out: every
 * rank that is stuck tells all others whom it waits for (-1: a
 * collective); following that chain from suspect to a rank that never reported names
 * the lost one; with no suspect (-1), the lowest rank that never reported.
 * -1: every rank reported (nobody to name). */
int tc_find_lost_rank(tcomm_t *c, int suspect);
/* MPI's own all-reduce on world, in place, on the wire w (the flat
 * algorithm): MPI_Iallreduce polled with the deadline. */
tcomm_rc tc_flat_allreduce(tcomm_t *c, float *buf, size_t count, tcomm_wire w);

/* shm.c: the reduce-scatter / all-gather contract of the ring
 * (algo/ring.c), through shared memory, for groups that live on one node.
 * Each member reads every other member's slice directly: two passes over
 * the data instead of a message per step. */
void tc_shm_probe(tcomm_t *c, tc_group *g);
void tc_shm_free(tc_group *g);
tcomm_rc tc_shm_reserve(tcomm_t *c, tc_group *g, size_t bytes);
tcomm_rc tc_shm_sync(tcomm_t *c, tc_group *g);
tcomm_rc tc_shm_sync_win(tcomm_t *c, const tc_group *g, MPI_Win win);
/* On the part of the segments that starts at element at (0 for a whole
 * message), so that consecutive pieces of one message (pipelined torus2d,
 * hier-rs and hier) never share bytes. The passes a call would otherwise
 * make over the whole message fold into these: the reduce-scatter casts
 * scale * x (1: no pre-scale), and the all-gather adds the inf/nan count
 * of the result to *bad (NULL: none). */
tcomm_rc tc_shm_reduce_scatter_at(tcomm_t *c, tc_group *g, float *x,
                                  size_t count, tcomm_wire w, size_t at,
                                  float scale);
tcomm_rc tc_shm_allgather_at(tcomm_t *c, tc_group *g, float *x, size_t count,
                             tcomm_wire w, size_t at, size_t *bad);

/* shm_win.c. A shared window over g (every member on one node): bytes on
 * this member, disp_unit disp. ok: this member's own preparation
 * succeeded (if not, its message is set). Agrees first (deadline-guarded)
 * that every member is ready and the backing directory has room, then
 * allocates under a guard thread (a member lost inside the blocking call
 * ends the process naming it, exit TC_EXIT_LOST), then agrees that it
 * worked everywhere: all members succeed or fail together, the others
 * naming the failed rank (*who on return, -1 if none; who may be NULL). */
enum { TC_EXIT_LOST = TCOMM_EXIT_LOST };
tcomm_rc tc_win_alloc(tcomm_t *c, const tc_group *g, int ok, size_t bytes,
                      int disp, MPI_Info info, void *base, MPI_Win *win,
                      int *who);
/* guard.c. Run call(arg), a blocking MPI call, with the deadline: a guard
 * thread ends the process naming the lost rank (exit TC_EXIT_LOST) if it
 * does not return in time. Returns call's MPI error code. */
int tc_guarded(tcomm_t *c, const char *what, int (*call)(void *), void *arg);
/* guard.c. Ends the whole job, not only this process: PMIx_Abort (the
 * launcher's server kills every rank, a stopped one too), then _exit(code);
 * why goes to the launcher. If the server does not answer within
 * TC_END_BACKSTOP_S seconds, an alarm ends this process all the same.
 * Every rank of libtcomm that gives up ends this way. */
enum { TC_END_BACKSTOP_S = 10 };
/* The job ends as soon as one rank ends it: a rank that gives up first
 * lingers this long so that the ranks that saw the same failure a moment
 * later can say so too. */
enum { TC_LINGER_S = 2 };
_Noreturn void tc_end_job(const tcomm_t *c, int code, const char *why);
/* Test hook: TCOMM_FAULT=point:rank:KILL|STOP signals that world rank at
 * point. A build configured with --disable-test-hooks (TORUS_NO_TEST_HOOKS)
 * has no such hook: the calls, the points' names and the variable are
 * compiled out (tests/unit/hooks_off.sh). */
#ifdef TORUS_NO_TEST_HOOKS
#define tc_fault_point(c, point) ((void)(c))
#else
void tc_fault_point(const tcomm_t *c, const char *point);
#endif

/* pmix.c: a singleton's blobs (tcomm_pmix_put without a server). */
void tc_store_free(tcomm_t *c);

#endif
