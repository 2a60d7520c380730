/* train/ckpt_schema.c: the schema of a checkpoint, apart from its HDF5
 * I/O (checkpoint.c): the files' names in a directory (parsed, listed,
 * pruned, the run id, a run's temporaries), and the checks of what a file
 * records: its configuration against this run's, its counters against one
 * another, its position against the batch plan. The tensors' validation
 * is data/format/ckpt.c's (tdata_ckpt_tensor), shared with Python. No
 * HDF5 here: the I/O reads the values, these functions judge them. */
#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "data/format/tdata_ckpt.h"
#include "trainer/train/ttrain_checkpoint.h"
#include "trainer/train/ttrain_ckpt_schema.h"

/* ---- the files of a directory ---- */

/* Parses "ckpt-<step>-<run>.h5" exactly; 0 or -1. */
int ttrain_ckpt_parse_name(const char *name, long *step, char *run)
{
    const char *s = name;
    if (strncmp(s, "ckpt-", 5))
        return -1;
    s += 5;
    long v = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 18; s++, digits++)
        v = v * 10 + (*s - '0');
    if (!digits || *s++ != '-')
        return -1;
    for (int i = 0; i < TTRAIN_RUN_LEN - 1; i++, s++) {
        if (!isxdigit((unsigned char)*s) || isupper((unsigned char)*s))
            return -1;
        run[i] = *s;
    }
    run[TTRAIN_RUN_LEN - 1] = '\0';
    if (strcmp(s, ".h5"))
        return -1;
    *step = v;
    return 0;
}

/* The checkpoints in dir (only run's unless run is NULL), highest step
 * first; returns the count (0 when dir does not exist or on no memory)
 * and a malloc'd array in *out. Regular files only, unless any_kind: a
 * FIFO or device under a checkpoint's name is then listed, for the
 * loader to refuse by name. */
int ttrain_ckpt_list(const char *dir, const char *run, int any_kind,
                     ttrain_ckpt_entry **out)
{
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    ttrain_ckpt_entry *v = NULL, e;
    *out = NULL;
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));) {
        char path[4096];
        struct stat st;
        if (ttrain_ckpt_parse_name(de->d_name, &e.step, e.run) ||
            (run && strcmp(run, e.run)))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (stat(path, &st) ? lstat(path, &st) || !any_kind
                            : !S_ISREG(st.st_mode) && !any_kind)
            continue;
        e.mtime = st.st_mtim;
        if (n == cap) {
            ttrain_ckpt_entry *nv =
                realloc(v, sizeof(*v) * (size_t)(cap ? 2 * cap : 16));
            if (!nv)
                break;
            v = nv;
            cap = cap ? 2 * cap : 16;
        }
        v[n++] = e;
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* highest step first */
        for (int j = i; j > 0 && v[j].step > v[j - 1].step; j--) {
            e = v[j];
            v[j] = v[j - 1];
            v[j - 1] = e;
        }
    *out = v;
    return n;
}

/* The file's name: tdata_ckpt_name's, which every writer (torus-torch,
 * torus.checkpoint) shares. -1 with its message set. */
int ttrain_ckpt_name(char *out, size_t n, const char *dir, long step,
                     const char *run)
{
    return tdata_ckpt_name(out, n, dir, step, run) ? TTRAIN_CKPT_EBAD : 0;
}

/* After step was saved: keep the run's newest `keep` up to step (step
 * itself is one of them and is never removed); remove the run's files of
 * later steps, which a resume fell back past because they did not load. */
void ttrain_ckpt_prune(const char *dir, const char *run, long step, int keep)
{
    ttrain_ckpt_entry *v;
    int n = ttrain_ckpt_list(dir, run, 0, &v), kept = 1;
    for (int i = 0; i < n; i++) {
        char path[4096];
        if (v[i].step == step)
            continue;
        if (v[i].step < step && kept < keep) {
            kept++;
            continue;
        }
        if (ttrain_ckpt_name(path, sizeof(path), dir, v[i].step, run))
            continue;
        if (v[i].step > step)
            torus_note("removing %s: a later step of this run than the one "
                       "it resumed from (it did not load)",
                       path);
        unlink(path);
    }
    free(v);
}

void ttrain_ckpt_new_run(char run[TTRAIN_RUN_LEN])
{
    uint32_t r;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = (uint32_t)(ts.tv_nsec ^ (ts.tv_sec << 7) ^ ((long)getpid() << 16));
    }
    snprintf(run, TTRAIN_RUN_LEN, "%08" PRIx32, r);
}

int ttrain_ckpt_clean(const char *dir, const char *run)
{
    DIR *d = opendir(dir);
    char mark[32], path[4096];
    int n = 0;
    if (!d)
        return 0;
    snprintf(mark, sizeof(mark), "-%s.h5.", run);
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, ".ckpt-", 6) || !strstr(e->d_name, mark) ||
            len < 4 || strcmp(e->d_name + len - 4, ".tmp"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        n += unlink(path) == 0;
    }
    closedir(d);
    return n;
}

/* ---- the configuration check ---- */

