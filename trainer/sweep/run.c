/* run.c: one task of the sweep (one job array index): torus-train at the
 * task's batch, recipe and LR until the target top-1 or the budget, then
 * one line in the results file. A task already in the results is skipped;
 * a task whose torus-train was stopped by a signal (preemption: it writes
 * a checkpoint and exits 3) resumes from that checkpoint when run again.
 * The time to target is torus-train's wall time summed over the attempts
 * (work/task-ID.time keeps the sum between them). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "trainer/sweep/tsweep.h"

#define _MAX_ARGS 256

static volatile pid_t _child;

/* Slurm signals every process of the step; a signal sent to torus-sweep
 * alone (kill, Ctrl-C) reaches torus-train too, which then checkpoints. */
static void _forward(int sig)
{
    if (_child > 0)
        kill(_child, sig);
}

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Appends the blank-separated words of s (copied into buf) to argv. */
static int _split(char *buf, size_t size, const char *s, char **argv, int *n)
{
    snprintf(buf, size, "%s", s);
    for (char *w = strtok(buf, " \t"); w; w = strtok(NULL, " \t")) {
        if (*n >= _MAX_ARGS - 1)
            return TORUS_FAIL(TSWEEP_EPLAN, "more than %d words of options",
                              _MAX_ARGS);
        argv[(*n)++] = w;
    }
    return 0;
}

typedef struct {
    char words[3][TSWEEP_ARGS_LEN];
    char num[8][64];
    char metrics[1024], ckpt[1024];
    char *argv[_MAX_ARGS];
} _cmd;

/* The command line of task t: launcher, torus-train, the shared options,
 * the recipe's, then what the sweep sets (these come last and win). */
