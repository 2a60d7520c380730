/* test_sweep.c: the batch sweep's library without a cluster:
 *   - regime detection on synthetic steps-to-target curves: perfect
 *     scaling (no bend), a bending curve S(B) = Smin (1 + Bnoise / B)
 *     (McCandlish et al.), whose bends are known in closed form, a flat
 *     one, curves with batches that missed the target, and a noisy one
 *     whose small gain at one doubling does not end it;
 *   - the plan file round trip, and the LR grid around the linear rule;
 *   - the budget floor in steps (--min-steps) per batch;
 *   - --diverge-loss: kept by the plan file only when set, hostile values
 *     refused naming the option and the plan's line;
 *   - the results file: a good line, then hostile lines (bad JSON, unknown
 *     or missing fields, a task of another plan, a duplicate, a cut line,
 *     a "diverged" other than 1 or on a task that reached the target),
 *     each refused with an error naming the file and line; a diverged
 *     task's line read back as written;
 *   - the summary line of a recipe names why it leaves perfect scaling;
 *   - a partial sweep: a batch with trials still to run is no miss yet;
 *   - a lower target read back from a task's evaluations (report --target),
 *     its time counted over the task's attempts;
 *   - a sweep run in parts merged into one report: results renumbered to
 *     the union of the batches, parts that differ refused. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "trainer/sweep/tsweep.h"

/* 32, 64, ... 32 << (n - 1) */
static void _batches(int *b, int n)
{
    for (int i = 0; i < n; i++)
        b[i] = 32 << i;
}

START_TEST(test_perfect)
{
    int b[9];
    double s[9];
    _batches(b, 9);
    for (int i = 0; i < 9; i++)
        s[i] = 1048576.0 / b[i];
    tsweep_regimes g;
    tsweep_regimes_find(b, s, 9, TSWEEP_PERFECT_TOL, TSWEEP_GAIN_MIN, &g);
    ck_assert_int_eq(g.ref, 0);
    ck_assert_int_eq(g.leave, -1);
    ck_assert_int_eq(g.last_perfect, 8);
    ck_assert_int_eq(g.stop, -1);
}
END_TEST

/* S(B) = 100 (1 + 1024 / B) over B = 32 .. 32768: the ratio to the
 * perfect line through B = 32 is (B + 1024) / 1056, above 1.25 from
 * B = 512 on (256: 1.21); the gain exponent of the doubling from B is
 * log2((B + 1024) / (B + 512)): 0.152 from 4096, 0.082 from 8192, so the
 * last batch that gains is 8192. */
START_TEST(test_bending)
{
    int b[11];
    double s[11];
    _batches(b, 11);
    for (int i = 0; i < 11; i++)
        s[i] = 100.0 * (1 + 1024.0 / b[i]);
    tsweep_regimes g;
    tsweep_regimes_find(b, s, 11, TSWEEP_PERFECT_TOL, TSWEEP_GAIN_MIN, &g);
    ck_assert_int_eq(b[g.leave], 512);
    ck_assert_int_eq(b[g.last_perfect], 256);
    ck_assert_int_eq(b[g.stop], 8192);
}
END_TEST

START_TEST(test_flat)
{
    int b[6];
    double s[6] = {500, 500, 500, 500, 500, 500};
    _batches(b, 6);
    tsweep_regimes g;
    tsweep_regimes_find(b, s, 6, TSWEEP_PERFECT_TOL, TSWEEP_GAIN_MIN, &g);
    ck_assert_int_eq(g.leave, 1);
    ck_assert_int_eq(g.last_perfect, 0);
    ck_assert_int_eq(g.stop, 0);
}
END_TEST

/* A noisy curve (the sweep's SGD at 86% on cifar-resnet-8: a crossing
 * caught late at 512): 512 gains almost nothing over 256, but 1024 and
 * 2048 take far fewer steps, so the curve stops gaining after 2048 (4096
 * is flat, 8192 missed), not after 256. A miss between two reached
 * points does not end the curve either. */
START_TEST(test_noisy)
{
    int b[9];
    double s[9] = {7168, 3072, 1872, 1024, 960, 336, 240, 238, NAN};
    _batches(b, 9);
    tsweep_regimes g;
    tsweep_regimes_find(b, s, 9, TSWEEP_PERFECT_TOL, TSWEEP_GAIN_MIN, &g);
    ck_assert_int_eq(b[g.leave], 512);
    ck_assert_int_eq(b[g.stop], 2048);
    double gap[3] = {800, 0, 200};
    tsweep_regimes_find(b, gap, 3, TSWEEP_PERFECT_TOL, TSWEEP_GAIN_MIN, &g);
    ck_assert_int_eq(g.leave, 1);
    ck_assert_int_eq(g.stop, -1);
}
END_TEST

/* The smallest batch missed the target (0), and the largest too (NaN):
 * the reference is the first that reached it, and a miss is no gain. */
