/* plan.c: the sweep's grid and its plan file. The file is text, one
 * setting or task per line ("key value..."), so a user can read it and a
 * job array task finds its line by id. It is read back as hostile input:
 * every line is checked, and errors name the file and line. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/sweep/tsweep.h"

void tsweep_plan_defaults(tsweep_plan *p)
{
    memset(p, 0, sizeof(*p));
    p->base_lr = 0.1;
    p->ref_batch = 256;
    p->trials = 3;
    p->lr_spread = 2;
    p->epochs = 10;
    p->eval_images = 10000;
}

static int _name_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n >= TSWEEP_NAME_LEN)
        return 0;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789_.+-") == n;
}

/* An option string is split on blanks when a task runs: no quotes, no
 * control characters, so what the plan shows is what runs. */
static int _args_ok(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 32 || *s == '"' || *s == '\'' || *s == '\\')
            return 0;
    return 1;
}

int tsweep_parse_batches(tsweep_plan *p, const char *s)
{
    char *end;
    errno = 0;
    long a = strtol(s, &end, 10), b;
    p->nbatches = 0;
    if (*end == ':') {
        b = strtol(end + 1, &end, 10);
        if (*end || errno || a < 1 || b < a || b > (1L << 24))
            return TORUS_FAIL(TSWEEP_EPLAN, "--batches '%s': not FROM:TO", s);
        for (long x = a; x <= b && p->nbatches < TSWEEP_MAX_BATCHES; x *= 2)
            p->batch[p->nbatches++] = (int)x;
        return 0;
    }
    for (const char *q = s;; q = end + 1) {
        errno = 0;
        a = strtol(q, &end, 10);
        if (end == q || (*end && *end != ',') || errno || a < 1 ||
            a > (1L << 24) || p->nbatches == TSWEEP_MAX_BATCHES ||
            (p->nbatches && a <= p->batch[p->nbatches - 1]))
            return TORUS_FAIL(TSWEEP_EPLAN,
                              "--batches '%s': not increasing batches in "
                              "1..16777216 (at most %d)",
                              s, TSWEEP_MAX_BATCHES);
        p->batch[p->nbatches++] = (int)a;
        if (!*end)
            return 0;
    }
}

int tsweep_add_recipe(tsweep_plan *p, const char *spec)
{
    const char *eq = strchr(spec, '=');
    size_t n = eq ? (size_t)(eq - spec) : strlen(spec);
    if (p->nrecipes == TSWEEP_MAX_RECIPES)
        return TORUS_FAIL(TSWEEP_EPLAN, "--recipe: at most %d recipes",
                          TSWEEP_MAX_RECIPES);
    tsweep_recipe *r = &p->recipe[p->nrecipes];
    if (n >= sizeof(r->name) || (eq && strlen(eq + 1) >= sizeof(r->args)))
        return TORUS_FAIL(TSWEEP_EPLAN, "--recipe '%.40s...': too long", spec);
    memcpy(r->name, spec, n);
    r->name[n] = '\0';
    snprintf(r->args, sizeof(r->args), "%s", eq ? eq + 1 : "");
    if (!_name_ok(r->name) || !_args_ok(r->args))
        return TORUS_FAIL(TSWEEP_EPLAN,
                          "--recipe '%s': want NAME=OPTIONS, NAME of "
                          "[A-Za-z0-9_.+-], OPTIONS without quotes",
                          spec);
    const char *lr = strstr(r->args, "--lr ");
    if (lr && (lr == r->args || lr[-1] == ' ')) {
        char *end;
        r->lr = strtod(lr + 5, &end);
        if (!(r->lr > 0 && r->lr < 1e6) || (*end && *end != ' '))
            return TORUS_FAIL(TSWEEP_EPLAN, "--recipe '%s': bad --lr", spec);
    }
    for (int i = 0; i < p->nrecipes; i++)
        if (!strcmp(p->recipe[i].name, r->name))
            return TORUS_FAIL(TSWEEP_EPLAN, "--recipe: '%s' given twice",
                              r->name);
    p->nrecipes++;
    return 0;
}

int tsweep_lr_same(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fabs(b);
}

int tsweep_task_epochs(const tsweep_plan *p, int batch)
{
    if (p->min_steps <= 0 || p->dataset_size <= 0 || batch < 1)
        return p->epochs;
    long per = p->dataset_size / batch;
    per = per < 1 ? 1 : per;
    long e = (p->min_steps + per - 1) / per;
    return e > p->epochs ? (e > 1000000 ? 1000000 : (int)e) : p->epochs;
}

long tsweep_eval_every(const tsweep_plan *p, int batch)
{
    long e = (p->eval_images + batch / 2) / batch;
    return e < 1 ? 1 : e;
}