static int _command(const tsweep_plan *p, const tsweep_task *t,
                    const char *train, _cmd *c)
{
    int n = 0;
    if (_split(c->words[0], TSWEEP_ARGS_LEN, p->launcher, c->argv, &n))
        return TSWEEP_EPLAN;
    c->argv[n++] = (char *)train;
    if (_split(c->words[1], TSWEEP_ARGS_LEN, p->train, c->argv, &n) ||
        _split(c->words[2], TSWEEP_ARGS_LEN, p->recipe[t->recipe].args, c->argv,
               &n) ||
        n > _MAX_ARGS - 24)
        return TORUS_FAIL(TSWEEP_EPLAN, "too many options");
    snprintf(c->num[0], 64, "%d", t->batch);
    snprintf(c->num[1], 64, "%.17g", t->lr);
    snprintf(c->num[2], 64, "%d", tsweep_task_epochs(p, t->batch));
    snprintf(c->num[3], 64, "%.17g", p->target);
    snprintf(c->num[4], 64, "%ld", tsweep_eval_every(p, t->batch));
    snprintf(c->num[5], 64, "%d", p->ref_batch);
    const char *fixed[] = {"--batch",
                           c->num[0],
                           "--lr",
                           c->num[1],
                           "--epochs",
                           c->num[2],
                           "--target-top1",
                           c->num[3],
                           "--eval-every",
                           c->num[4],
                           "--ref-batch",
                           c->num[5],
                           "--metrics",
                           c->metrics,
                           "--checkpoint-dir",
                           c->ckpt,
                           "--checkpoint-every",
                           c->num[4],
                           "--resume"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        c->argv[n++] = (char *)fixed[i];
    if (p->max_steps) {
        snprintf(c->num[6], 64, "%ld", p->max_steps);
        c->argv[n++] = "--max-steps";
        c->argv[n++] = c->num[6];
    }
    if (p->diverge_loss) {
        snprintf(c->num[7], 64, "%.17g", p->diverge_loss);
        c->argv[n++] = "--diverge-loss";
        c->argv[n++] = c->num[7];
    }
    c->argv[n] = NULL;
    return 0;
}

/* Runs argv to its end, forwarding SIGTERM/SIGINT/SIGUSR1. Returns the
 * exit status (128 + signal when killed), or -1 when it could not start. */
static int _spawn(char **argv)
{
    struct sigaction sa = {.sa_handler = _forward}, old[3];
    const int sigs[3] = {SIGTERM, SIGINT, SIGUSR1};
    sigemptyset(&sa.sa_mask);
    pid_t pid = fork();
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "torus-sweep: cannot run %s: %s\n", argv[0],
                strerror(errno));
        _exit(127);
    }
    if (pid < 0) {
        TORUS_FAIL(TSWEEP_EIO, "fork: %s", strerror(errno));
        return -1;
    }
    _child = pid;
    for (int i = 0; i < 3; i++)
        sigaction(sigs[i], &sa, &old[i]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    _child = 0;
    for (int i = 0; i < 3; i++)
        sigaction(sigs[i], &old[i], NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int tsweep_task_at(const tsweep_plan *p, const char *dir, double target,
                   tsweep_result *r)
{
    char path[1024];
    if (!(target > 0 && target <= p->target))
        return TORUS_FAIL(TSWEEP_EPLAN,
                          "target %g: must be above 0 and at most the "
                          "plan's %g (the tasks stopped there)",
                          target, p->target);
    snprintf(path, sizeof(path), "%s/work/task-%d.jsonl", dir, r->task);
    return tsweep_outcome(path, target, r);
}

/* The wall time of the earlier attempts (work/task-ID.time), or 0. */
static double _time_so_far(const char *path)
{
    FILE *f = fopen(path, "r");
    double t = 0;
    if (f) {
        if (fscanf(f, "%lf", &t) != 1 || !isfinite(t) || t < 0 || t > 1e9) {
            torus_warn("%s:1: not a time; counting from 0", path);
            t = 0;
        }
        fclose(f);
    }
    return t;
}

static int _save_time(const char *path, double t)
{
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%.3f\n", t) < 0 || fclose(f))
        return TORUS_FAIL(TSWEEP_EIO, "%s: cannot write: %s", path,
                          strerror(errno));
    return 0;
}

/* 1 when task id is in the results (said on out), 0 when not, -1 on a
 * bad results file. */
static int _done(const tsweep_plan *p, const char *dir, int id, FILE *out)
{
    char path[1024];
    tsweep_result *r;
    int n;
    snprintf(path, sizeof(path), "%s/results.jsonl", dir);
    if (tsweep_results_read(path, p, &r, &n)) {
        free(r);
        return -1;
    }
    const tsweep_result *x = tsweep_results_find(r, n, id);
    if (x)
        fprintf(out, "torus-sweep: task %d is done (%s:%d): skipped\n", id,
                path, x->line);
    free(r);
    return x != NULL;
}

/* Runs torus-train for t and records the outcome (rc: its exit status);
 * says on out what it runs and what came of it. */
static int _attempt(const tsweep_plan *p, const char *dir, const tsweep_task *t,
                    const char *train, FILE *out)
{
    static _cmd c;
    char tpath[1024];
    snprintf(c.metrics, sizeof(c.metrics), "%s/work/task-%d.jsonl", dir, t->id);
    snprintf(c.ckpt, sizeof(c.ckpt), "%s/work/task-%d.ckpt", dir, t->id);
    snprintf(tpath, sizeof(tpath), "%s/work/task-%d.time", dir, t->id);
    if (mkdir(c.ckpt, 0755) && errno != EEXIST)
        return TORUS_FAIL(TSWEEP_EIO, "%s: %s", c.ckpt, strerror(errno));
    if (_command(p, t, train, &c))
        return TSWEEP_EPLAN;
    double before = _time_so_far(tpath), t0 = _now();
    if (tsweep_mark(c.metrics, before))
        return TSWEEP_EIO;
    fprintf(out,
            "torus-sweep: task %d: batch %d, %s, trial %d, --lr %g:", t->id,
            t->batch, p->recipe[t->recipe].name, t->trial, t->lr);
    for (char **a = c.argv; *a; a++)
        fprintf(out, " %s", *a);
    fprintf(out, "\n");
    fflush(out);
    int st = _spawn(c.argv);
    double total = before + (_now() - t0);
    if (st < 0) /* the message names fork's error */
        return TSWEEP_EIO;
    if (_save_time(tpath, total))
        return TSWEEP_EIO;
    if (st == 3)
        return TORUS_FAIL(TSWEEP_STOPPED,
                          "task %d: torus-train was stopped and wrote a "
                          "checkpoint; run the task again to resume it",
                          t->id);
    /* A diverged trial is an outcome (the LR was too high), not a fault. */
    int diverged = 0;
    if (st == 1 && tsweep_diverged(c.metrics, &diverged))
        return TSWEEP_EIO;
    if (st && !diverged)
        return TORUS_FAIL(TSWEEP_EIO,
                          "task %d: torus-train failed (exit "
                          "status %d); see its messages above",
                          t->id, st);
    tsweep_result r = {.task = t->id,
                       .batch = t->batch,
                       .trial = t->trial,
                       .lr = t->lr,
                       .diverged = diverged,
                       .time = total};
    snprintf(r.recipe, sizeof(r.recipe), "%s", p->recipe[t->recipe].name);
    if (tsweep_outcome(c.metrics, -1, &r))
        return TSWEEP_EIO;
    snprintf(tpath, sizeof(tpath), "%s/results.jsonl", dir);
    if (tsweep_results_append(tpath, &r))
        return TSWEEP_EIO;
    fprintf(out,
            "torus-sweep: task %d: %s at global step %ld, %.1f s (top-1 "
            "%.2f%%)\n",
            t->id,
            r.reached    ? "target reached"
            : r.diverged ? "diverged"
                         : "budget spent",
            r.steps, r.time, r.top1);
    return 0;
}

int tsweep_run_task(const tsweep_plan *p, const char *dir, int id,
                    const char *train, FILE *out)
{
    char path[1024];
    if (id < 0 || id >= p->ntasks)
        return TORUS_FAIL(TSWEEP_EPLAN, "task %d: the plan has tasks 0..%d", id,
                          p->ntasks - 1);
    int d = _done(p, dir, id, out);
    if (d)
        return d < 0 ? TSWEEP_EPARSE : 0;
    snprintf(path, sizeof(path), "%s/work", dir);
    if (mkdir(path, 0755) && errno != EEXIST)
        return TORUS_FAIL(TSWEEP_EIO, "%s: %s", path, strerror(errno));
    /* One runner per task: a second one (the same index submitted twice)
     * leaves it alone rather than train it twice. An fcntl record lock,
     * not flock(): Lustre mounted noflock and some NFS set-ups refuse
     * flock(); a lock the file system cannot take at all is named as
     * that, not as a runner elsewhere. Held by this process only (never
     * inherited by torus-train), released when fd is closed. */
    snprintf(path, sizeof(path), "%s/work/task-%d.lock", dir, id);
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0)
        return TORUS_FAIL(TSWEEP_EIO, "%s: %s", path, strerror(errno));
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &lk)) {
        int e = errno;
        close(fd);
        if (e == EACCES || e == EAGAIN)
            return TORUS_FAIL(TSWEEP_EIO,
                              "task %d is running elsewhere (%s is "
                              "locked)",
                              id, path);
        return TORUS_FAIL(TSWEEP_EIO,
                          "%s: cannot lock it: %s (mount the file system "
                          "with locks, e.g. Lustre with flock)",
                          path, strerror(e));
    }
    int rc = (d = _done(p, dir, id, out))
                 ? (d < 0 ? TSWEEP_EPARSE : 0)
                 : _attempt(p, dir, &p->task[id], train, out);
    close(fd);
    return rc;
}
