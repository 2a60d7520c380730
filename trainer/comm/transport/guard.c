/* transport/guard.c: a deadline for a blocking MPI call (layer transport).
 *
 * Some MPI calls have no nonblocking form (MPI_Win_allocate_shared), and
 * for some the nonblocking form is much slower: OpenMPI 4.1's
 * MPI_Iallreduce (libnbc) took 4.5 s where its blocking, tuned
 * MPI_Allreduce took 1.7 s for 64 MiB over 8 ranks on the emulated 1 Gbit/s
 * cluster (tests/bench/comm/netns.sh, 2026-12-01). Nothing can get a
 * thread out of a blocking MPI call, so tc_guarded runs the call on the
 * caller's thread while a guard thread waits for it with the deadline; if
 * the call does not return in time, the guard names the lost rank (when MPI
 * is thread-multiple) and ends the whole job (tc_end_job) with
 * TC_EXIT_LOST.
 *
 * tc_end_job is how every rank of libtcomm that gives up ends the job.
 * Exiting is not enough: srun without --kill-on-bad-exit (plain srun, srun
 * -K0, the srun of a batch script) waits for every task, and a stopped
 * rank (SIGSTOP, a hung node) never exits, so the step would hang until
 * the time limit. Of the ways a rank could take its peers down, only
 * PMIx_Abort works under every launcher we run under: ranks always have a
 * PMIx server (tcomm_init needs one for more than one rank), and the
 * server ends the whole job: Slurm's mpi/pmix plugin kills the step with
 * SIGKILL (slurm_kill_job_step, which a stopped task cannot ignore),
 * OpenMPI's mpirun kills every process of the job. The others fall short:
 * scancel of SLURM_JOB_ID.SLURM_STEP_ID misses mpirun (its ranks are not a
 * step of their own) and needs Slurm's clients on the node; killing the
 * process group or the peers on this node leaves the other nodes running;
 * MPI_Abort goes through the same PMIx_Abort in OpenMPI, but only once MPI
 * is up (not for the start-up watchdog), and from the guard thread it
 * would enter MPI while the caller's thread is stuck inside it. Should the
 * server not answer, an alarm still ends this process. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "trainer/comm/transport/transport.h"

/* One guard per calling thread, started at its first guarded call and kept
 * (a thread per call cost 20% of a per-tensor ResNet-50 sync of 161 flat
 * all-reduces). It sleeps until the armed call's deadline; arming a call
 * only wakes it when it is idle, so a call costs two lock round trips. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tcomm_t *c;
    const char *what;
    struct timespec until; /* the armed call's deadline (CLOCK_REALTIME) */
    unsigned long seq;     /* calls armed so far */
    int armed, idle;
} _guard;

static _Thread_local _guard *_mine;

static void _fire(const _guard *g)
{
    /* The caller's thread is inside MPI: searching from here needs
     * MPI_THREAD_MULTIPLE. */
    int lost = g->c->thread_multiple ? tc_find_lost_rank(g->c, -1) : -1;
    char who[32] = "a rank";
    if (lost >= 0)
        snprintf(who, sizeof who, "rank %d", lost);
    fprintf(stderr,
            "tcomm: rank %d: %s is lost or stalled: no progress for %.0f s "
            "(this rank waits inside %s); giving up\n",
            g->c->info.rank, who, g->c->timeout_s, g->what);
    fflush(stderr);
    /* Let the other members say the same before the job ends. */
    struct timespec linger = {TC_LINGER_S, 0};
    nanosleep(&linger, NULL);
    tc_end_job(g->c, TC_EXIT_LOST, "a rank is lost or stalled");
}

static volatile sig_atomic_t _end_code = 1;

static void _on_alarm(int sig)
{
    (void)sig;
    _exit(_end_code);
}

void tc_end_job(const tcomm_t *c, int code, const char *why)
{
    _end_code = code;
    struct sigaction sa = {.sa_handler = _on_alarm};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(TC_END_BACKSTOP_S);
    fflush(NULL);
    if (c && c->pmix_up) /* NULL procs: every process of our namespace */
        PMIx_Abort(code, why, NULL, 0);
    _exit(code);
}

static void *_guard_main(void *arg)
{
    _guard *g = arg;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        if (!g->armed) {
            g->idle = 1;
            pthread_cond_wait(&g->cv, &g->mu);
            g->idle = 0;
            continue;
        }
        unsigned long seq = g->seq;
        struct timespec until = g->until;
        int rc = pthread_cond_timedwait(&g->cv, &g->mu, &until);
        if (rc == ETIMEDOUT && g->armed && g->seq == seq) {
            pthread_mutex_unlock(&g->mu);
            _fire(g);
        }
    }
    return NULL;
}

/* This thread's guard, started on first use; NULL if it cannot start. */
static _guard *_guard_get(void)
{
    if (_mine)
        return _mine;
    _guard *g = calloc(1, sizeof *g);
    pthread_t th;
    if (!g)
        return NULL;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (pthread_create(&th, NULL, _guard_main, g) != 0) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return NULL;
    }
    pthread_detach(th); /* it lives as long as the process */
    return _mine = g;
}

int tc_guarded(tcomm_t *c, const char *what, int (*call)(void *), void *arg)
{
    /* Without a guard the call merely loses its deadline. */
    _guard *g = c->timeout_s < 1e9 ? _guard_get() : NULL;
    if (g) {
        pthread_mutex_lock(&g->mu);
        clock_gettime(CLOCK_REALTIME, &g->until);
        g->until.tv_sec += (time_t)c->timeout_s + 1;
        g->c = c;
        g->what = what;
        g->seq++;
        g->armed = 1;
        if (g->idle)
            pthread_cond_signal(&g->cv);
        pthread_mutex_unlock(&g->mu);
    }
    int mrc = call(arg);
    if (g) {
        pthread_mutex_lock(&g->mu);
        g->armed = 0;
        pthread_mutex_unlock(&g->mu);
    }
    return mrc;
}