START_TEST(test_missed)
{
    int b[5];
    double s[5] = {0, 800, 400, 200, NAN};
    _batches(b, 5);
    tsweep_regimes g;
    tsweep_regimes_find(b, s, 5, TSWEEP_PERFECT_TOL, TSWEEP_GAIN_MIN, &g);
    ck_assert_int_eq(g.ref, 1);
    ck_assert_int_eq(g.leave, 4);
    ck_assert_int_eq(g.last_perfect, 3);
    ck_assert_int_eq(g.stop, 3);
    double none[3] = {0, -1, INFINITY};
    tsweep_regimes_find(b, none, 3, TSWEEP_PERFECT_TOL, TSWEEP_GAIN_MIN, &g);
    ck_assert_int_eq(g.ref, -1);
    ck_assert_int_eq(g.stop, -1);
}
END_TEST

static tsweep_plan _p, _q;
static char _dir[] = "/tmp/test_sweep.XXXXXX";

static void _plan(tsweep_plan *p)
{
    tsweep_plan_defaults(p);
    p->target = 80;
    p->trials = 3;
    ck_assert_int_eq(tsweep_parse_batches(p, "32:128"), 0);
    ck_assert_int_eq(tsweep_add_recipe(p, "sgd=--warmup-epochs 0"), 0);
    ck_assert_int_eq(
        tsweep_add_recipe(p, "lars=--lars --lr 2 --warmup-epochs 2"), 0);
    snprintf(p->train, sizeof(p->train), "--data /d --model tiny-cnn");
    ck_assert_int_eq(tsweep_plan_expand(p), 0);
}

START_TEST(test_plan_roundtrip)
{
    char path[64];
    _plan(&_p);
    ck_assert_int_eq(_p.ntasks, 3 * 2 * 3);
    /* batch 64 (index 1), lars (1), trial 0: half its own --lr 2 */
    const tsweep_task *t = &_p.task[1 * 6 + 1 * 3 + 0];
    ck_assert_int_eq(t->batch, 64);
    ck_assert_int_eq(t->recipe, 1);
    ck_assert(fabs(t->lr - 1.0) < 1e-15);
    ck_assert(fabs(_p.task[2].lr - 0.2) < 1e-15);
    ck_assert_int_eq(tsweep_eval_every(&_p, 64), 156); /* 10000 / 64 */
    snprintf(path, sizeof(path), "%s/plan", _dir);
    ck_assert_int_eq(tsweep_plan_write(&_p, path), 0);
    ck_assert_int_eq(tsweep_plan_read(&_q, path), 0);
    ck_assert_int_eq(_q.ntasks, _p.ntasks);
    ck_assert_mem_eq(_q.task, _p.task, sizeof(_p.task[0]) * 18);
    ck_assert_str_eq(_q.recipe[1].args, "--lars --lr 2 --warmup-epochs 2");
    ck_assert(fabs(_q.recipe[1].lr - 2) < 1e-15 && _q.recipe[0].lr == 0);
    ck_assert_int_eq(tsweep_parse_batches(&_q, "64,32"), TSWEEP_EPLAN);
    ck_assert_int_eq(tsweep_add_recipe(&_q, "a b=--x"), TSWEEP_EPLAN);
    ck_assert_int_eq(tsweep_add_recipe(&_q, "q=--data 'x y'"), TSWEEP_EPLAN);
    ck_assert_int_eq(tsweep_add_recipe(&_q, "q=--lr -1"), TSWEEP_EPLAN);
}
END_TEST

/* Writes text as the whole of path. */
static void _write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* The budget floor: --epochs at every batch, more where they hold fewer
 * than --min-steps steps (an epoch: dataset_size / batch steps, at least
 * 1); it survives the plan file; one without the other is refused. */
START_TEST(test_min_steps)
{
    char path[64];
    _plan(&_p);
    _p.epochs = 24;
    ck_assert_int_eq(tsweep_task_epochs(&_p, 8192), 24); /* no floor */
    _p.min_steps = 336;
    _p.dataset_size = 60000;
    ck_assert_int_eq(tsweep_plan_expand(&_p), 0);
    ck_assert_int_eq(tsweep_task_epochs(&_p, 128), 24);  /* 11232 steps */
    ck_assert_int_eq(tsweep_task_epochs(&_p, 4096), 24); /* 14 x 24 = 336 */
    ck_assert_int_eq(tsweep_task_epochs(&_p, 8192), 48); /* 7 per epoch */
    _p.dataset_size = 1000; /* fewer images than a batch: 1 step an epoch */
    ck_assert_int_eq(tsweep_task_epochs(&_p, 8192), 336);
    _p.dataset_size = 60000;
    snprintf(path, sizeof(path), "%s/plan-floor", _dir);
    ck_assert_int_eq(tsweep_plan_write(&_p, path), 0);
    ck_assert_int_eq(tsweep_plan_read(&_q, path), 0);
    ck_assert(_q.min_steps == 336 && _q.dataset_size == 60000);
    ck_assert_int_eq(tsweep_task_epochs(&_q, 8192), 48);
    _p.dataset_size = 0;
    ck_assert_int_eq(tsweep_plan_expand(&_p), TSWEEP_EPLAN);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "--dataset-size"));
}
END_TEST

