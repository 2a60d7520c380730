/* torus-sweep.c: the batch-size sweep's command line (see tsweep.h and
 * docs/batch-science.md):
 *   torus-sweep plan DIR OPTIONS   write the grid of tasks to DIR/plan
 *   torus-sweep pending DIR        the task ids not yet in the results, as
 *                                  sbatch --array wants them ("0-3,7")
 *   torus-sweep run DIR ID         run one task (a job array index)
 *   torus-sweep report DIR [DIR..] table on stdout, log-log PNG (more
 *                                  DIRs: parts of one sweep, merged)
 * Exit status: 0 ok, 1 failure, 2 bad usage or input, 3 a task was
 * stopped by a signal after its checkpoint (run it again to resume). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/torus_cli.h"
#include "common/torus_error.h"
#include "common/torus_report.h"
#include "config.h"
#include "trainer/sweep/tsweep.h"

/* The help text, in the sections tools/help2roff turns into torus-sweep(1)
 * (headings in capitals at column 0, bodies indented), so the page is this
 * text and cannot drift from it. */
static const char _help[] =
    "NAME\n"
    "    torus-sweep - steps to a target accuracy against the global batch,\n"
    "    per optimizer recipe, as a Slurm job array of torus-train runs\n"
    "\n"
    "SYNOPSIS\n"
    "    torus-sweep plan DIR --target PCT --batches B,B,...|FROM:TO\n"
    "                --recipe NAME=OPTIONS [--recipe ...] [PLAN OPTIONS]\n"
    "    torus-sweep pending DIR\n"
    "    torus-sweep run DIR ID [--torus-train PATH]\n"
    "    torus-sweep report DIR [DIR...] [-o PNG] [--size WxH] [--title T]\n"
    "                [--target PCT]\n"
    "\n"
    "DESCRIPTION\n"
    "    Measures steps to a target test top-1 against the global batch, per\n"
    "    optimizer recipe, tuning the LR per batch (Shallue et al. 2019): a\n"
    "    small grid of LR trials around the linear-scaling value, the best\n"
    "    trial kept. plan writes the grid of (batch, recipe, trial) tasks to\n"
    "    DIR/plan; pending prints the task ids not yet in the results, as\n"
    "    sbatch --array wants them (\"0-3,7\"); run runs one task (a job "
    "array\n"
    "    index) with torus-train --target-top1 until it reaches the target\n"
    "    or its budget, appending one line to DIR/results.jsonl (a finished\n"
    "    task is skipped; a stopped one resumes from its checkpoint); report\n"
    "    prints the table and draws a log-log PNG of steps to target against\n"
    "    the batch, one curve per recipe with the perfect-scaling line, the\n"
    "    batch where each recipe leaves perfect scaling (steps above 1.25x\n"
    "    perfect) and where it stops gaining. report merges several DIRs\n"
    "    into one table and picture when they are parts of one sweep:\n"
    "    plans that differ only in their batches, LRs (--lr, --trials,\n"
    "    --lr-spread, a recipe's own --lr) and launcher, with no task\n"
    "    (batch, recipe, LR) in two of them. A plan with results cannot\n"
    "    change, so more batches, or more LRs where the best trial was at\n"
    "    the edge of the grid, go into a plan of their own.\n"
    "    jobs/sweep.sbatch drives it on a cluster.\n"
    "\n"
    "PLAN OPTIONS\n"
    "    --target PCT        test top-1 to reach, in percent (required)\n"
    "    --batches LIST      global batches, increasing; FROM:TO doubles\n"
    "    --recipe N=OPTS     a recipe: its name and torus-train options,\n"
    "                        blank-separated, e.g. 'lars=--lars\n"
    "                        --warmup-epochs 2'\n"
    "    --train OPTS        torus-train options of every task (--data,\n"
    "                        --model...)\n"
    "    --launcher CMD      prefix of torus-train, e.g. 'srun --mpi=pmix "
    "-K1'\n"
    "    --lr LR             base LR at --ref-batch, scaled linearly [0.1]\n"
    "    --ref-batch N       the reference batch of --lr [256]\n"
    "    --trials N          LR trials per batch and recipe, centred on the\n"
    "                        linear-scaling LR [3]\n"
    "    --lr-spread F       factor between neighbouring trials [2]\n"
    "    --epochs E          the budget (torus-train --epochs) [10]\n"
    "    --max-steps N       a step cap per task [0: none]\n"
    "    --min-steps S       a budget floor: a batch whose --epochs hold\n"
    "                        fewer than S steps gets the epochs that hold\n"
    "                        S (with --dataset-size) [0: none]\n"
    "    --dataset-size N    training images per epoch, for --min-steps\n"
    "    --eval-images N     evaluate every ~N training images [10000]\n"
    "    --diverge-loss X    every task's torus-train --diverge-loss: a task\n"
    "                        whose training loss stays above X (at 3\n"
    "                        progress points in a row) stops as diverged\n"
    "                        instead of spending its budget at chance; its\n"
    "                        results line says \"diverged\":1 [0: off]\n"
    "\n"
    "RUN AND REPORT OPTIONS\n"
    "    --torus-train PATH  the torus-train to run (else $TORUS_TRAIN, else\n"
    "                        torus-train on PATH)\n"
    "    -o PNG              the picture [the first DIR/sweep.png]\n"
    "    --size WxH          its size in pixels [1000x650]\n"
    "    --title T           its title\n"
    "    --target PCT        report steps to a lower top-1 than the plan's,\n"
    "                        from the evaluations in DIR/work/task-ID.jsonl\n"
    "                        (the first at or above PCT; its time is that\n"
    "                        evaluation's, counted over the task's\n"
    "                        attempts); at most the plan's target, where\n"
    "                        the tasks stopped\n"
    "    --help              print this help and exit\n"
    "    --version           print the version and exit\n"
    "\n"
    "EXIT STATUS\n"
    "    0 done; 1 a failure (named on standard error); 2 bad usage, or a\n"
    "    plan or results file that does not parse (file:line named); 3 a task\n"
    "    was stopped by a signal after its checkpoint (run it again to\n"
    "    resume).\n";

