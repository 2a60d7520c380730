/* results.c: the sweep's results file, one flat JSON object per finished
 * task. Lines are appended under an exclusive fcntl lock, each with one
 * write, so tasks of the array that finish together do not interleave.
 * Reading trusts nothing: every field is required, typed and
 * range-checked, the task must be the plan's task with the same batch,
 * recipe, trial and LR, and a task may appear once; errors name the file and line. The JSON is
 * json-c's (through common/torus_json.h), both ways. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_json.h"
#include "trainer/sweep/tsweep.h"

/* The fields, in the order they are written; the last, "diverged", only
 * where it is 1 (a results file from before it reads as it did). */
static const char *const _field[] = {"task",  "batch", "recipe",
                                     "trial", "lr",    "reached",
                                     "steps", "time",  "top1",
                                     "diverged"};
#define _NF ((int)(sizeof(_field) / sizeof(_field[0])))

/* The typed, range-checked fields of one parsed line into r (json-c
 * checked the JSON, torus_json the duplicates and the line's shape). */
static int _fields(const torus_json_rec *j, tsweep_result *r)
{
    long long task, batch, trial, reached, steps, diverged = 0;
    if (torus_json_only(j, _field, _NF) ||
        torus_json_int(j, "task", 0, 999999, &task) ||
        torus_json_int(j, "batch", 0, 1 << 24, &batch) ||
        torus_json_str(j, "recipe", r->recipe, sizeof(r->recipe)) ||
        torus_json_int(j, "trial", 0, 99, &trial) ||
        torus_json_num(j, "lr", 0, 1e15, &r->lr) ||
        torus_json_int(j, "reached", 0, 1, &reached) ||
        torus_json_int(j, "steps", 0, 1000000000000000LL, &steps) ||
        torus_json_num(j, "time", 0, 1e15, &r->time) ||
        torus_json_num(j, "top1", 0, 100, &r->top1) ||
        (torus_json_has(j, "diverged") &&
         torus_json_int(j, "diverged", 1, 1, &diverged)))
        return TSWEEP_EPARSE;
    if (diverged && reached)
        return TORUS_FAIL(TSWEEP_EPARSE, "%s:%ld: a task cannot both reach "
                          "the target and diverge", j->path, j->line);
    if (!(r->lr > 0))
        return TORUS_FAIL(TSWEEP_EPARSE, "%s:%ld: field \"lr\": must be "
                          "above 0", j->path, j->line);
    r->task = (int)task, r->batch = (int)batch, r->trial = (int)trial;
    r->reached = (int)reached, r->steps = (long)steps;
    r->diverged = (int)diverged;
    return 0;
}

/* The parsed line must be the plan's task, once. */
static int _match(const tsweep_plan *p, const tsweep_result *r,
                  const tsweep_result *all, int n, const char *path)
{
    if (r->task >= p->ntasks)
        return TORUS_FAIL(TSWEEP_EPARSE,
                          "%s:%d: task %d is not in the plan "
                          "(%d tasks)",
                          path, r->line, r->task, p->ntasks);
    const tsweep_task *t = &p->task[r->task];
    if (r->batch != t->batch || r->trial != t->trial ||
        strcmp(r->recipe, p->recipe[t->recipe].name) ||
        !tsweep_lr_same(r->lr, t->lr))
        return TORUS_FAIL(TSWEEP_EPARSE,
                          "%s:%d: task %d is batch %d %s trial %d lr %g in "
                          "the plan, not batch %d %s trial %d lr %g",
                          path, r->line, r->task, t->batch,
                          p->recipe[t->recipe].name, t->trial, t->lr, r->batch,
                          r->recipe, r->trial, r->lr);
    const tsweep_result *d = tsweep_results_find(all, n, r->task);
    if (d)
        return TORUS_FAIL(TSWEEP_EPARSE,
                          "%s:%d: task %d again (first at line "
                          "%d)",
                          path, r->line, r->task, d->line);
    return 0;
}

static int _read_all(FILE *f, const char *path, const tsweep_plan *p,
                     tsweep_result *out, int *n)
{
    static char line[TSWEEP_LINE_LEN + 1]; /* the sweep runs one thread */
    long no = 0;
    for (;;) {
        torus_json_rec j;
        if (torus_json_read_line(f, path, &no, line, TSWEEP_LINE_LEN, &j)) {
            torus_json_rec_free(&j);
            return TSWEEP_EPARSE;
        }
        if (!j.obj)
            return 0;
        tsweep_result r = {.line = (int)no};
        int rc = _fields(&j, &r);
        torus_json_rec_free(&j);
        if (rc || _match(p, &r, out, *n, path))
            return TSWEEP_EPARSE;
        out[(*n)++] = r; /* at most ntasks: each is a plan task, once */
    }
}

int tsweep_results_read(const char *path, const tsweep_plan *p,
                        tsweep_result **out, int *n)
{
    *out = calloc((size_t)p->ntasks + 1, sizeof(**out));
    *n = 0;
    if (!*out)
        return TORUS_FAIL(TSWEEP_EIO, "out of memory");
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT ? 0
                               : TORUS_FAIL(TSWEEP_EIO, "%s: cannot open: %s",
                                            path, strerror(errno));
    int rc = _read_all(f, path, p, *out, n);
    fclose(f);
    return rc;
}

const tsweep_result *tsweep_results_find(const tsweep_result *r, int n, int id)
{
    for (int i = 0; i < n; i++)
        if (r[i].task == id)
            return &r[i];
    return NULL;
}

int tsweep_results_append(const char *path, const tsweep_result *r)
{
    char line[TSWEEP_LINE_LEN];
    json_object *o = json_object_new_object();
    torus_json_int64(o, "task", r->task);
    torus_json_int64(o, "batch", r->batch);
    torus_json_string(o, "recipe", r->recipe);
    torus_json_int64(o, "trial", r->trial);
    torus_json_exact(o, "lr", r->lr);
    torus_json_int64(o, "reached", r->reached);
    torus_json_int64(o, "steps", r->steps);
    torus_json_fixed(o, "time", r->time, 3);
    torus_json_fixed(o, "top1", r->top1, 4);
    if (r->diverged)
        torus_json_int64(o, "diverged", 1);
    const char *text = torus_json_text(o);
    int len = text ? snprintf(line, sizeof(line), "%s\n", text) : -1;
    json_object_put(o);
    if (len < 0 || len >= (int)sizeof(line))
        return TORUS_FAIL(TSWEEP_EIO, "%s: task %d: no line to append (out "
                          "of memory or longer than %zu bytes)", path, r->task,
                          sizeof(line) - 1);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0)
        return TORUS_FAIL(TSWEEP_EIO, "%s: cannot open for appending: %s", path,
                          strerror(errno));
    int rc = 0;
    /* One write under the lock: tasks finishing together do not
     * interleave. fcntl, not flock(), which Lustre mounted noflock
     * refuses. */
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int locked;
    while ((locked = fcntl(fd, F_SETLKW, &lk)) && errno == EINTR)
        ;
    if (locked || write(fd, line, (size_t)len) != len || fsync(fd))
        rc = TORUS_FAIL(TSWEEP_EIO, "%s: cannot append: %s", path,
                        strerror(errno));
    close(fd);
    return rc;
}