/* --diverge-loss: in the plan file only when set (an old plan reads and
 * compares as before), read back; bad values refused naming the option,
 * on the command line's path (expand) and in the file (the line where
 * the settings are checked: the first task's, or the bad one's own). */
START_TEST(test_plan_diverge_loss)
{
    char path[64], text[4096];
    _plan(&_p);
    snprintf(path, sizeof(path), "%s/plan-dl", _dir);
    ck_assert_int_eq(tsweep_plan_write(&_p, path), 0);
    ck_assert_int_eq(tsweep_plan_read(&_q, path), 0);
    ck_assert(_q.diverge_loss == 0);
    FILE *f = fopen(path, "r");
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    ck_assert_ptr_null(strstr(text, "diverge"));
    _p.diverge_loss = 23;
    ck_assert_int_eq(tsweep_plan_write(&_p, path), 0);
    ck_assert_int_eq(tsweep_plan_read(&_q, path), 0);
    ck_assert(_q.diverge_loss == 23);
    const double bad[] = {-1, 1e16, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        _p.diverge_loss = bad[i];
        ck_assert_int_eq(tsweep_plan_expand(&_p), TSWEEP_EPLAN);
        ck_assert_ptr_nonnull(strstr(torus_error_msg(), "--diverge-loss: "));
    }
    const char *line[] = {"diverge-loss -5\n", "diverge-loss nan\n",
                          "diverge-loss 1e999\n", "diverge-loss\n",
                          "diverge-loss 2 3\n"};
    const char *want[] = {"plan:6: --diverge-loss: -5 is not in",
                          "plan:5: 'diverge-loss'", "plan:5: 'diverge-loss'",
                          "plan:5: 'diverge-loss'", "plan:5: 'diverge-loss'"};
    snprintf(path, sizeof(path), "%s/plan", _dir);
    for (int i = 0; i < 5; i++) {
        snprintf(text, sizeof(text),
                 "target 80\nbatches 32\nrecipe s=\ntrials 1\n%s"
                 "task 0 32 s 0 0.10000000000000001\n",
                 line[i]);
        _write(path, text);
        ck_assert_int_eq(tsweep_plan_read(&_q, path), TSWEEP_EPARSE);
        ck_assert_msg(strstr(torus_error_msg(), want[i]), "%s: got '%s'",
                      line[i], torus_error_msg());
    }
}
END_TEST

/* A plan file edited by hand: its line is named. */
START_TEST(test_plan_hostile)
{
    char path[64];
    _plan(&_p);
    snprintf(path, sizeof(path), "%s/plan", _dir);
    _write(path, "target 80\nbatches 32\nrecipe s=\ntrials 1\nbogus 1\n");
    ck_assert_int_eq(tsweep_plan_read(&_q, path), TSWEEP_EPARSE);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "plan:5: 'bogus'"));
    _write(path, "target 80\nbatches 32\nrecipe s=\ntrials 1\n"
                 "task 0 64 s 0 0.1\n");
    ck_assert_int_eq(tsweep_plan_read(&_q, path), TSWEEP_EPARSE);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "plan:5: task line"));
    _write(path, "target 80\nbatches 32\nrecipe s=\ntrials 1\n");
    ck_assert_int_eq(tsweep_plan_read(&_q, path), TSWEEP_EPARSE);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "0 of 0 tasks"));
}
END_TEST

/* One results line for a task of _p (18 tasks). */
static const char *_good =
    "{\"task\":4,\"batch\":32,\"recipe\":\"lars\",\"trial\":1,\"lr\":2,"
    "\"reached\":1,\"steps\":120,\"time\":3.5,\"top1\":80.2}\n";

/* Reads text as a results file: the return code, the error in msg. */
static int _read(const char *text)
{
    char path[64];
    tsweep_result *r = NULL;
    int n;
    snprintf(path, sizeof(path), "%s/results.jsonl", _dir);
    _write(path, text);
    int rc = tsweep_results_read(path, &_p, &r, &n);
    if (!rc) {
        ck_assert_int_eq(n, 1);
        ck_assert_int_eq(r[0].steps, 120);
        ck_assert_int_eq(r[0].line, 1);
        ck_assert_str_eq(r[0].recipe, "lars");
    }
    free(r);
    return rc;
}

/* text, then the line and words its error must name (the JSON is
 * json-c's; these are the project's rules on top of it) */
