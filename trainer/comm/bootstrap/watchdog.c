/* bootstrap/watchdog.c: a deadline for start-up, from before MPI_Init to
 * the caller's first training step.
 *
 * Inside MPI_Init and MPI's own first collectives (the all-gathers over
 * world that open the TCP connections between nodes) nothing of ours runs,
 * so the no-progress deadline of our waits (transport/mpi.c) cannot help: a
 * rank that never starts, or OpenMPI 4.1's TCP wire-up stalling on a
 * loaded host, would hang the whole job until Slurm's time limit. After
 * tcomm_init the caller's own start-up (building the model, opening the
 * data, loading a checkpoint) can hang outside any collective just as
 * well, and the ranks waiting for it would then blame it only after their
 * next collective's deadline, if ever. So a thread watches the whole
 * start-up: tcomm_startup_done (or the first all-reduce of the caller's
 * data, for tools that never call it) ends it; if that does not happen in
 * time it says so, naming this rank and the phase, and ends the whole job
 * (tc_end_job: a rank that never started must not keep srun waiting). The limit
 * is read again every second: a caller that raises the timeout
 * (tcomm_set_timeout, say for a long checkpoint load) raises it too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "trainer/comm/bootstrap/bootstrap.h"

double tc_watchdog_limit(const tc_watchdog *w)
{
    if (w->fixed_s > 0)
        return w->fixed_s;
    double t = w->c->timeout_s * 4;
    return t > 20 ? t : 20;
}

static void _fire(const tc_watchdog *w, double limit)
{
    if (w->phase == 0)
        fprintf(stderr,
                "tcomm: rank %d: start-up did not finish within %.0f s: MPI's "
                "start-up across the job stalled (a rank that never started, "
                "or a TCP connection between nodes that never opened); "
                "giving up\n",
                w->c->info.rank, limit);
    else
        fprintf(stderr,
                "tcomm: rank %d: start-up did not finish within %.0f s: this "
                "rank did not reach its first training step "
                "(tcomm_startup_done); giving up\n",
                w->c->info.rank, limit);
    fflush(stderr);
    struct timespec linger = {TC_LINGER_S, 0};
    nanosleep(&linger, NULL);
    tc_end_job(w->c, TC_EXIT_STARTUP, "start-up did not finish in time");
}

static void *_watch(void *arg)
{
    tc_watchdog *w = arg;
    double start = tcomm_wtime();
    pthread_mutex_lock(&w->mu);
    for (;;) {
        if (w->disarmed || w->c->started)
            break;
        double limit = tc_watchdog_limit(w);
        if (tcomm_wtime() - start > limit) {
            pthread_mutex_unlock(&w->mu);
            _fire(w, limit);
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&w->cv, &w->mu, &until);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void tc_watchdog_arm(tc_watchdog *w, const tcomm_t *c)
{
    w->c = c;
    w->disarmed = 0;
    w->phase = 0;
    const char *f = getenv("TCOMM_STARTUP_TIMEOUT");
    w->fixed_s = f && atof(f) > 0 ? atof(f) : 0;
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
