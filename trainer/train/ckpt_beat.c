/* train/ckpt_beat.c: rank 0's checkpoint write and the others' wait (see
 * ttrain_ckpt_beat.h). Every round is one tcomm_max_double of a state:
 * the largest wins, so one rank's news reaches all. */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "common/torus_error.h"
#include "trainer/train/ttrain_ckpt_beat.h"
#include "trainer/train/ttrain_error.h"

enum { _CK_WRITING, _CK_DONE, _CK_FAILED, _CK_LATE };

typedef struct {
    const ttrain_ckpt_beat *b;
    double beat;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* the writer's, under mu */
} _beat;

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* What every rank says when the rounds end badly (v: _CK_FAILED/_LATE). */
static int _wait_error(int rank, double v, double limit)
{
    if (v == _CK_LATE)
        return TORUS_FAIL(TTRAIN_ERANKS,
                          "rank %d: rank 0 has not finished writing the "
                          "checkpoint within --checkpoint-timeout %g s",
                          rank, limit);
    return TORUS_FAIL(TTRAIN_ERANKS,
                      "rank %d: rank 0 could not write the checkpoint", rank);
}

/* Rank 0's heartbeat thread: a round at least every beat seconds, and one
 * as soon as the write ends. A lost peer or the time limit end the job
 * from here, as the writer may be stuck in the file system. */
static void *_heartbeat(void *arg)
{
    _beat *h = arg;
    const ttrain_ckpt_beat *b = h->b;
    double t0 = _now();
    for (;;) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double end = until.tv_sec + 1e-9 * until.tv_nsec + h->beat;
        until.tv_sec = (time_t)end;
        until.tv_nsec = (long)((end - (double)until.tv_sec) * 1e9);
        pthread_mutex_lock(&h->mu);
        while (h->state == _CK_WRITING &&
               pthread_cond_timedwait(&h->cv, &h->mu, &until) != ETIMEDOUT)
            ;
        double v = h->state;
        pthread_mutex_unlock(&h->mu);
        if (v == _CK_WRITING && _now() - t0 > b->ckpt_timeout)
            v = _CK_LATE;
        if (tcomm_max_double(b->comm, &v)) {
            torus_error_prefix(-1, "rank 0: while writing");
            b->fail("checkpoint", torus_error_msg());
        }
        if (v == _CK_LATE) {
            _wait_error(0, v, b->ckpt_timeout);
            b->fail("checkpoint", torus_error_msg());
        }
        if (v != _CK_WRITING)
            return NULL;
    }
}

int ttrain_ckpt_beat_write(const ttrain_ckpt_beat *b, int (*write)(void *ctx),
                           void *ctx)
{
    double t = b->comm_timeout / 4;
    _beat h = {.b = b, .beat = t < 1 ? t : 1, .state = _CK_WRITING};
    pthread_t th;
    int multi = b->world > 1;
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    if (multi && pthread_create(&th, NULL, _heartbeat, &h))
        return TORUS_FAIL(TTRAIN_ERANKS,
                          "rank 0: cannot start the heartbeat thread");
    int rc = write(ctx);
    pthread_mutex_lock(&h.mu);
    h.state = rc ? _CK_FAILED : _CK_DONE;
    pthread_cond_signal(&h.cv);
    pthread_mutex_unlock(&h.mu);
    if (multi)
        pthread_join(th, NULL);
    pthread_cond_destroy(&h.cv);
    pthread_mutex_destroy(&h.mu);
    return rc;
}

int ttrain_ckpt_beat_wait(const ttrain_ckpt_beat *b)
{
    for (;;) {
        double v = _CK_WRITING;
        if (tcomm_max_double(b->comm, &v))
            return torus_error_prefix(
                -1, "rank %d: waiting for rank 0's checkpoint", b->rank);
        if (v == _CK_DONE)
            return 0;
        if (v != _CK_WRITING)
            return _wait_error(b->rank, v, b->ckpt_timeout);
    }
}
