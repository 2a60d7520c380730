/* transport/shm_win.c: allocating MPI-3 shared windows without a hang and
 * without one rank failing alone (layer transport).
 *
 * MPI_Win_allocate_shared is a blocking collective: a member that is
 * stopped or dead leaves the others inside it forever, and a member whose
 * allocation fails first (no space for the backing file, no memory) skips
 * the collectives the others are already in. So a window is allocated in
 * three steps: every member checks what it can locally (its own memory,
 * free space where OpenMPI puts the backing file) and all agree on the
 * result with a deadline-guarded all-reduce (tc_agree), so that a failure
 * fails every member together, naming the failed rank; then the blocking
 * calls run under a guard thread that, if they make no progress within the
 * deadline, names the lost rank and ends the process (nothing else can
 * get a thread out of a blocking MPI call); then all agree that the
 * window exists on every member.
 *
 * TCOMM_FAULT=point:rank:signal (test hook) raises signal (KILL, STOP) on
 * that world rank at a named point ("shm-agree": before the first
 * agreement; "shm-alloc": between it and the blocking allocation), so that
 * tests can lose a rank exactly inside this sequence; compiled out by
 * --disable-test-hooks (transport.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "trainer/comm/transport/transport.h"

#ifndef TORUS_NO_TEST_HOOKS
void tc_fault_point(const tcomm_t *c, const char *point)
{
    const char *f = getenv("TCOMM_FAULT");
    char name[32], sig[8];
    int rank;
    if (!f || sscanf(f, "%31[^:]:%d:%7s", name, &rank, sig) != 3 ||
        strcmp(name, point) != 0 || rank != c->info.rank)
        return;
    fprintf(stderr, "tcomm: rank %d: TCOMM_FAULT: SIG%s at %s\n", rank, sig,
            point);
    fflush(stderr);
    kill(getpid(), strcmp(sig, "STOP") == 0 ? SIGSTOP : SIGKILL);
}
#endif

/* Where OpenMPI's osc/sm component puts a window's backing file. */
static const char *_backing_dir(void)
{
    const char *d = getenv("OMPI_MCA_osc_sm_backing_directory");
    return d && d[0] ? d : "/dev/shm";
}

/* Room for total bytes of window where its backing file goes: on tmpfs a
 * file larger than the free space is created sparse and the first touch
 * past it is a SIGBUS, so it must be checked before. */
static int _room(const tcomm_t *c, size_t total)
{
    struct statvfs st;
    const char *d = _backing_dir();
    if (statvfs(d, &st) != 0) {
        TORUS_FAIL(TCOMM_ERR_NOMEM,
                   "rank %d: shared-memory directory %s (OMPI_MCA_osc_sm_"
                   "backing_directory): %s",
                   c->info.rank, d, strerror(errno));
        return 0;
    }
    unsigned long long fr = (unsigned long long)st.f_bavail * st.f_frsize;
    if (fr < total) {
        TORUS_FAIL(TCOMM_ERR_NOMEM,
                   "rank %d: shared-memory directory %s has %llu bytes free, "
                   "the window needs %zu",
                   c->info.rank, d, fr, total);
        return 0;
    }
    return 1;
}

/* The blocking allocation, as tc_guarded runs it. */
typedef struct {
    size_t bytes;
    int disp;
    MPI_Info info;
    MPI_Comm comm;
    void *base;
    MPI_Win *win;
} _alloc_args;

static int _alloc(void *arg)
{
    _alloc_args *a = arg;
    return MPI_Win_allocate_shared((MPI_Aint)a->bytes, a->disp, a->info,
                                   a->comm, a->base, a->win);
}

tcomm_rc tc_win_alloc(tcomm_t *c, const tc_group *g, int ok, size_t bytes,
                      int disp, MPI_Info info, void *base, MPI_Win *win,
                      int *who)
{
    int named = -1;
    *win = MPI_WIN_NULL;
    tc_fault_point(c, "shm-agree");
    /* Every member's segment lands in one backing file on this node. */
    if (ok && bytes > ((size_t)-1) / (size_t)g->size) {
        TORUS_FAIL(TCOMM_ERR_NOMEM,
                   "rank %d: %d segments of %zu bytes overflow", c->info.rank,
                   g->size, bytes);
        ok = 0;
    } else if (ok)
        ok = _room(c, bytes * (size_t)g->size);
    tcomm_rc rc = tc_agree_why(c, g, ok, &named, "prepare its shared segment",
                               TCOMM_ERR_NOMEM);
    if (who)
        *who = named;
    if (rc)
        return rc;
    tc_fault_point(c, "shm-alloc");
    _alloc_args aa = {bytes, disp, info, g->comm, base, win};
    int mrc = tc_guarded(c, "MPI_Win_allocate_shared", _alloc, &aa);
    if (mrc != MPI_SUCCESS) {
        *win = MPI_WIN_NULL;
        TORUS_FAIL(TCOMM_ERR_NOMEM,
                   "rank %d: MPI_Win_allocate_shared of %zu bytes in the %s "
                   "failed (MPI error %d)",
                   c->info.rank, bytes, g->name, mrc);
    }
    named = -1;
    rc = tc_agree_why(c, g, mrc == MPI_SUCCESS, &named,
                      "allocate its shared segment", TCOMM_ERR_NOMEM);
    if (who)
        *who = named;
    /* A window that exists on only some members cannot be freed (a
     * collective the others would not enter): it is left to the job's
     * end. */
    if (rc)
        *win = MPI_WIN_NULL;
    return rc;
}
