/* train/test_hooks.c: the tests' fault injection (see
 * ttrain_test_hooks.h). The variables are read at each call: a test sets
 * them for one run, and a run without them pays one getenv per step. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "trainer/train/ttrain_test_hooks.h"

#ifdef TORUS_NO_TEST_HOOKS
void ttrain_test_sleep(const char *where, int rank, long step)
{
    (void)where, (void)rank, (void)step;
}

int ttrain_test_overflow(int rank, long step)
{
    (void)rank, (void)step;
    return 0;
}
#else
void ttrain_test_sleep(const char *where, int rank, long step)
{
    const char *e = getenv("TTRAIN_TEST_SLEEP");
    char w[8];
    int r;
    long at;
    double s;
    if (!e || sscanf(e, "%7[a-z]:%d:%ld:%lf", w, &r, &at, &s) != 4 ||
        strcmp(w, where) || r != rank || (at && at != step) || !(s > 0) ||
        s > 3600)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

int ttrain_test_overflow(int rank, long step)
{
    const char *e = getenv("TTRAIN_TEST_OVERFLOW");
    int r;
    long at;
    return e && sscanf(e, "%d:%ld", &r, &at) == 2 && r == rank &&
           (!at || at == step);
}
#endif
