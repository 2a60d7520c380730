/* outcome.c: what a task's torus-train metrics (DIR/work/task-ID.jsonl)
 * say of it, read through json-c, and the one line the sweep adds to them
 * before each attempt ({"sweep_time_before":T}: the wall time of the
 * attempts before it; torus-plot and the other readers of metrics skip
 * records whose keys they do not know).
 * The file is torus-train's and the sweep's own, yet read as hostile: every
 * line must be one JSON object (torus_json's rules), and each field the
 * sweep uses, where a record has it, must have its type and range; a bad
 * line stops the read with an error naming the file and line, where the
 * old strstr reader skipped it. Fields the sweep does not use are not
 * looked at (torus-train may add records and fields). */
#include <errno.h>
#include <string.h>

#include "common/torus_error.h"
#include "common/torus_json.h"
#include "trainer/sweep/tsweep.h"

/* One metrics record, the fields the sweep uses; -1 where absent. */
typedef struct {
    double step, top1, time, before;
    int target, eval, diverged;
} _rec;

/* The record's fields into m; an error names the file, line and field. */
static int _record(const torus_json_rec *j, _rec *m)
{
    long long step = -1, d = 0;
    *m = (_rec){.step = -1, .top1 = -1, .time = -1, .before = -1};
    if (torus_json_has(j, "sweep_time_before"))
        return torus_json_num(j, "sweep_time_before", 0, 1e9, &m->before)
                   ? TSWEEP_EIO
                   : 0;
    if ((torus_json_has(j, "global_step") &&
         torus_json_int(j, "global_step", 0, 1000000000000000LL, &step)) ||
        (torus_json_has(j, "top1") &&
         torus_json_num(j, "top1", 0, 100, &m->top1)) ||
        (torus_json_has(j, "time") &&
         torus_json_num(j, "time", 0, 1e15, &m->time)) ||
        (torus_json_has(j, "diverged") &&
         torus_json_int(j, "diverged", 0, 1, &d)))
        return TSWEEP_EIO;
    m->step = (double)step;
    m->diverged = (int)d;
    m->target = torus_json_has(j, "target_top1");
    m->eval = torus_json_has(j, "top5");
    return 0;
}

/* Calls fold(m, arg) on each record of path until it returns 1. */
static int _each(const char *path, int (*fold)(const _rec *, void *),
                 void *arg)
{
    static char buf[TSWEEP_LINE_LEN + 1]; /* the sweep runs one thread */
    FILE *f = fopen(path, "r");
    if (!f)
        return TORUS_FAIL(TSWEEP_EIO, "%s: cannot open: %s", path,
                          strerror(errno));
    long no = 0;
    int rc = 0;
    for (;;) {
        torus_json_rec j;
        _rec m;
        if (torus_json_read_line(f, path, &no, buf, TSWEEP_LINE_LEN, &j) ||
            (j.obj && _record(&j, &m)))
            rc = TSWEEP_EIO;
        int last = rc || !j.obj;
        torus_json_rec_free(&j);
        if (last || fold(&m, arg))
            break;
    }
    fclose(f);
    return rc;
}

typedef struct {
    double target, before;
    tsweep_result *r;
} _fold_ctx;

/* target < 0: the "target_top1" record decides (reached: its step and
 * top-1), else the last step and best top-1 stand. target >= 0: the first
 * evaluation (a record with "top5") at or above it (reached: its step,
 * top-1 and time, counted from the task's first attempt: an evaluation's
 * "time" restarts at 0 in every torus-train run, so the attempt's
 * sweep_time_before record gives the time of the earlier attempts). */
static int _fold(const _rec *m, void *arg)
{
    _fold_ctx *c = arg;
    tsweep_result *r = c->r;
    if (m->before >= 0) {
        c->before = m->before;
        return 0;
    }
    if (m->step > r->steps)
        r->steps = (long)m->step;
    if (m->top1 > r->top1)
        r->top1 = m->top1;
    int hit = c->target < 0 ? m->target && m->step >= 0 && m->top1 >= 0
                            : !m->target && m->eval && m->step > 0 &&
                                  m->top1 >= c->target;
    if (!hit)
        return 0;
    r->reached = 1, r->steps = (long)m->step, r->top1 = m->top1;
    if (c->target >= 0)
        r->time = c->before + (m->time < 0 ? 0 : m->time);
    return 1;
}

int tsweep_outcome(const char *path, double target, tsweep_result *r)
{
    _fold_ctx c = {.target = target, .r = r};
    r->reached = 0;
    r->steps = 0;
    r->top1 = 0;
    return _each(path, _fold, &c);
}

static int _fold_diverged(const _rec *m, void *arg)
{
    *(int *)arg |= m->diverged;
    return m->diverged;
}

int tsweep_diverged(const char *path, int *diverged)
{
    *diverged = 0;
    return _each(path, _fold_diverged, diverged);
}

int tsweep_mark(const char *path, double before)
{
    json_object *o = json_object_new_object();
    torus_json_fixed(o, "sweep_time_before", before, 3);
    FILE *m = fopen(path, "a");
    int bad = !m || torus_json_write_line(m, o);
    if (!m)
        json_object_put(o);
    if ((m && fclose(m)) || bad)
        return TORUS_FAIL(TSWEEP_EIO, "%s: cannot append: %s", path,
                          strerror(errno));
    return 0;
}
