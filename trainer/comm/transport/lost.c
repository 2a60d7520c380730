/* transport/lost.c: the lost-rank search (tc_find_lost_rank,
 * transport.h). After a wait failed or ran out, every stuck rank tells
 * the others, on a world duplicate of its own (c->blame), whom it waits
 * for; the chain of waits names the rank that never reported. A file of
 * its own below both of its callers: the deadlines of the waits
 * (mpi.c) and of the guarded blocking calls (guard.c), and the NCCL
 * transport's watch, so that mpi.c calls guard.c and neither calls back. */
#include <stdlib.h>
#include <time.h>

#include "trainer/comm/transport/transport.h"

/* Follow who-waits-on-whom from suspect to the first rank that did not
 * report; a collective's waiter (-1) or a cycle ends at the lowest rank
 * that never reported, and if every rank reported, nobody is missing: -1
 * (or our own suspect). */
static int _follow(const int *heard, const int *on, int P, int me, int suspect)
{
    int x = suspect;
    for (int hops = 0; hops < P && x >= 0 && x < P && heard[x]; hops++)
        x = on[x];
    if (x >= 0 && x < P && !heard[x])
        return x;
    for (int r = 0; r < P; r++)
        if (r != me && !heard[r])
            return r;
    return suspect;
}

static int _search_lost_rank(tcomm_t *c, int suspect)
{
    enum { TAG = 79 };
    int P = c->info.size, me = c->info.rank;
    int *on = malloc(sizeof(int) * 2 * (size_t)P), *heard = on + P;
    MPI_Request *sr = malloc(sizeof(MPI_Request) * (size_t)P);
    if (!on || !sr) {
        free(on);
        free(sr);
        return suspect;
    }
    int msg[2] = {me, suspect}, in[2];
    for (int r = 0; r < P; r++) {
        on[r] = -1;
        heard[r] = 0;
        sr[r] = MPI_REQUEST_NULL;
        if (r != me) /* small: eager, completes even if r is gone */
            MPI_Isend(msg, 2, MPI_INT, r, TAG, c->blame, &sr[r]);
    }
    on[me] = suspect;
    heard[me] = 1;
    /* Everyone stuck behind the lost rank reports within a few seconds of
     * us: they all stopped at the same collective. */
    double until = tcomm_wtime() + (c->timeout_s < 10 ? c->timeout_s / 2 : 5.0);
    int nheard = 1;
    while (nheard < P - 1 && tcomm_wtime() < until) {
        int flag = 0;
        MPI_Message m;
        /* A matched probe: the message we saw is the one we receive. */
        if (MPI_Improbe(MPI_ANY_SOURCE, TAG, c->blame, &flag, &m,
                        MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
        if (flag) {
            if (MPI_Mrecv(in, 2, MPI_INT, &m, MPI_STATUS_IGNORE) ==
                    MPI_SUCCESS &&
                in[0] >= 0 && in[0] < P && !heard[in[0]]) {
                on[in[0]] = in[1];
                heard[in[0]] = 1;
                nheard++;
            }
        } else {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    int x = _follow(heard, on, P, me, suspect);
    free(on);
    free(sr); /* pending sends are abandoned: the job is going down */
    return x;
}

int tc_find_lost_rank(tcomm_t *c, int suspect)
{
    if (c->blame == MPI_COMM_NULL)
        return suspect;
    if (c->info.size <= 2 && suspect >= 0)
        return suspect;
    if (c->info.size == 2) /* the only other rank */
        return 1 - c->info.rank;
    pthread_mutex_lock(&c->blame_mu);
    if (c->lost < -1) /* not searched yet */
        c->lost = _search_lost_rank(c, suspect);
    int lost = c->lost;
    pthread_mutex_unlock(&c->blame_mu);
    return lost;
}