static int _check(const tsweep_plan *p)
{
    if (p->target == 0)
        return TORUS_FAIL(TSWEEP_EPLAN, "--target PCT is required (the "
                                        "test top-1 to reach)");
    if (!(p->target > 0 && p->target <= 100))
        return TORUS_FAIL(TSWEEP_EPLAN, "--target: %g is not in (0, 100]",
                          p->target);
    if (!(p->base_lr > 0 && p->base_lr < 1e6) || p->ref_batch < 1 ||
        p->trials < 1 || p->trials > TSWEEP_MAX_TRIALS ||
        !(p->lr_spread > 1 && p->lr_spread <= 100))
        return TORUS_FAIL(TSWEEP_EPLAN,
                          "--lr > 0, --ref-batch >= 1, --trials in 1..%d and "
                          "--lr-spread in (1, 100] are needed",
                          TSWEEP_MAX_TRIALS);
    if (p->epochs < 1 || p->max_steps < 0 || p->eval_images < 1)
        return TORUS_FAIL(TSWEEP_EPLAN, "--epochs and --eval-images must be "
                                        ">= 1, --max-steps >= 0");
    if (p->min_steps < 0 || p->dataset_size < 0 ||
        (p->min_steps > 0) != (p->dataset_size > 0))
        return TORUS_FAIL(TSWEEP_EPLAN,
                          "--min-steps and --dataset-size go together (the "
                          "steps of an epoch at each batch), both > 0");
    if (!(p->diverge_loss >= 0 && p->diverge_loss <= 1e15))
        return TORUS_FAIL(TSWEEP_EPLAN,
                          "--diverge-loss: %g is not in (0, 1e15] (0: off)",
                          p->diverge_loss);
    if (!p->nbatches || !p->nrecipes)
        return TORUS_FAIL(TSWEEP_EPLAN, "no --batches or no --recipe");
    if (!_args_ok(p->train) || !_args_ok(p->launcher))
        return TORUS_FAIL(TSWEEP_EPLAN,
                          "--train and --launcher are split on blanks: no "
                          "quotes, backslashes or control characters");
    return 0;
}

int tsweep_plan_expand(tsweep_plan *p)
{
    if (_check(p))
        return TSWEEP_EPLAN;
    p->ntasks = 0;
    for (int b = 0; b < p->nbatches; b++)
        for (int r = 0; r < p->nrecipes; r++)
            for (int t = 0; t < p->trials; t++) {
                /* A grid centred on the linear-scaling value (torus-train
                 * multiplies --lr by batch / ref-batch). */
                double k = t - (p->trials - 1) / 2.0,
                       lr = p->recipe[r].lr ? p->recipe[r].lr : p->base_lr;
                tsweep_task *x = &p->task[p->ntasks];
                *x = (tsweep_task){p->ntasks, p->batch[b], r, t,
                                   lr * pow(p->lr_spread, k)};
                p->ntasks++;
            }
    return 0;
}

int tsweep_plan_write(const tsweep_plan *p, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return TORUS_FAIL(TSWEEP_EIO, "%s: cannot create: %s", path,
                          strerror(errno));
    fprintf(f, "# torus-sweep plan: the settings, then one task per line "
               "(id batch recipe trial lr),\n# the id being the job array "
               "index. Written by `torus-sweep plan`; edit with it.\n");
    fprintf(f, "target %.17g\nlr %.17g\nref-batch %d\ntrials %d\n", p->target,
            p->base_lr, p->ref_batch, p->trials);
    fprintf(f, "lr-spread %.17g\nepochs %d\nmax-steps %ld\neval-images %ld\n",
            p->lr_spread, p->epochs, p->max_steps, p->eval_images);
    /* Only when set: a plan without them reads and compares as before. */
    if (p->min_steps)
        fprintf(f, "min-steps %ld\ndataset-size %ld\n", p->min_steps,
                p->dataset_size);
    if (p->diverge_loss)
        fprintf(f, "diverge-loss %.17g\n", p->diverge_loss);
    fprintf(f, "train %s\nlauncher %s\nbatches ", p->train, p->launcher);
    for (int i = 0; i < p->nbatches; i++)
        fprintf(f, "%s%d", i ? "," : "", p->batch[i]);
    fprintf(f, "\n");
    for (int i = 0; i < p->nrecipes; i++)
        fprintf(f, "recipe %s=%s\n", p->recipe[i].name, p->recipe[i].args);
    for (int i = 0; i < p->ntasks; i++) {
        const tsweep_task *t = &p->task[i];
        fprintf(f, "task %d %d %s %d %.17g\n", t->id, t->batch,
                p->recipe[t->recipe].name, t->trial, t->lr);
    }
    if (fclose(f))
        return TORUS_FAIL(TSWEEP_EIO, "%s: write failed: %s", path,
                          strerror(errno));
    return 0;
}