/* Appends "; " (after the first) and a formatted part to buf. */
static void _add(char *buf, size_t n, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len && len + 2 < n) {
        memcpy(buf + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    if (len < n)
        vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}

/* The differences that refuse a resume (not an evaluation). */
static void _train_diffs(const ttrain_ckpt_meta *got,
                         const ttrain_ckpt_meta *want, char *d, size_t n)
{
    if (strcmp(got->batch, want->batch))
        _add(d, n, "its global batch schedule is %s, this run's %s", got->batch,
             want->batch);
    if (strcmp(got->data_id, want->data_id))
        _add(d, n, "it was trained on %s (%s), this run on %s (%s)", got->data,
             got->data_id, want->data, want->data_id);
    if (strcmp(got->wire, want->wire) && got->world > 1 && want->world > 1)
        _add(d, n,
             "its gradients were summed over a %s wire, this run's "
             "over %s",
             got->wire, want->wire);
    if (*d && got->world != want->world)
        _add(d, n,
             "and it was written by %d ranks, this run has %d: a change of "
             "ranks is allowed only with the same global batch schedule, "
             "data and wire",
             got->world, want->world);
}

int ttrain_ckpt_check(const ttrain_ckpt_meta *got, const ttrain_ckpt_meta *want,
                      int eval_only, int has_bn, char *note, size_t notelen)
{
    char d[2048] = "";
    note[0] = '\0';
    if (strcmp(got->model, want->model))
        _add(d, sizeof(d), "its model is %s, this run's %s", got->model,
             want->model);
    if (!eval_only)
        _train_diffs(got, want, d, sizeof(d));
    if (*d)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "written by another configuration: %s", d);
    if (eval_only && strcmp(got->data_id, want->data_id))
        snprintf(note, notelen,
                 "the model was trained on %s (%s); evaluating on the test "
                 "split of %s",
                 got->data, got->data_id, want->data);
    else if (!eval_only && got->world != want->world)
        snprintf(note, notelen,
                 "resuming on %d ranks a checkpoint written by %d: the global "
                 "batch schedule is the same, so every step trains on the "
                 "same global batch and the summed gradient is the same up "
                 "to summation order and wire rounding%s",
                 want->world, got->world,
                 has_bn ? "; the BN layers now normalise over each rank's "
                          "share of the global batch and every rank starts "
                          "from the ranks' average BN running statistics "
                          "(the per-rank ones saved at the stop are for the "
                          "old ranks), and dropout masks differ"
                        : "");
    /* Files from before loss scaling were trained without it. */
    const char *was = got->loss_scale[0] ? got->loss_scale : "off";
    if (!eval_only && strcmp(was, want->loss_scale)) {
        size_t len = strlen(note);
        snprintf(note + len, notelen - len,
                 "%sthe checkpoint was trained with loss scale %s, this run "
                 "uses %s: its scale starts afresh",
                 len ? "; " : "", was, want->loss_scale);
    }
    return 0;
}

/* The counters against one another: optimizer steps and skipped steps
 * within the global steps, the previous LR finite, >= 0, and positive
 * once the optimizer has stepped more than once (a warmup from 0 gives a
 * first step at LR 0; the plan's LR may have changed since, so no more is
 * asked of it). */
int ttrain_ckpt_check_counts(const ttrain_progress *p, long opt_steps,
                             double prev_lr)
{
    long g = p->global_step;
    if (opt_steps > g)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "it records %ld optimizer steps in %ld global "
                          "steps",
                          opt_steps, g);
    if (p->ls.scale > 0 && (p->ls.overflows > g - opt_steps || p->ls.clean > g))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "its %ld skipped steps (%ld clean in a row) and %ld "
                          "optimizer steps do not fit in %ld global steps",
                          p->ls.overflows, p->ls.clean, opt_steps, g);
    if (!isfinite(prev_lr) || prev_lr < 0 || (opt_steps > 1 && prev_lr == 0))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "its previous learning rate %g is not a finite, "
                          "positive one after %ld optimizer steps",
                          prev_lr, opt_steps);
    if (opt_steps == 0 && prev_lr != 0)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "it records a previous learning rate of %g before "
                          "any optimizer step",
                          prev_lr);
    return 0;
}

/* The steps and samples of the epochs before epoch under plan s, stage by
 * stage (a forged epoch costs no loop); -1 on overflow. */
static int _plan_before(const topt_schedule *s, int epoch, int64_t *steps,
                        int64_t *samples)
{
    *steps = *samples = 0;
    for (int i = 0; i < s->nstages && s->stage[i].epoch < epoch; i++) {
        int e1 = i + 1 < s->nstages ? s->stage[i + 1].epoch : epoch;
        int64_t n = topt_steps_in_epoch(s, s->stage[i].epoch), k, kb;
        if (__builtin_mul_overflow(
                n, (int64_t)((e1 < epoch ? e1 : epoch) - s->stage[i].epoch),
                &k) ||
            __builtin_mul_overflow(k, (int64_t)s->stage[i].global_batch, &kb) ||
            __builtin_add_overflow(*steps, k, steps) ||
            __builtin_add_overflow(*samples, kb, samples))
            return -1;
    }
    return 0;
}

/* The position against the plan: global step = the steps of the epochs
 * before plus the step (within its epoch), and the samples served over all
 * ranks = the global batches of those steps. */
int ttrain_ckpt_check_plan(const ttrain_progress *p, int64_t samples,
                           const topt_schedule *s)
{
    int64_t steps, before, at;
    long n = topt_steps_in_epoch(s, p->epoch);
    if (_plan_before(s, p->epoch, &steps, &before))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "its epoch %d is beyond any plan",
                          p->epoch);
    if (p->step >= n || steps + p->step != p->global_step)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "its global step %ld disagrees with its position, "
                          "epoch %d step %ld: the plan has %" PRId64
                          " steps before that epoch and %ld in it",
                          p->global_step, p->epoch, p->step, steps, n);
    at = before + (int64_t)p->step * topt_batch_at(s, p->epoch);
    if (samples != at)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "it records %" PRId64 " samples served, but the "
                          "batch schedule serves %" PRId64
                          " in the steps before epoch %d step %ld",
                          samples, at, p->epoch, p->step);
    return 0;
}
