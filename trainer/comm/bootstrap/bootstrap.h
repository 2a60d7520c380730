/* bootstrap/bootstrap.h: what the start-up files of libtcomm share (layer
 * bootstrap, the top of the library): the deadline on tcomm_init's MPI
 * start-up (watchdog.c) and the exit code and linger of a rank that gives
 * up. tcomm_init itself is in init.c, the link probe in probe.c. */
#ifndef TORUS_TCOMM_BOOTSTRAP_H
#define TORUS_TCOMM_BOOTSTRAP_H

#include <pthread.h>

/* Ends the process with TC_EXIT_STARTUP and a message if not disarmed in
 * time. */
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

#endif
