/* train/test_hooks.c: the tests' fault injection (see
 * ttrain_test_hooks.h). The variables are read at each call: a test sets
 * them for one run, and a run without them pays one getenv per step. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/torus_report.h"
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

void ttrain_test_served(int rank, uint64_t epoch, uint64_t step,
                        const uint64_t *ids, int n)
{
    (void)rank, (void)epoch, (void)step, (void)ids, (void)n;
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

/* Appends, so a resumed run adds to the lines of the run it continues;
 * a file that cannot be written is said (the test then fails on it). */
void ttrain_test_served(int rank, uint64_t epoch, uint64_t step,
                        const uint64_t *ids, int n)
{
    const char *dir = getenv("TTRAIN_TEST_SERVED");
    char path[4096];
    if (!dir || !*dir)
        return;
    snprintf(path, sizeof(path), "%s/served-%d.txt", dir, rank);
    FILE *f = fopen(path, "a");
    if (!f) {
        torus_warn("TTRAIN_TEST_SERVED: %s: %s", path, strerror(errno));
        return;
    }
    fprintf(f, "%llu %llu", (unsigned long long)epoch,
            (unsigned long long)step);
    for (int i = 0; i < n; i++)
        fprintf(f, " %llu", (unsigned long long)ids[i]);
    fputc('\n', f);
    fclose(f);
}
#endif