static void _usage(FILE *f)
{
    fputs(_help, f);
}

static int _usage_error(const char *msg)
{
    fprintf(stderr, "torus-sweep: %s (see --help)\n", msg);
    return 2;
}

/* A usage error that a common/torus_cli.h helper recorded. */
static int _cli_error(int rc)
{
    fprintf(stderr, "torus-sweep: %s\n", torus_error_msg());
    return rc;
}

static int _fail(int rc)
{
    fprintf(stderr, "torus-sweep: %s\n", torus_error_msg());
    return rc == TSWEEP_STOPPED                        ? 3
           : rc == TSWEEP_EPARSE || rc == TSWEEP_EPLAN ? 2
                                                       : 1;
}

static int _load(tsweep_plan *p, const char *dir, tsweep_result **r, int *n)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/plan", dir);
    int rc = tsweep_plan_read(p, path);
    snprintf(path, sizeof(path), "%s/results.jsonl", dir);
    if (!rc && r)
        rc = tsweep_results_read(path, p, r, n);
    return rc;
}

static const struct option _plan_opts[] = {{"target", 1, 0, 't'},
                                           {"batches", 1, 0, 'b'},
                                           {"recipe", 1, 0, 'r'},
                                           {"train", 1, 0, 'T'},
                                           {"launcher", 1, 0, 'L'},
                                           {"lr", 1, 0, 'l'},
                                           {"ref-batch", 1, 0, 'R'},
                                           {"trials", 1, 0, 'n'},
                                           {"lr-spread", 1, 0, 's'},
                                           {"epochs", 1, 0, 'e'},
                                           {"max-steps", 1, 0, 'm'},
                                           {"eval-images", 1, 0, 'E'},
                                           {"min-steps", 1, 0, 'S'},
                                           {"dataset-size", 1, 0, 'N'},
                                           {"diverge-loss", 1, 0, 'D'},
                                           {0, 0, 0, 0}};

