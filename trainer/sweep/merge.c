/* merge.c: one report over a sweep run in parts. A sweep's plan cannot
 * change once it has results (the task ids are batch-major, so a batch
 * or an LR trial added would renumber finished tasks), so more batches,
 * or more LRs at some batches, go into a plan of their own.
 * tsweep_merge() adds such a part to the parts before it: every setting
 * that decides what a task trains must be the same, except the LRs (the
 * plan's lr, trials and lr-spread, and a recipe's own "--lr X": run.c
 * gives every task its "--lr" last, so the task's LR is what trains) and
 * the launcher (how a task ran, not what it trained). A task is its
 * (batch, recipe, LR); one planned by two parts is refused. The union's
 * tasks are sorted by batch, recipe and LR (ids and trial numbers
 * renumbered), and the results renumbered to them (kept in their order:
 * on equal steps the report keeps the first, so the first part's). */
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/sweep/tsweep.h"

/* Recipe options s without their "--lr V" words, blank-separated, into
 * out (TSWEEP_ARGS_LEN: s is no longer). */
static void _sans_lr(const char *s, char *out)
{
    size_t o = 0;
    int skip = 0;
    for (;;) {
        s += strspn(s, " ");
        size_t n = strcspn(s, " ");
        if (!n)
            break;
        if (skip || (n == 4 && !strncmp(s, "--lr", 4))) {
            skip = !skip;
        } else {
            if (o)
                out[o++] = ' ';
            memcpy(out + o, s, n);
            o += n;
        }
        s += n;
    }
    out[o] = '\0';
}

static int _same_but_lr(const char *x, const char *y)
{
    static char sx[TSWEEP_ARGS_LEN], sy[TSWEEP_ARGS_LEN];
    _sans_lr(x, sx);
    _sans_lr(y, sy);
    return !strcmp(sx, sy);
}

/* The first setting (its plan key) in which a and b differ, or NULL. */
static const char *_differs(const tsweep_plan *a, const tsweep_plan *b)
{
    if (a->target != b->target)
        return "target";
    if (a->ref_batch != b->ref_batch)
        return "ref-batch";
    if (a->epochs != b->epochs)
        return "epochs";
    if (a->max_steps != b->max_steps)
        return "max-steps";
    if (a->min_steps != b->min_steps || a->dataset_size != b->dataset_size)
        return "min-steps";
    if (a->eval_images != b->eval_images)
        return "eval-images";
    if (a->diverge_loss != b->diverge_loss)
        return "diverge-loss";
    if (strcmp(a->train, b->train))
        return "train";
    if (a->nrecipes != b->nrecipes)
        return "recipe";
    for (int i = 0; i < a->nrecipes; i++)
        if (strcmp(a->recipe[i].name, b->recipe[i].name) ||
            !_same_but_lr(a->recipe[i].args, b->recipe[i].args))
            return "recipe";
    return NULL;
}

/* The index in u of the task (batch, recipe, LR) of t, or -1. */
static int _find(const tsweep_plan *u, const tsweep_task *t)
{
    for (int i = 0; i < u->ntasks; i++)
        if (u->task[i].batch == t->batch && u->task[i].recipe == t->recipe &&
            tsweep_lr_same(u->task[i].lr, t->lr))
            return i;
    return -1;
}

/* Sorts a's tasks by (batch, recipe, LR), from[] in step, and numbers
 * them: ids in order, trials within each (batch, recipe). Insertion sort:
 * a few hundred tasks. */
