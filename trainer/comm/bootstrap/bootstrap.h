/* bootstrap/bootstrap.h: what the start-up files of libtcomm share (layer
 * bootstrap, the top of the library): the deadline on tcomm_init's MPI
 * start-up (watchdog.c) and its exit code. tcomm_init itself is in init.c, the
 * link probe in probe.c. */
#ifndef TORUS_TCOMM_BOOTSTRAP_H
#define TORUS_TCOMM_BOOTSTRAP_H

#include <pthread.h>
#include <sched.h>

#include "trainer/comm/core/comm.h"
#include "trainer/comm/transport/transport.h"

/* Ends the process with TC_EXIT_STARTUP and a message if start-up does
 * not end in time: from before MPI_Init to tcomm_startup_done (or the
 * first all-reduce of the caller's data, c->started). */
enum { TC_EXIT_STARTUP = 4 }; /* 3 is torus-train's "checkpointed, requeue" */
typedef struct tc_watchdog {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int armed, disarmed;
    const tcomm_t *c;   /* rank, timeout_s (may change), started */
    double fixed_s;     /* TCOMM_STARTUP_TIMEOUT; 0: from the timeout */
    volatile int phase; /* 0: inside MPI's start-up; 1: the caller's */
} tc_watchdog;
/* Start the thread (NULL w.armed: start-up merely has no deadline). */
void tc_watchdog_arm(tc_watchdog *w, const tcomm_t *c);
void tc_watchdog_disarm(tc_watchdog *w);
/* The limit now: TCOMM_STARTUP_TIMEOUT, else 4 x the collectives' timeout,
 * at least 20 s (so that a short timeout does not fail a slow but healthy
 * start on a loaded host). */
double tc_watchdog_limit(const tc_watchdog *w);

/* The link probe's ring over the nodes (probe.c): nodes[r] is rank r's node
 * id; nodes are ordered by their first rank, and the j-th rank of each node
 * sends to the j-th rank of the next node and receives from the j-th of the
 * previous one. *flows: the fewest ranks any node has (ranks with a higher
 * index sit out: *next = *prev = -1, as for every rank on one node).
 * TCOMM_ERR_NOMEM when the work arrays cannot be had. */
tcomm_rc tc_probe_ring(const int *nodes, int size, int rank, int *next,
                       int *prev, int *flows);

/* What each rank tells the others about the machine it runs on (init.c):
 * the kernel's boot id, zero-padded (the same in every network namespace
 * and container of one machine, so in every node of an emulated cluster),
 * and the CPUs it may run on. */
typedef struct {
    char kernel[40];
    cpu_set_t cpus;
} tc_host;
/* Of size ranks' hosts, how many share rank's kernel (*ranks) and the
 * CPUs any of them may run on (*cpus, the union of their sets). */
void tc_host_share(const tc_host *all, int size, int rank, int *ranks,
                   int *cpus);

#endif
