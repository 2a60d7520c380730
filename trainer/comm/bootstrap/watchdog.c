/* bootstrap/watchdog.c: a deadline for tcomm_init's collectives.
 *
 * Inside MPI_Init and MPI's own first collectives (the all-gathers over
 * world that open the TCP connections between nodes) nothing of ours runs,
 * so the no-progress deadline of our waits (transport/mpi.c) cannot help: a
 * rank that never starts, or OpenMPI 4.1's TCP wire-up stalling on a
 * loaded host, would hang the whole job until Slurm's time limit. A thread
 * waits for tcomm_init to disarm it; if that does not happen in time it
 * says so, naming this rank, and ends the process, so that srun or mpirun
 * takes the rest of the job down. */
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "trainer/comm/bootstrap/bootstrap.h"

static void *_watch(void *arg)
{
    tc_watchdog *w = arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)w->limit_s;
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (!w->disarmed && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
    int fire = !w->disarmed;
    pthread_mutex_unlock(&w->mu);
    if (fire) {
        fprintf(stderr,
                "tcomm: rank %d: start-up did not finish within %.0f s: MPI's "
                "start-up across the job stalled (a rank that never started, "
                "or a TCP "
                "connection between nodes that never opened); giving up\n",
                w->rank, w->limit_s);
        fflush(stderr);
        struct timespec linger = {TC_LINGER_S, 0};
        nanosleep(&linger, NULL);
        _exit(TC_EXIT_STARTUP);
    }
    return NULL;
}

void tc_watchdog_arm(tc_watchdog *w, int rank, double limit_s)
{
    w->rank = rank;
    w->limit_s = limit_s;
    w->disarmed = 0;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    /* Without the thread start-up merely loses its deadline. */
    w->armed = pthread_create(&w->th, NULL, _watch, w) == 0;
    if (!w->armed) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
    }
}

void tc_watchdog_disarm(tc_watchdog *w)
{
    if (!w->armed)
        return;
    pthread_mutex_lock(&w->mu);
    w->disarmed = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    w->armed = 0;
}