/* A number option into *x; 2 (after the message) when it is not one. */
static int _number(const char *name, const char *v, double *x)
{
    char *end;
    errno = 0;
    *x = strtod(v, &end);
    if (end == v || *end || errno) {
        fprintf(stderr, "torus-sweep: --%s: '%s' is not a number\n", name, v);
        return 2;
    }
    return 0;
}

/* One plan option c with value v into p. */
static int _plan_opt(tsweep_plan *p, int c, const char *v, const char *name)
{
    double x = 0;
    if (c == 'b' || c == 'r')
        return (c == 'b' ? tsweep_parse_batches(p, v) : tsweep_add_recipe(p, v))
                   ? _fail(TSWEEP_EPLAN)
                   : 0;
    if (c == 'T' || c == 'L') {
        char *dst = c == 'T' ? p->train : p->launcher;
        if (strlen(v) >= TSWEEP_ARGS_LEN)
            return _usage_error("--train or --launcher is too long");
        strcpy(dst, v);
        return 0;
    }
    if (_number(name, v, &x))
        return 2;
    if (c == 't')
        p->target = x;
    else if (c == 'l')
        p->base_lr = x;
    else if (c == 's')
        p->lr_spread = x;
    else if (c == 'D')
        p->diverge_loss = x;
    else if (x != (long)x || x < 0 || x > 1e12) {
        fprintf(stderr,
                "torus-sweep: --%s: '%s' is not a whole number (see --help)\n",
                name, v);
        return 2;
    } else if (c == 'R' || c == 'n' || c == 'e')
        *(c == 'R'   ? &p->ref_batch
          : c == 'n' ? &p->trials
                     : &p->epochs) = (int)x;
    else
        *(c == 'm'   ? &p->max_steps
          : c == 'S' ? &p->min_steps
          : c == 'N' ? &p->dataset_size
                     : &p->eval_images) = (long)x;
    return 0;
}

/* 1 when the files a and b hold the same bytes. */
static int _same_file(const char *a, const char *b)
{
    FILE *f = fopen(a, "r"), *g = fopen(b, "r");
    int same = f && g, x;
    while (same && (x = getc(f)) != EOF)
        same = x == getc(g);
    if (same)
        same = getc(g) == EOF;
    if (f)
        fclose(f);
    if (g)
        fclose(g);
    return same;
}

/* Writes DIR/plan; an existing plan that differs is kept when results
 * of it exist (they would no longer match their tasks). */
static int _cmd_plan(const char *dir, int argc, char **argv)
{
    static tsweep_plan p;
    tsweep_plan_defaults(&p);
    int c, rc;
    opterr = 0; /* getopt would name the program by its path */
    while ((c = getopt_long(argc, argv, ":", _plan_opts, NULL)) != -1) {
        if (c == '?' || c == ':')
            return _cli_error(torus_cli_bad_option(c, argv));
        const char *name = _plan_opts[0].name;
        for (const struct option *o = _plan_opts; o->name; o++)
            if (o->val == c)
                name = o->name;
        if ((rc = _plan_opt(&p, c, optarg, name)))
            return rc;
    }
    if (optind != argc)
        return _usage_error("unexpected argument after the plan options");
    if (tsweep_plan_expand(&p))
        return _fail(TSWEEP_EPLAN);
    if (mkdir(dir, 0755) && errno != EEXIST) {
        TORUS_FAIL(TSWEEP_EIO, "%s: %s", dir, strerror(errno));
        return _fail(TSWEEP_EIO);
    }
    char path[1024], tmp[1100], res[1024];
    snprintf(path, sizeof(path), "%s/plan", dir);
    snprintf(tmp, sizeof(tmp), "%s/plan.new", dir);
    snprintf(res, sizeof(res), "%s/results.jsonl", dir);
    if (tsweep_plan_write(&p, tmp))
        return _fail(TSWEEP_EIO);
    struct stat st;
    if (!stat(res, &st) && st.st_size > 0 && !_same_file(tmp, path)) {
        remove(tmp);
        fprintf(stderr,
                "torus-sweep: %s holds results of another plan "
                "(%s): plan a new sweep in a new directory\n",
                res, path);
        return 2;
    }
    if (rename(tmp, path)) {
        TORUS_FAIL(TSWEEP_EIO, "%s: %s", path, strerror(errno));
        return _fail(TSWEEP_EIO);
    }
    printf("torus-sweep: %s: %d tasks (%d batches x %d recipes x %d LR "
           "trials)\n",
           path, p.ntasks, p.nbatches, p.nrecipes, p.trials);
    return 0;
}