static void _sort_tasks(tsweep_plan *a, const char **from)
{
    for (int i = 1; i < a->ntasks; i++) {
        tsweep_task t = a->task[i];
        const char *f = from[i];
        int j = i;
        for (; j > 0; j--) {
            const tsweep_task *q = &a->task[j - 1];
            if (q->batch < t.batch ||
                (q->batch == t.batch &&
                 (q->recipe < t.recipe ||
                  (q->recipe == t.recipe && q->lr <= t.lr))))
                break;
            a->task[j] = *q;
            from[j] = from[j - 1];
        }
        a->task[j] = t;
        from[j] = f;
    }
    for (int i = 0; i < a->ntasks; i++) {
        const tsweep_task *q = i ? &a->task[i - 1] : NULL;
        a->task[i].id = i;
        a->task[i].trial = q && q->batch == a->task[i].batch &&
                                   q->recipe == a->task[i].recipe
                               ? q->trial + 1
                               : 0;
    }
}

/* b's batches into a's list (increasing), b's tasks into a's, checked:
 * no task twice, at most the maximum of each. */
static int _union(tsweep_plan *a, const char **from, const tsweep_plan *b,
                  const char *bdir)
{
    if (a->ntasks + b->ntasks > TSWEEP_MAX_TASKS)
        return TORUS_FAIL(TSWEEP_EPLAN,
                          "%s: %d tasks with the parts before it, more than %d",
                          bdir, a->ntasks + b->ntasks, TSWEEP_MAX_TASKS);
    for (int i = 0; i < b->ntasks; i++) {
        int j = _find(a, &b->task[i]);
        if (j >= 0)
            return TORUS_FAIL(TSWEEP_EPLAN,
                              "batch %d, %s, --lr %g is in the plans of both "
                              "%s and %s: a report takes each task from one",
                              b->task[i].batch,
                              b->recipe[b->task[i].recipe].name, b->task[i].lr,
                              from[j], bdir);
    }
    for (int i = 0; i < b->nbatches; i++) {
        int j = a->nbatches, k = 0;
        while (k < j && a->batch[k] != b->batch[i])
            k++;
        if (k < j)
            continue; /* a batch of an earlier part, other LRs */
        if (j == TSWEEP_MAX_BATCHES)
            return TORUS_FAIL(TSWEEP_EPLAN,
                              "%s: more than %d batches with the parts "
                              "before it",
                              bdir, TSWEEP_MAX_BATCHES);
        for (; j > 0 && a->batch[j - 1] > b->batch[i]; j--)
            a->batch[j] = a->batch[j - 1];
        a->batch[j] = b->batch[i];
        a->nbatches++;
    }
    for (int i = 0; i < b->ntasks; i++) {
        from[a->ntasks] = bdir;
        a->task[a->ntasks++] = b->task[i];
    }
    _sort_tasks(a, from);
    return 0;
}

int tsweep_merge(tsweep_plan *a, const char **from, tsweep_result **ra,
                 int *na, const tsweep_plan *b, const tsweep_result *rb,
                 int nb, const char *bdir)
{
    /* Every part so far has a's settings: from[0] names one of them. */
    const char *key = _differs(a, b);
    if (key)
        return TORUS_FAIL(TSWEEP_EPLAN,
                          "%s/plan and %s/plan differ in '%s': a report "
                          "takes parts of one sweep only",
                          from[0], bdir, key);
    static tsweep_plan old; /* a before the union, to renumber a's results */
    old = *a;
    tsweep_result *r = realloc(*ra, sizeof(*r) * ((size_t)*na + nb + 1));
    if (!r)
        return TORUS_FAIL(TSWEEP_EIO, "out of memory");
    *ra = r;
    int rc = _union(a, from, b, bdir);
    if (rc) {
        *a = old; /* a refused part changes nothing */
        return rc;
    }
    for (int i = 0; i < *na; i++) {
        r[i].task = _find(a, &old.task[r[i].task]);
        r[i].trial = a->task[r[i].task].trial;
    }
    for (int i = 0; i < nb; i++) {
        r[*na + i] = rb[i];
        r[*na + i].task = _find(a, &b->task[rb[i].task]);
        r[*na + i].trial = a->task[r[*na + i].task].trial;
    }
    *na += nb;
    return 0;
}