static const char *const _bad[][2] = {
    {"not json\n", "results.jsonl:2: not JSON: "},
    {"[4]\n", "results.jsonl:2: not a JSON object"},
    {"{\"task\":5,\"batch\":32}\n",
     "results.jsonl:2: field \"recipe\" is missing"},
    {"{\"task\":5,\"oops\":1}\n", "results.jsonl:2: unknown field \"oops\""},
    {"{\"task\":5,\"task\":5}\n", "results.jsonl:2: a key given twice"},
    {"{\"recipe\":\"a:b\",\"x\":{\"k\":1,\"k\":2}}\n",
     "results.jsonl:2: a key given twice"},
    {"{\"task\":-1}\n", "results.jsonl:2: field \"task\": -1 is not in"},
    {"{\"task\":1.5}\n", "results.jsonl:2: field \"task\": double, not an "
                         "integer"},
    {"{\"task\":\"4\"}\n", "results.jsonl:2: field \"task\": string, not"},
    {"{\"task\":99999999999999999999999}\n",
     "results.jsonl:2: field \"task\": "},
    {"{\"task\":4,\"batch\":32,\"recipe\":\"lars\",\"trial\":1,\"lr\":1e999,"
     "\"reached\":1,\"steps\":9,\"time\":1,\"top1\":80}\n",
     "results.jsonl:2: field \"lr\": 1e999 is not a number in"},
    {"{\"task\":4,\"batch\":32,\"recipe\":\"lars\",\"trial\":1,\"lr\":NaN,"
     "\"reached\":1,\"steps\":9,\"time\":1,\"top1\":80}\n",
     "results.jsonl:2: field \"lr\": NaN is not a number in"},
    {"{\"task\":4,\"batch\":32,\"recipe\":\"lars\",\"trial\":1,\"lr\":0,"
     "\"reached\":1,\"steps\":9,\"time\":1,\"top1\":80}\n",
     "results.jsonl:2: field \"lr\": must be above 0"},
    {"{\"recipe\":\"unterminated}\n", "results.jsonl:2: the JSON ends early"},
    {"{\"recipe\":\"la\xffrs\"}\n", "results.jsonl:2: not JSON: invalid utf-8"},
    {"{\"recipe\":\"la\\u0000rs\"}\n", "results.jsonl:2: \\u0000 in a string"},
    {"{\"x\":[[[[[[[[[[1]]]]]]]]]]}\n",
     "results.jsonl:2: not JSON: nesting too deep"},
    {"{\"task\":4} {}\n", "results.jsonl:2: not JSON: "},
    {"\n", "results.jsonl:2: the JSON ends early"},
    {"{\"task\":4,\"batch\":32,\"recipe\":\"lars\",\"trial\":1,\"lr\":2,"
     "\"reached\":1,\"steps\":9,\"time\":1,\"top1\":80}\n",
     "results.jsonl:2: task 4 again (first at line 1)"},
    {"{\"task\":5,\"batch\":64,\"recipe\":\"lars\",\"trial\":2,\"lr\":0.2,"
     "\"reached\":1,\"steps\":9,\"time\":1,\"top1\":80}\n",
     "results.jsonl:2: task 5 is batch 32 lars trial 2 lr 4 in the plan"},
    {"{\"task\":99,\"batch\":32,\"recipe\":\"lars\",\"trial\":2,\"lr\":0.2,"
     "\"reached\":1,\"steps\":9,\"time\":1,\"top1\":80}\n",
     "results.jsonl:2: task 99 is not in the plan"},
    {"{\"task\":5,\"batch\":32", "results.jsonl:2: the last line has no "
                                 "newline (a cut write?)"},
    {"{\"task\":5,\"batch\":32,\"recipe\":\"lars\",\"trial\":2,\"lr\":4,"
     "\"reached\":0,\"steps\":9,\"time\":1,\"top1\":10,\"diverged\":0}\n",
     "results.jsonl:2: field \"diverged\": 0 is not in"},
    {"{\"task\":5,\"batch\":32,\"recipe\":\"lars\",\"trial\":2,\"lr\":4,"
     "\"reached\":0,\"steps\":9,\"time\":1,\"top1\":10,\"diverged\":true}\n",
     "results.jsonl:2: field \"diverged\": boolean, not"},
    {"{\"task\":5,\"batch\":32,\"recipe\":\"lars\",\"trial\":2,\"lr\":4,"
     "\"reached\":1,\"steps\":9,\"time\":1,\"top1\":10,\"diverged\":1}\n",
     "results.jsonl:2: a task cannot both reach the target and diverge"},
};