/* The unfinished task ids as ranges, "0-3,7" ("" when all are done). */
static int _cmd_pending(const char *dir)
{
    static tsweep_plan p;
    tsweep_result *r = NULL;
    int n, rc = _load(&p, dir, &r, &n), first = 1;
    if (rc) {
        free(r);
        return _fail(rc);
    }
    for (int i = 0; i < p.ntasks; i++) {
        if (tsweep_results_find(r, n, i))
            continue;
        int j = i;
        while (j + 1 < p.ntasks && !tsweep_results_find(r, n, j + 1))
            j++;
        printf(j > i ? "%s%d-%d" : "%s%d", first ? "" : ",", i, j);
        first = 0;
        i = j;
    }
    printf("\n");
    free(r);
    return 0;
}

static int _cmd_run(const char *dir, int argc, char **argv)
{
    static tsweep_plan p;
    const char *train = getenv("TORUS_TRAIN");
    char *end;
    if (argc < 1)
        return _usage_error("run: no task id");
    errno = 0;
    long id = strtol(argv[0], &end, 10);
    if (end == argv[0] || *end || errno || id < 0 || id > 1000000)
        return _usage_error("run: the task id is not a number");
    if (argc == 3 && !strcmp(argv[1], "--torus-train"))
        train = argv[2];
    else if (argc != 1)
        return _usage_error("run: DIR ID [--torus-train PATH]");
    int rc = _load(&p, dir, NULL, NULL);
    if (!rc)
        rc = tsweep_run_task(&p, dir, (int)id, train ? train : "torus-train",
                             stdout);
    return rc ? _fail(rc) : 0;
}

/* Sweep part dir (plan, results; each re-read at target when above 0)
 * into *p, *r, *n, or added to them when *n >= 0 (tsweep_merge; from[]:
 * the directory of each task of *p). */
static int _load_part(tsweep_plan *p, const char **from, tsweep_result **r,
                      int *n, const char *dir, double target)
{
    static tsweep_plan q;
    tsweep_result *x = NULL;
    int m = 0, rc = _load(*n < 0 ? p : &q, dir, &x, &m);
    for (int i = 0; !rc && target > 0 && i < m; i++)
        rc = tsweep_task_at(*n < 0 ? p : &q, dir, target, &x[i]);
    if (!rc && *n < 0) {
        *r = x, *n = m;
        for (int i = 0; i < p->ntasks; i++)
            from[i] = dir;
        return 0;
    }
    if (!rc)
        rc = tsweep_merge(p, from, r, n, &q, x, m, dir);
    free(x);
    return rc;
}

/* The report's options into png, title, *target; the sweep directories
 * are what is left, from argv[*first] on (getopt moves them there). */
