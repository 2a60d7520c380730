/* results.c: the sweep's results file, one flat JSON object per finished
 * task. Lines are appended under an exclusive lock, each with one write,
 * so tasks of the array that finish together do not interleave. Reading
 * trusts nothing: every field is required, typed and range-checked, the
 * task must be the plan's task with the same batch, recipe, trial and LR,
 * and a task may appear once; errors name the file and line. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "trainer/sweep/tsweep.h"

/* The fields, in the order they are written. */
enum {
    _TASK,
    _BATCH,
    _RECIPE,
    _TRIAL,
    _LR,
    _REACHED,
    _STEPS,
    _TIME,
    _TOP1,
    _NF
};
static const char *const _field[_NF] = {"task",  "batch", "recipe",
                                        "trial", "lr",    "reached",
                                        "steps", "time",  "top1"};

static int _field_of(const char *k, size_t n)
{
    for (int i = 0; i < _NF; i++)
        if (strlen(_field[i]) == n && !memcmp(_field[i], k, n))
            return i;
    return -1;
}

/* Stores value v (text, n bytes, a number or a quoted string) in r. */
static int _store(tsweep_result *r, int f, const char *v, size_t n)
{
    char buf[64], *end;
    if (f == _RECIPE) {
        if (n < 2 || v[0] != '"' || v[n - 1] != '"' ||
            n - 2 >= sizeof(r->recipe))
            return -1;
        memcpy(r->recipe, v + 1, n - 2);
        r->recipe[n - 2] = '\0';
        return strpbrk(r->recipe, "\"\\") ? -1 : 0;
    }
    if (!n || n >= sizeof(buf))
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    errno = 0;
    double x = strtod(buf, &end);
    if (*end || errno || !isfinite(x) || x < 0 || x > 1e15)
        return -1;
    int integral = x == floor(x);
    switch (f) {
    case _TASK:
        r->task = (int)x;
        return integral && x < 1e6 ? 0 : -1;
    case _BATCH:
        r->batch = (int)x;
        return integral && x <= 1 << 24 ? 0 : -1;
    case _TRIAL:
        r->trial = (int)x;
        return integral && x < 100 ? 0 : -1;
    case _REACHED:
        r->reached = (int)x;
        return x == 0 || x == 1 ? 0 : -1;
    case _STEPS:
        r->steps = (long)x;
        return integral ? 0 : -1;
    case _LR:
        r->lr = x;
        return x > 0 ? 0 : -1;
    case _TIME:
        r->time = x;
        return 0;
    default:
        r->top1 = x;
        return x <= 100 ? 0 : -1;
    }
}

/* Bytes of the value at v: a quoted string with its quotes, or up to the
 * next ',' or '}'; 0 for an unterminated string. */
static size_t _value_len(const char *v)
{
    if (*v != '"')
        return strcspn(v, ",}");
    const char *e = strchr(v + 1, '"');
    return e ? (size_t)(e - v) + 1 : 0;
}

/* Parses one line {"k":v,...} with exactly the fields above. Returns 0
 * or -1 with *why set. */
static int _parse(const char *s, tsweep_result *r, const char **why)
{
    int have = 0;
    *why = "not a JSON object";
    if (*s++ != '{')
        return -1;
    for (;;) {
        const char *k = s + 1, *q;
        if (*s != '"' || !(q = strchr(k, '"')) || q[1] != ':')
            return -1;
        int f = _field_of(k, (size_t)(q - k));
        const char *v = q + 2;
        size_t n = _value_len(v);
        if (f < 0 || (have & 1 << f)) {
            *why = f < 0 ? "unknown field" : "field given twice";
            return -1;
        }
        if (!n || _store(r, f, v, n)) {
            *why = "bad value";
            return -1;
        }
        have |= 1 << f;
        s = v + n;
        if (*s == '}' && !s[1])
            break;
        if (*s++ != ',')
            return -1;
    }
    *why = "a field is missing";
    return have == (1 << _NF) - 1 ? 0 : -1;
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
        fabs(r->lr - t->lr) > 1e-9 * t->lr)
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
    char line[TSWEEP_LINE_LEN + 2];
    int no = 0;
    while (fgets(line, sizeof(line), f)) {
        no++;
        size_t len = strlen(line);
        if (!len || line[len - 1] != '\n')
            return TORUS_FAIL(TSWEEP_EPARSE,
                              "%s:%d: line longer than %d bytes or not "
                              "ended by a newline (a cut write?)",
                              path, no, TSWEEP_LINE_LEN);
        line[len - 1] = '\0';
        tsweep_result r = {.line = no};
        const char *why;
        if (_parse(line, &r, &why))
            return TORUS_FAIL(TSWEEP_EPARSE, "%s:%d: %s: '%.80s'", path, no,
                              why, line);
        if (_match(p, &r, out, *n, path))
            return TSWEEP_EPARSE;
        out[(*n)++] = r; /* at most ntasks: each is a plan task, once */
    }
    return ferror(f) ? TORUS_FAIL(TSWEEP_EIO, "%s: read error", path) : 0;
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
    char line[512];
    int len = snprintf(line, sizeof(line),
                       "{\"task\":%d,\"batch\":%d,\"recipe\":\"%s\","
                       "\"trial\":%d,\"lr\":%.17g,\"reached\":%d,"
                       "\"steps\":%ld,\"time\":%.3f,\"top1\":%.4f}\n",
                       r->task, r->batch, r->recipe, r->trial, r->lr,
                       r->reached, r->steps, r->time, r->top1);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0)
        return TORUS_FAIL(TSWEEP_EIO, "%s: cannot open for appending: %s", path,
                          strerror(errno));
    int rc = 0;
    if (flock(fd, LOCK_EX) || write(fd, line, (size_t)len) != len || fsync(fd))
        rc = TORUS_FAIL(TSWEEP_EIO, "%s: cannot append: %s", path,
                        strerror(errno));
    close(fd);
    return rc;
}