/* A number setting: all of v, finite. */
static int _num(const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || fabs(x) > 1e15)
        return -1;
    *out = x;
    return 0;
}

/* One "key value" line of the settings into p; -1 when it is not one. */
static int _setting(tsweep_plan *p, const char *k, const char *v)
{
    double x;
    if (!strcmp(k, "train") || !strcmp(k, "launcher")) {
        char *dst = k[0] == 't' ? p->train : p->launcher;
        if (strlen(v) >= TSWEEP_ARGS_LEN)
            return -1;
        strcpy(dst, v);
        return 0;
    }
    if (!strcmp(k, "batches"))
        return tsweep_parse_batches(p, v) ? -1 : 0;
    if (!strcmp(k, "recipe"))
        return tsweep_add_recipe(p, v) ? -1 : 0;
    if (_num(v, &x))
        return -1;
    if (!strcmp(k, "target"))
        p->target = x;
    else if (!strcmp(k, "lr"))
        p->base_lr = x;
    else if (!strcmp(k, "lr-spread"))
        p->lr_spread = x;
    else if (!strcmp(k, "diverge-loss"))
        p->diverge_loss = x;
    else if (!strcmp(k, "ref-batch") && x == (int)x)
        p->ref_batch = (int)x;
    else if (!strcmp(k, "trials") && x == (int)x)
        p->trials = (int)x;
    else if (!strcmp(k, "epochs") && x == (int)x)
        p->epochs = (int)x;
    else if (!strcmp(k, "max-steps") && x == (long)x)
        p->max_steps = (long)x;
    else if (!strcmp(k, "eval-images") && x == (long)x)
        p->eval_images = (long)x;
    else if (!strcmp(k, "min-steps") && x == (long)x)
        p->min_steps = (long)x;
    else if (!strcmp(k, "dataset-size") && x == (long)x)
        p->dataset_size = (long)x;
    else
        return -1;
    return 0;
}

/* A "task" line must be the task the settings expand to. */
static int _task_line(const tsweep_plan *p, const char *v, int *seen)
{
    int id, batch, trial, n = 0;
    char name[TSWEEP_NAME_LEN], lr[64];
    if (sscanf(v, "%d %d %31s %d %63s%n", &id, &batch, name, &trial, lr, &n) !=
            5 ||
        v[n] || id != *seen || id >= p->ntasks)
        return -1;
    const tsweep_task *t = &p->task[id];
    char want[64];
    snprintf(want, sizeof(want), "%.17g", t->lr);
    if (batch != t->batch || trial != t->trial || strcmp(lr, want) ||
        strcmp(name, p->recipe[t->recipe].name))
        return -1;
    (*seen)++;
    return 0;
}

/* Reads the lines of f: settings first, the tasks after them. */
static int _read_lines(tsweep_plan *p, FILE *f, const char *path)
{
    char line[TSWEEP_LINE_LEN + 2];
    int no = 0, seen = 0, expanded = 0;
    while (fgets(line, sizeof(line), f)) {
        no++;
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n')
            line[--n] = '\0';
        else if (!feof(f))
            return TORUS_FAIL(TSWEEP_EPARSE, "%s:%d: line longer than %d", path,
                              no, TSWEEP_LINE_LEN);
        if (!n || line[0] == '#')
            continue;
        char *v = strchr(line, ' ');
        if (v)
            *v++ = '\0';
        const char *k = line, *val = v ? v : "";
        if (!strcmp(k, "task")) {
            if (!expanded && tsweep_plan_expand(p))
                return torus_error_prefix(TSWEEP_EPARSE, "%s:%d", path, no);
            expanded = 1;
            if (_task_line(p, val, &seen))
                return TORUS_FAIL(TSWEEP_EPARSE,
                                  "%s:%d: task line '%.80s' is not task %d "
                                  "of the settings above",
                                  path, no, val, seen);
        } else if (expanded || _setting(p, k, val)) {
            return TORUS_FAIL(TSWEEP_EPARSE,
                              "%s:%d: '%.40s' is not a setting of a plan "
                              "(or comes after the tasks)",
                              path, no, k);
        }
    }
    if (!expanded || seen != p->ntasks)
        return TORUS_FAIL(TSWEEP_EPARSE, "%s: %d of %d tasks listed", path,
                          seen, expanded ? p->ntasks : 0);
    return 0;
}

int tsweep_plan_read(tsweep_plan *p, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return TORUS_FAIL(TSWEEP_EIO, "%s: cannot open: %s", path,
                          strerror(errno));
    tsweep_plan_defaults(p);
    int rc = _read_lines(p, f, path);
    fclose(f);
    return rc;
}