static int _report_opts(int argc, char **argv, char *png, char *title,
                        double *target, int *w, int *h, int *first)
{
    static const struct option o[] = {{"size", 1, 0, 'S'},
                                      {"title", 1, 0, 'T'},
                                      {"target", 1, 0, 'P'},
                                      {0, 0, 0, 0}};
    char tail;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:", o, NULL)) != -1) {
        if (c == '?' || c == ':')
            return _cli_error(torus_cli_bad_option(c, argv));
        if (c == 'o')
            snprintf(png, 1024, "%s", optarg);
        else if (c == 'T')
            snprintf(title, 256, "%s", optarg);
        else if (c == 'P' && _number("target", optarg, target))
            return 2;
        else if (c == 'P' && !(*target > 0 && *target <= 100))
            return _usage_error("report: --target PCT: a top-1 in (0, 100]");
        else if (c != 'P' &&
                 (c != 'S' || sscanf(optarg, "%dx%d%c", w, h, &tail) != 2))
            return _usage_error(
                "report: -o PNG, --size WxH, --title T, --target PCT");
    }
    if (*w < 200 || *h < 150 || *w > 8000 || *h > 8000)
        return _usage_error("report: --size not in 200x150..8000x8000");
    for (int i = optind; i < argc; i++)
        if (argv[i][0] == '-')
            return _usage_error("report: a sweep directory cannot start "
                                "with '-' (options go first)");
    *first = optind;
    return 0;
}

/* argv[0] is the first sweep directory; more may follow (parts of one
 * sweep, merged). */
static int _cmd_report(const char *dir, int argc, char **argv)
{
    static tsweep_plan p;
    static tsweep_summary s;
    char png[1024], title[256] = "";
    int w = 1000, h = 650, first = argc, n = -1, rc;
    double target = 0;
    if (dir[0] == '-')
        return _usage_error("report: a sweep directory cannot start with "
                            "'-' (options go first)");
    snprintf(png, sizeof(png), "%s/sweep.png", dir);
    if ((rc = _report_opts(argc, argv, png, title, &target, &w, &h, &first)))
        return rc;
    static const char *from[TSWEEP_MAX_TASKS];
    tsweep_result *r = NULL;
    rc = _load_part(&p, from, &r, &n, dir, target);
    for (int i = first; !rc && i < argc; i++)
        rc = _load_part(&p, from, &r, &n, argv[i], target);
    if (target > 0)
        p.target = target; /* what the table and the plot are of */
    if (!rc) {
        if (!title[0])
            snprintf(title, sizeof(title),
                     "steps to test top-1 %g%% vs "
                     "global batch (%d of %d tasks done)",
                     p.target, n, p.ntasks);
        tsweep_summarize(&p, r, n, TSWEEP_PERFECT_TOL, TSWEEP_GAIN_MIN, &s);
        tsweep_print_table(&p, &s, stdout);
        if (!(rc = tsweep_plot(&p, &s, png, w, h, title)))
            printf("torus-sweep: wrote %s\n", png);
    }
    free(r);
    return rc ? _fail(rc) : 0;
}

int main(int argc, char **argv)
{
    torus_report_set("torus-sweep", NULL);
    if (argc >= 2 && !strcmp(argv[1], "--help")) {
        _usage(stdout);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "--version")) {
        printf("torus-sweep %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (argc >= 2 && argv[1][0] == '-') {
        fprintf(stderr, "torus-sweep: unknown option '%s' (see --help)\n",
                argv[1]);
        return 2;
    }
    if (argc < 3)
        return _usage_error("want a command and a sweep directory");
    const char *cmd = argv[1], *dir = argv[2];
    if (!strcmp(cmd, "plan"))
        return _cmd_plan(dir, argc - 2, argv + 2);
    if (!strcmp(cmd, "pending"))
        return argc == 3 ? _cmd_pending(dir)
                         : _usage_error("pending takes only SWEEPDIR");
    if (!strcmp(cmd, "run"))
        return _cmd_run(dir, argc - 3, argv + 3);
    if (!strcmp(cmd, "report"))
        return _cmd_report(dir, argc - 2, argv + 2);
    fprintf(stderr,
            "torus-sweep: unknown command '%s' (plan, pending, run, report; "
            "see --help)\n",
            cmd);
    return 2;
}
