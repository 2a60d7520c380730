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
 * is thread-multiple) and ends the process with TC_EXIT_LOST, so that the
 * launcher takes the rest of the job down. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "trainer/comm/transport/transport.h"

typedef struct {
    tcomm_t *c;
    const char *what;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} _guard;

static void *_guard_main(void *arg)
{
    _guard *g = arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)g->c->timeout_s + 1;
    pthread_mutex_lock(&g->mu);
    int rc = 0;
    while (!g->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&g->cv, &g->mu, &until);
    int fire = !g->done;
    pthread_mutex_unlock(&g->mu);
    if (!fire)
        return NULL;
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
    /* Let the other members say the same before the launcher ends us. */
    struct timespec linger = {2, 0};
    nanosleep(&linger, NULL);
    _exit(TC_EXIT_LOST);
}

int tc_guarded(tcomm_t *c, const char *what, int (*call)(void *), void *arg)
{
    _guard g = {.c = c, .what = what};
    pthread_t th;
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    /* Without the thread the call merely loses its deadline. */
    int armed =
        c->timeout_s < 1e9 && pthread_create(&th, NULL, _guard_main, &g) == 0;
    int mrc = call(arg);
    if (armed) {
        pthread_mutex_lock(&g.mu);
        g.done = 1;
        pthread_cond_signal(&g.cv);
        pthread_mutex_unlock(&g.mu);
        pthread_join(th, NULL);
    }
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
    return mrc;
}