START_TEST(test_results_hostile)
{
    char text[8192];
    _plan(&_p);
    ck_assert_int_eq(_read(_good), 0);
    for (size_t i = 0; i < sizeof(_bad) / sizeof(_bad[0]); i++) {
        snprintf(text, sizeof(text), "%s%s", _good, _bad[i][0]);
        ck_assert_int_eq(_read(text), TSWEEP_EPARSE);
        ck_assert_msg(strstr(torus_error_msg(), _bad[i][1]),
                      "case %zu: got '%s', want '%s'", i, torus_error_msg(),
                      _bad[i][1]);
    }
    memset(text, 'x', 5000);
    memcpy(text + 5000, "\n", 2);
    ck_assert_int_eq(_read(text), TSWEEP_EPARSE);
    ck_assert_ptr_nonnull(
        strstr(torus_error_msg(), "results.jsonl:1: line longer than 4096"));
    /* A NUL byte inside a line (fgets would have cut the line there). */
    char path[64];
    tsweep_result *r = NULL;
    int n;
    snprintf(path, sizeof(path), "%s/results.jsonl", _dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(_good, f);
    fwrite("{\"task\":4}\0{}\n", 1, 14, f);
    fclose(f);
    ck_assert_int_eq(tsweep_results_read(path, &_p, &r, &n), TSWEEP_EPARSE);
    free(r);
    ck_assert_ptr_nonnull(
        strstr(torus_error_msg(), "results.jsonl:2: a NUL byte at byte 11"));
}
END_TEST

/* Appended lines read back as they were written. */
START_TEST(test_results_append)
{
    char path[64];
    tsweep_result w = {.task = 17,
                       .batch = 128,
                       .trial = 2,
                       .lr = 4,
                       .reached = 0,
                       .steps = 300,
                       .time = 9.25,
                       .top1 = 71.5},
                  *r = NULL;
    int n;
    _plan(&_p);
    snprintf(w.recipe, sizeof(w.recipe), "lars");
    snprintf(path, sizeof(path), "%s/results.jsonl", _dir);
    unlink(path);
    ck_assert_int_eq(tsweep_results_append(path, &w), 0);
    ck_assert_int_eq(tsweep_results_read(path, &_p, &r, &n), 0);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(r[0].task, 17);
    ck_assert_int_eq(r[0].reached, 0);
    ck_assert_int_eq(r[0].steps, 300);
    ck_assert(fabs(r[0].top1 - 71.5) < 1e-9);
    ck_assert_ptr_nonnull(tsweep_results_find(r, n, 17));
    ck_assert_ptr_null(tsweep_results_find(r, n, 3));
    ck_assert_int_eq(r[0].diverged, 0);
    free(r);
    /* A diverged task: the field on its line alone, read back. */
    w.task = 16, w.trial = 1, w.lr = 2, w.diverged = 1;
    ck_assert_int_eq(tsweep_results_append(path, &w), 0);
    ck_assert_int_eq(tsweep_results_read(path, &_p, &r, &n), 0);
    ck_assert_int_eq(n, 2);
    ck_assert(r[0].diverged == 0 && r[1].diverged == 1 && r[1].task == 16);
    free(r);
    char text[1024];
    FILE *f = fopen(path, "r");
    size_t got = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[got] = '\0';
    ck_assert_int_eq(strstr(text, "\"diverged\":1}\n") - text,
                     (long)got - 14);
    ck_assert_ptr_null(strstr(text, "\"diverged\":0"));
}
END_TEST

/* Result of task id of _p: reached in `steps` steps, or (0) a miss. */
static tsweep_result _res(int id, long steps)
{
    const tsweep_task *t = &_p.task[id];
    return (tsweep_result){.task = id,
                           .batch = t->batch,
                           .trial = t->trial,
                           .lr = t->lr,
                           .reached = steps > 0,
                           .steps = steps ? steps : 99,
                           .top1 = steps ? 80 : 70};
}

/* The table and summary lines of results r[0..n) of _p, into out. */
static void _table(const tsweep_result *r, int n, tsweep_summary *sum,
                   char *out, size_t size)
{
    tsweep_summarize(&_p, r, n, TSWEEP_PERFECT_TOL, TSWEEP_GAIN_MIN, sum);
    FILE *f = fmemopen(out, size - 1, "w");
    ck_assert_ptr_nonnull(f);
    tsweep_print_table(&_p, sum, f);
    fclose(f);
}

/* A child process holding an fcntl write lock on path until it is
 * killed; returns its pid once the lock is held. */
static pid_t _lock_in_child(const char *path)
{
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* gone with the test, also when an assertion ends it early */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(path, O_RDWR | O_CREAT, 0644);
        struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fd < 0 || fcntl(fd, F_SETLKW, &lk))
            _exit(1);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c;
    close(ready[1]);
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    close(ready[0]);
    return pid;
}

static void _unlock_child(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* The sweep's locks are fcntl record locks (flock() fails on Lustre
 * mounted noflock): a task whose lock file another process holds that
 * way is left alone, and an append to the results waits for the
 * holder. */
