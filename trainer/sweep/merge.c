/* merge.c: one report over a sweep run in parts. A sweep's plan cannot
 * change once it has results (the task ids are batch-major, so a batch
 * added below the largest would renumber finished tasks), so more batches
 * of the same problem go into a plan of their own. tsweep_merge() adds
 * such a part to another: every setting that decides what a task trains
 * must be the same, the batches must not overlap, and the results are
 * renumbered to the plan over the union of the batches. The launcher may
 * differ: it says how a task ran, not what it trained. */
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/sweep/tsweep.h"

/* The first setting (its plan key) in which a and b differ, or NULL. */
static const char *_differs(const tsweep_plan *a, const tsweep_plan *b)
{
    if (a->target != b->target)
        return "target";
    if (a->base_lr != b->base_lr)
        return "lr";
    if (a->ref_batch != b->ref_batch)
        return "ref-batch";
    if (a->trials != b->trials)
        return "trials";
    if (a->lr_spread != b->lr_spread)
        return "lr-spread";
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
            strcmp(a->recipe[i].args, b->recipe[i].args))
            return "recipe";
    return NULL;
}

/* The id in the union plan u of the task (batch, recipe, trial). */
static int _task_id(const tsweep_plan *u, const tsweep_task *t)
{
    for (int i = 0; i < u->ntasks; i++)
        if (u->task[i].batch == t->batch && u->task[i].recipe == t->recipe &&
            u->task[i].trial == t->trial)
            return i;
    return -1; /* not reached: u holds every batch of the parts */
}

/* a's batches plus b's into a (checked: disjoint, at most the maximum),
 * in increasing order with from[] (each batch's directory) kept in step,
 * and the grid expanded again. */
static int _union_batches(tsweep_plan *a, const char **from,
                          const tsweep_plan *b, const char *bdir)
{
    if (a->nbatches + b->nbatches > TSWEEP_MAX_BATCHES)
        return TORUS_FAIL(TSWEEP_EPLAN,
                          "%s: %d batches with the parts before it, more "
                          "than %d",
                          bdir, a->nbatches + b->nbatches, TSWEEP_MAX_BATCHES);
    for (int i = 0; i < b->nbatches; i++)
        for (int j = 0; j < a->nbatches; j++)
            if (b->batch[i] == a->batch[j])
                return TORUS_FAIL(TSWEEP_EPLAN,
                                  "batch %d is in the plans of both %s and "
                                  "%s: a report takes each batch from one",
                                  b->batch[i], from[j], bdir);
    for (int i = 0; i < b->nbatches; i++) {
        int j = a->nbatches++;
        for (; j > 0 && a->batch[j - 1] > b->batch[i]; j--) {
            a->batch[j] = a->batch[j - 1];
            from[j] = from[j - 1];
        }
        a->batch[j] = b->batch[i];
        from[j] = bdir;
    }
    return tsweep_plan_expand(a);
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
    int rc = _union_batches(a, from, b, bdir);
    if (rc)
        return rc;
    for (int i = 0; i < *na; i++)
        r[i].task = _task_id(a, &old.task[r[i].task]);
    for (int i = 0; i < nb; i++) {
        r[*na + i] = rb[i];
        r[*na + i].task = _task_id(a, &b->task[rb[i].task]);
    }
    *na += nb;
    return 0;
}