START_TEST(test_fcntl_locks)
{
    char path[128];
    _plan(&_p);
    snprintf(path, sizeof(path), "%s/work", _dir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/work/task-1.lock", _dir);
    pid_t pid = _lock_in_child(path);
    FILE *out = tmpfile();
    ck_assert_int_eq(tsweep_run_task(&_p, _dir, 1, "/bin/false", out),
                     TSWEEP_EIO);
    ck_assert_msg(strstr(torus_error_msg(), "task 1 is running elsewhere"),
                  "%s", torus_error_msg());
    fclose(out);
    _unlock_child(pid);

    tsweep_result w = {.task = 2, .batch = 32, .trial = 2, .lr = 1};
    snprintf(w.recipe, sizeof(w.recipe), "sgd");
    snprintf(path, sizeof(path), "%s/results.jsonl", _dir);
    unlink(path);
    pid = _lock_in_child(path);
    pid_t killer = fork();
    ck_assert_int_ge(killer, 0);
    if (killer == 0) { /* lets the holder go after 0.3 s */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        _exit(0);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(tsweep_results_append(path, &w), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    waitpid(killer, NULL, 0);
    waitpid(pid, NULL, 0);
    double waited = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg(waited > 0.2, "the append did not wait for the lock (%.3f s)",
                  waited);
}
END_TEST

/* The summary lines name why a recipe leaves perfect scaling: a batch
 * over 1.25x the perfect steps, or one that missed the target. */
START_TEST(test_summary_lines)
{
    /* trial 0 of each (batch, recipe): sgd 1000, 500, 400 steps (400 is
     * 1.6x the perfect 250); lars 1000, 500, then not reached at 128 */
    static const long steps[2][3] = {{1000, 500, 400}, {1000, 500, 0}};
    tsweep_result r[8];
    tsweep_summary sum;
    char out[4096] = "";
    _plan(&_p);
    for (int b = 0; b < 3; b++)
        for (int c = 0; c < 2; c++)
            r[b * 2 + c] = _res(b * 6 + c * 3, steps[c][b]);
    /* lars's other two trials at 128 miss too (one alone is no miss yet) */
    r[6] = _res(16, 0);
    r[7] = _res(17, 0);
    _table(r, 8, &sum, out, sizeof(out));
    ck_assert_ptr_nonnull(strstr(out,
                                 "sgd: perfect scaling from batch 32 up to "
                                 "batch 64 (batch 128 takes more than 1.25x"));
    ck_assert_ptr_nonnull(strstr(out,
                                 "lars: perfect scaling from batch 32 up to "
                                 "batch 64 (batch 128 missed the target"));
}
END_TEST

/* A partial sweep (the middle LR trials first): a batch whose finished
 * trials all missed while others are still to run is pending, no miss,
 * and the summary line names it; once all its trials missed it is one. */
START_TEST(test_partial)
{
    /* recipe sgd, trial 1: 1000 steps at 32, a miss at 64, 300 at 128 */
    tsweep_result r[5];
    tsweep_summary sum;
    char out[4096] = "";
    _plan(&_p);
    r[0] = _res(1, 1000);
    r[1] = _res(7, 0);
    r[2] = _res(13, 300);
    _table(r, 3, &sum, out, sizeof(out));
    ck_assert_ptr_nonnull(strstr(out, "sgd               64   1/3   "
                                      "          -   pending"));
    ck_assert_ptr_nonnull(strstr(out, "sgd: perfect scaling from batch 32 up "
                                      "to batch 128 (the largest batch"));
    ck_assert_ptr_nonnull(strstr(out, "still gaining at batch 128; pending: "
                                      "batch 64\n"));
    ck_assert_ptr_nonnull(strstr(out, "lars: no batch reached the target; "
                                      "pending: batch 32, 64, 128\n"));
    /* trials 0 and 2 at 64 miss too: now batch 64 missed */
    r[3] = _res(6, 0);
    r[4] = _res(8, 0);
    _table(r, 5, &sum, out, sizeof(out));
    ck_assert_ptr_nonnull(strstr(out, "sgd               64   3/3   "
                                      "          -   not hit"));
    /* 128 still beats 32, so the miss between them ends no curve */
    ck_assert_ptr_nonnull(strstr(out, "still gaining at batch 128\n"));
    ck_assert_int_eq(sum.reg[0].leave, 1);
    ck_assert_int_eq(sum.reg[0].stop, -1);
}
END_TEST

/* report --target: a lower target is read from the task's evaluations;
 * step lines and the target record do not count; a bad line, a target
 * above the plan's and a missing metrics file are refused, named. */
START_TEST(test_task_at)
{
    char path[96];
    tsweep_result r = {.task = 5, .reached = 1, .steps = 40, .time = 9};
    _plan(&_p); /* target 80 */
    snprintf(path, sizeof(path), "%s/work", _dir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/work/task-5.jsonl", _dir);
    _write(path, "{\"epoch\":0,\"step\":8,\"global_step\":8,\"loss\":2}\n"
                 "{\"epoch\":0,\"global_step\":8,\"top1\":41.0,\"top5\":90,"
                 "\"time\":2.5}\n"
                 "{\"epoch\":0,\"global_step\":16,\"top1\":null,\"top5\":90,"
                 "\"unknown\":[1]}\n"
                 "{\"epoch\":1,\"global_step\":32,\"top1\":66.5,\"top5\":99,"
                 "\"time\":7.25}\n"
                 "{\"epoch\":1,\"global_step\":40,\"top1\":81.0,\"top5\":99,"
                 "\"time\":9}\n"
                 "{\"target_top1\":80,\"global_step\":40,\"top1\":81.0}\n");
    ck_assert_int_eq(tsweep_task_at(&_p, _dir, 65, &r), 0);
    ck_assert_int_eq(r.reached, 1);
    ck_assert_int_eq(r.steps, 32);
    ck_assert(fabs(r.top1 - 66.5) < 1e-9 && fabs(r.time - 7.25) < 1e-9);
    ck_assert_int_eq(tsweep_task_at(&_p, _dir, 80, &r), 0);
    ck_assert_int_eq(r.steps, 40);
    ck_assert_int_eq(tsweep_task_at(&_p, _dir, 30, &r), 0);
    ck_assert_int_eq(r.steps, 8);
    /* a second attempt (resumed after 10 s): its evaluations' times
     * restart at 0, the sweep's line before it says what came before */
    _write(path, "{\"sweep_time_before\":0.000}\n"
                 "{\"epoch\":0,\"global_step\":8,\"top1\":41.0,\"top5\":90,"
                 "\"time\":2.5}\n"
                 "{\"sweep_time_before\":10.000}\n"
                 "{\"epoch\":1,\"global_step\":32,\"top1\":66.5,\"top5\":99,"
                 "\"time\":1.25}\n");
    ck_assert_int_eq(tsweep_task_at(&_p, _dir, 40, &r), 0);
    ck_assert(r.steps == 8 && fabs(r.time - 2.5) < 1e-9);
    ck_assert_int_eq(tsweep_task_at(&_p, _dir, 65, &r), 0);
    ck_assert(r.steps == 32 && fabs(r.time - 11.25) < 1e-9);
    ck_assert_int_eq(tsweep_task_at(&_p, _dir, 80.5, &r), TSWEEP_EPLAN);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "at most the plan's 80"));
    /* a bad line is an error naming the file and line, not skipped */
    static const char *const bad[][2] = {
        {"{\"global_step\":16,\"top1\":-3,\"top5\":90}\n",
         "task-5.jsonl:2: field \"top1\": -3 is not a number in"},
        {"{\"global_step\":24,\"top1\":x,\"top5\":90}\n",
         "task-5.jsonl:2: not JSON: "},
        {"{\"global_step\":2.5,\"top1\":50,\"top5\":90}\n",
         "task-5.jsonl:2: field \"global_step\": double, not an integer"},
        {"{\"global_step\":8,\"top1\":50,\"top1\":90}\n",
         "task-5.jsonl:2: a key given twice"},
        {"{\"sweep_time_before\":1e99}\n",
         "task-5.jsonl:2: field \"sweep_time_before\": 1e99 is not"},
        {"{\"global_step\":8,\"top1\":5", "task-5.jsonl:2: the last line "
                                          "has no newline"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[512];
        snprintf(text, sizeof(text), "{\"sweep_time_before\":0.000}\n%s",
                 bad[i][0]);
        _write(path, text);
        ck_assert_int_eq(tsweep_task_at(&_p, _dir, 65, &r), TSWEEP_EIO);
        ck_assert_msg(strstr(torus_error_msg(), bad[i][1]),
                      "case %zu: got '%s', want '%s'", i, torus_error_msg(),
                      bad[i][1]);
    }
    r.task = 6;
    ck_assert_int_eq(tsweep_task_at(&_p, _dir, 65, &r), TSWEEP_EIO);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "task-6.jsonl"));
}
END_TEST

/* _plan's settings over the batches list (a part of a sweep). */
static void _part(tsweep_plan *p, const char *batches)
{
    _plan(p);
    ck_assert_int_eq(tsweep_parse_batches(p, batches), 0);
    ck_assert_int_eq(tsweep_plan_expand(p), 0);
}

/* report DIR DIR ...: a sweep run in parts (batches 32 and 128, then
 * 64, then 256) merges into the plan over 32..256 with every result
 * renumbered to its (batch, recipe, LR) there; the launcher may differ;
 * a part with other LRs at a batch already there (a recipe's own --lr
 * too) adds trials to it, in LR order; a part with another setting (a
 * recipe's other options too), a task of an earlier part (named: the part
 * it came from) or too many tasks is refused, and changes nothing. */
START_TEST(test_merge)
{
    tsweep_result rb[1], *ra = calloc(2, sizeof(*ra));
    static const char *from[TSWEEP_MAX_TASKS];
    int na = 2;
    ck_assert_ptr_nonnull(ra);
    _part(&_p, "32,128");
    for (int i = 0; i < _p.ntasks; i++)
        from[i] = "A";
    _part(&_q, "64");
    ra[0] = (tsweep_result){.task = 1, .batch = 32, .trial = 1, .steps = 5};
    ra[1] = (tsweep_result){.task = 11, .batch = 128, .trial = 2, .steps = 7};
    rb[0] = (tsweep_result){.task = 0, .batch = 64, .trial = 0, .steps = 9};
    snprintf(_q.launcher, sizeof(_q.launcher), "srun -K1");
    ck_assert_int_eq(tsweep_merge(&_p, from, &ra, &na, &_q, rb, 1, "B"), 0);
    ck_assert_int_eq(_p.nbatches, 3);
    ck_assert_int_eq(_p.batch[1], 64);
    ck_assert_int_eq(_p.ntasks, 18);
    ck_assert_str_eq(from[6], "B");
    ck_assert_str_eq(from[12], "A");
    ck_assert_int_eq(na, 3);
    int want[3] = {1, 17, 6}; /* batch-major: (b * 2 + recipe) * 3 + trial */
    for (int i = 0; i < 3; i++) {
        const tsweep_task *t = &_p.task[ra[i].task];
        ck_assert_int_eq(ra[i].task, want[i]);
        ck_assert_int_eq(t->batch, ra[i].batch);
        ck_assert_int_eq(t->trial, ra[i].trial);
        ck_assert_int_eq(t->recipe, i == 1); /* lars at 128 */
    }
    /* a third part: 256 goes after 128 */
    _part(&_q, "256");
    ck_assert_int_eq(tsweep_merge(&_p, from, &ra, &na, &_q, rb, 0, "C"), 0);
    ck_assert_int_eq(_p.batch[3], 256);
    ck_assert_str_eq(from[18], "C");
    /* a lower LR at 64, for both recipes (lars by its own --lr) */
    _part(&_q, "64");
    _q.trials = 1;
    _q.base_lr = 0.025;
    snprintf(_q.recipe[1].args, sizeof(_q.recipe[1].args),
             "--lars --warmup-epochs 2 --lr 0.5");
    _q.recipe[1].lr = 0.5;
    ck_assert_int_eq(tsweep_plan_expand(&_q), 0);
    rb[0] = (tsweep_result){.task = 1, .batch = 64, .steps = 3, .lr = 0.5};
    ck_assert_int_eq(tsweep_merge(&_p, from, &ra, &na, &_q, rb, 1, "E"), 0);
    ck_assert_int_eq(_p.ntasks, 26);
    ck_assert_int_eq(_p.nbatches, 4);
    const tsweep_task *t = &_p.task[ra[3].task];
    ck_assert(t->batch == 64 && t->recipe == 1 && t->lr == 0.5);
    ck_assert_int_eq(t->trial, 0);
    ck_assert(_p.task[6].batch == 64 && _p.task[6].lr == 0.025);
    ck_assert_str_eq(from[6], "E");
    ck_assert(fabs(_p.task[ra[2].task].lr - 0.05) < 1e-12); /* B's: trial 1 */
    ck_assert_int_eq(_p.task[ra[2].task].trial, 1);
    ck_assert_int_eq(ra[2].trial, 1); /* the result's trial too */
    tsweep_summary sum;
    tsweep_summarize(&_p, ra, na, TSWEEP_PERFECT_TOL, TSWEEP_GAIN_MIN, &sum);
    ck_assert_int_eq(sum.planned[0 * 4 + 1], 4);
    ck_assert_int_eq(sum.planned[1 * 4 + 1], 4);
    ck_assert_int_eq(sum.planned[0 * 4 + 0], 3);
    /* refused: B's task again, another recipe option, too many tasks */
    _part(&_q, "64,512");
    ck_assert_int_eq(tsweep_merge(&_p, from, &ra, &na, &_q, rb, 0, "D"),
                     TSWEEP_EPLAN);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(),
                                 "batch 64, sgd, --lr 0.05 is in the plans "
                                 "of both B and D"));
    ck_assert_int_eq(_p.nbatches, 4);
    ck_assert_int_eq(_p.ntasks, 26);
    _part(&_q, "512");
    snprintf(_q.recipe[1].args, sizeof(_q.recipe[1].args),
             "--lars --lr 2 --warmup-epochs 3");
    ck_assert_int_eq(tsweep_merge(&_p, from, &ra, &na, &_q, rb, 0, "D"),
                     TSWEEP_EPLAN);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "A/plan and D/plan "
                                                    "differ in 'recipe'"));
    _part(&_q, "512");
    snprintf(_q.train, sizeof(_q.train), "--data /other --model tiny-cnn");
    ck_assert_int_eq(tsweep_merge(&_p, from, &ra, &na, &_q, rb, 0, "D"),
                     TSWEEP_EPLAN);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "differ in 'train'"));
    _part(&_q, "3:1572864"); /* 20 batches x 2 recipes x 3 trials */
    _q.ntasks = TSWEEP_MAX_TASKS - 25;
    ck_assert_int_eq(tsweep_merge(&_p, from, &ra, &na, &_q, rb, 0, "D"),
                     TSWEEP_EPLAN);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "D: 2305 tasks with"));
    ck_assert_int_eq(_p.ntasks, 26);
    free(ra);
}
END_TEST

int main(void)
{
    if (!mkdtemp(_dir)) {
        perror("mkdtemp");
        return 1;
    }
    Suite *s = suite_create("sweep");
    TCase *tc = tcase_create("sweep");
    tcase_add_test(tc, test_perfect);
    tcase_add_test(tc, test_bending);
    tcase_add_test(tc, test_flat);
    tcase_add_test(tc, test_missed);
    tcase_add_test(tc, test_noisy);
    tcase_add_test(tc, test_plan_roundtrip);
    tcase_add_test(tc, test_min_steps);
    tcase_add_test(tc, test_plan_hostile);
    tcase_add_test(tc, test_plan_diverge_loss);
    tcase_add_test(tc, test_results_hostile);
    tcase_add_test(tc, test_results_append);
    tcase_add_test(tc, test_fcntl_locks);
    tcase_add_test(tc, test_summary_lines);
    tcase_add_test(tc, test_partial);
    tcase_add_test(tc, test_task_at);
    tcase_add_test(tc, test_merge);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", _dir);
    if (system(cmd))
        fprintf(stderr, "could not remove %s\n", _dir);
    return failed ? 1 : 0;
}
