/* report.c: from the results to the numbers and the picture: the best LR
 * trial per (recipe, batch), the regimes of each recipe's curve, a table
 * and a log-log PNG drawn by gnuplot (steps to target against the global
 * batch, one curve per recipe with its perfect-scaling line and marks
 * where it leaves perfect scaling and where it stops gaining). */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "trainer/sweep/tsweep.h"

extern char **environ;

static int _bindex(const tsweep_plan *p, int batch)
{
    for (int b = 0; b < p->nbatches; b++)
        if (p->batch[b] == batch)
            return b;
    return -1;
}

/* 1 when point k (recipe, batch) is a point of the curve: a trial reached
 * the target (its steps are the best so far), or all its trials finished
 * without (a miss). While some trials are still to run and none of the
 * finished ones reached the target, the point is pending: a partial sweep
 * that runs the middle LR first must not call a batch missed whose lower
 * LR is still to come. */
static int _decided(const tsweep_summary *s, int k)
{
    return s->steps[k] > 0 || s->finished[k] >= s->planned[k];
}

/* The regimes of recipe c over its decided batches: a pending batch is no
 * point of the curve, one whose trials all missed the target is (the
 * steps 0). Indices map back to p->batch. */
static void _regimes(const tsweep_plan *p, tsweep_summary *s, int c, double tol,
                     double gain_min)
{
    int batch[TSWEEP_MAX_BATCHES], at[TSWEEP_MAX_BATCHES], n = 0;
    double steps[TSWEEP_MAX_BATCHES];
    for (int b = 0; b < p->nbatches; b++)
        if (_decided(s, c * p->nbatches + b)) {
            batch[n] = p->batch[b];
            steps[n] = s->steps[c * p->nbatches + b];
            at[n++] = b;
        }
    tsweep_regimes g;
    tsweep_regimes_find(batch, steps, n, tol, gain_min, &g);
    int *idx[4] = {&g.ref, &g.leave, &g.last_perfect, &g.stop};
    for (int i = 0; i < 4; i++)
        *idx[i] = *idx[i] >= 0 ? at[*idx[i]] : -1;
    s->reg[c] = g;
}

void tsweep_summarize(const tsweep_plan *p, const tsweep_result *r, int n,
                      double tol, double gain_min, tsweep_summary *s)
{
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < p->ntasks; i++)
        s->planned[p->task[i].recipe * p->nbatches +
                   _bindex(p, p->task[i].batch)]++;
    for (int i = 0; i < n; i++) {
        const tsweep_task *t = &p->task[r[i].task];
        int k = t->recipe * p->nbatches + _bindex(p, t->batch);
        s->finished[k]++;
        if (r[i].reached && r[i].steps > 0 &&
            (!s->best[k] || r[i].steps < s->best[k]->steps)) {
            s->best[k] = &r[i];
            s->steps[k] = (double)r[i].steps;
        }
    }
    for (int c = 0; c < p->nrecipes; c++)
        _regimes(p, s, c, tol, gain_min);
}

static const char *_regime(const tsweep_regimes *g, int b, int decided)
{
    if (g->ref < 0 || b < g->ref || !decided)
        return "-";
    if (g->stop >= 0 && b > g->stop)
        return "maximal";
    return b <= g->last_perfect ? "perfect" : "diminishing";
}

/* The largest decided batch of recipe c. */
static int _last_done(const tsweep_plan *p, const tsweep_summary *s, int c)
{
    int last = 0;
    for (int b = 0; b < p->nbatches; b++)
        if (_decided(s, c * p->nbatches + b))
            last = b;
    return last;
}

/* The end of recipe c's summary line: its batches still pending, if any.
 * The bends of a partial sweep are read across them: named, "up to 128,
 * 1024 takes more" is not read as 256 and 512 having left perfect
 * scaling. */
static void _pending(const tsweep_plan *p, const tsweep_summary *s, int c,
                     FILE *f)
{
    const char *sep = "; pending: batch ";
    for (int b = 0; b < p->nbatches; b++)
        if (!_decided(s, c * p->nbatches + b)) {
            fprintf(f, "%s%d", sep, p->batch[b]);
            sep = ", ";
        }
    fprintf(f, "\n");
}

/* The summary line of recipe c. */
static void _recipe_line(const tsweep_plan *p, const tsweep_summary *s, int c,
                         FILE *f)
{
    const tsweep_regimes *g = &s->reg[c];
    const int *B = p->batch;
    fprintf(f, "%s: ", p->recipe[c].name);
    if (g->ref < 0) {
        fprintf(f, "no batch reached the target");
        _pending(p, s, c, f);
        return;
    }
    fprintf(f, "perfect scaling from batch %d up to batch %d", B[g->ref],
            B[g->last_perfect]);
    if (g->leave >= 0 && s->steps[c * p->nbatches + g->leave] == 0)
        fprintf(f, " (batch %d missed the target within the budget)",
                B[g->leave]);
    else if (g->leave >= 0)
        fprintf(f, " (batch %d takes more than %.2fx the perfect steps)",
                B[g->leave], TSWEEP_PERFECT_TOL);
    else
        fprintf(f, " (the largest batch finished)");
    if (g->stop >= 0)
        fprintf(f, "; stops gaining after batch %d", B[g->stop]);
    else
        fprintf(f, "; still gaining at batch %d", B[_last_done(p, s, c)]);
    _pending(p, s, c, f);
}

void tsweep_print_table(const tsweep_plan *p, const tsweep_summary *s, FILE *f)
{
    fprintf(f, "%-12s %7s %7s %11s %9s %9s %6s %9s %7s  %s\n", "recipe",
            "batch", "trials", "best_lr", "steps", "perfect", "ratio", "time_s",
            "top1", "regime");
    for (int c = 0; c < p->nrecipes; c++) {
        const tsweep_regimes *g = &s->reg[c];
        for (int b = 0; b < p->nbatches; b++) {
            int k = c * p->nbatches + b, d = _decided(s, k);
            const tsweep_result *x = s->best[k];
            fprintf(f, "%-12s %7d %3d/%-3d", p->recipe[c].name, p->batch[b],
                    s->finished[k], s->planned[k]);
            if (!x) {
                fprintf(f, " %11s %9s %9s %6s %9s %7s  %s\n", "-",
                        d ? "not hit" : "pending", "-", "-", "-", "-",
                        _regime(g, b, d));
                continue;
            }
            double perfect = s->steps[c * p->nbatches + g->ref] *
                             p->batch[g->ref] / p->batch[b];
            fprintf(f, " %11.5g %9ld %9.0f %6.2f %9.1f %7.2f  %s\n",
                    x->lr * p->batch[b] / p->ref_batch, x->steps, perfect,
                    x->steps / perfect, x->time, x->top1, _regime(g, b, d));
        }
    }
    fprintf(f,
            "(best_lr: the peak LR of the best trial, --lr scaled by "
            "batch/%d; ratio: steps over the perfect-scaling steps)\n",
            p->ref_batch);
    for (int c = 0; c < p->nrecipes; c++)
        _recipe_line(p, s, c, f);
}

/* 1 when all trials of point k finished and none reached the target. */
static int _missed(const tsweep_summary *s, int k)
{
    return _decided(s, k) && !(s->steps[k] > 0);
}

/* Writes the data files of recipe c into dir: its curve (c), its perfect
 * line (p), and its marks (l: leaves perfect scaling, s: stops gaining, m:
 * batches that missed the target, drawn at height ymiss, above the curves). */
static int _plot_data(const tsweep_plan *p, const tsweep_summary *s, int c,
                      const char *dir, double ymiss)
{
    const tsweep_regimes *g = &s->reg[c];
    const double *st = &s->steps[c * p->nbatches];
    const char kinds[] = "cplsm";
    for (int k = 0; k < 5; k++) {
        char path[600];
        snprintf(path, sizeof(path), "%s/%c%d", dir, kinds[k], c);
        FILE *f = fopen(path, "w");
        if (!f)
            return TORUS_FAIL(TSWEEP_EIO, "%s: %s", path, strerror(errno));
        for (int b = 0; b < p->nbatches; b++) {
            double perfect = st[g->ref] * p->batch[g->ref] / p->batch[b];
            int show = k == 0   ? st[b] > 0
                       : k == 1 ? b >= g->ref
                       : k == 2 ? b == g->leave && st[b] > 0
                       : k == 3 ? b == g->stop
                                : _missed(s, c * p->nbatches + b);
            if (show)
                fprintf(f, "%d %.17g\n", p->batch[b],
                        k == 1   ? perfect
                        : k == 4 ? ymiss
                                 : st[b]);
        }
        fclose(f);
    }
    return 0;
}

/* The range of the steps drawn: the curves' and the perfect lines'; the
 * misses of recipe c are drawn at hi * (1.2 + 0.15 c), above them. */
static void _yrange(const tsweep_plan *p, const tsweep_summary *s, double *lo,
                    double *hi)
{
    for (int c = 0; c < p->nrecipes; c++) {
        const tsweep_regimes *g = &s->reg[c];
        const double *st = &s->steps[c * p->nbatches];
        if (g->ref < 0)
            continue;
        double last = st[g->ref] * p->batch[g->ref] / p->batch[p->nbatches - 1];
        for (int b = 0; b < p->nbatches; b++)
            if (st[b] > 0) {
                *hi = *hi > st[b] ? *hi : st[b];
                *lo = *lo > 0 && *lo < st[b] ? *lo : st[b];
            }
        *lo = *lo < last ? *lo : last;
    }
}

/* Recipe c's curve, its perfect line and the marks it has. */
static void _plot_recipe(const tsweep_plan *p, const tsweep_summary *s, int c,
                         const char *dir, FILE *f)
{
    const char *n = p->recipe[c].name;
    const tsweep_regimes *g = &s->reg[c];
    fprintf(f,
            "'%s/c%d' w linespoints lc %d lw 2 pt 7 ps 1.2 t '%s', "
            "'%s/p%d' w lines lc %d dt 2 t '%s: perfect scaling'",
            dir, c, c + 1, n, dir, c, c + 1, n);
    if (g->leave >= 0 && s->steps[c * p->nbatches + g->leave] > 0)
        fprintf(f,
                ", '%s/l%d' w points lc %d pt 6 ps 3.5 lw 2 t '%s: leaves "
                "perfect scaling (> %.2fx)'",
                dir, c, c + 1, n, TSWEEP_PERFECT_TOL);
    if (g->stop >= 0)
        fprintf(f,
                ", '%s/s%d' w points lc %d pt 8 ps 3.5 lw 2 t '%s: stops "
                "gaining'",
                dir, c, c + 1, n);
    int missed = 0;
    for (int b = 0; b < p->nbatches; b++)
        missed |= _missed(s, c * p->nbatches + b);
    if (missed)
        fprintf(f,
                ", '%s/m%d' w points lc %d pt 2 ps 2 lw 2 t '%s: missed the "
                "target within the budget'",
                dir, c, c + 1, n);
}

/* The gnuplot commands: log-log axes, a colour per recipe. */
static void _plot_script(const tsweep_plan *p, const tsweep_summary *s,
                         const char *dir, const char *png, int w, int h,
                         const char *title, FILE *f)
{
    double lo = 0, hi = 0;
    _yrange(p, s, &lo, &hi);
    fprintf(f, "set terminal pngcairo noenhanced size %d,%d font ',11'\n", w,
            h);
    fprintf(f, "set output '%s'\nset title '%s'\n", png, title);
    fprintf(f, "set logscale x 2\nset logscale y 10\nset grid xtics ytics "
               "mxtics mytics\nset format y '%%g'\n");
    fprintf(f,
            "set xlabel 'global batch size (log scale)'\n"
            "set ylabel 'steps to test top-1 %g%% (log scale)'\n",
            p->target);
    fprintf(f, "set key inside left bottom box opaque\nset xrange [%g:%g]\n",
            p->batch[0] / 1.3, p->batch[p->nbatches - 1] * 1.3);
    if (hi > 0)
        fprintf(f, "set yrange [%g:%g]\n", lo / 1.6,
                hi * (1.4 + 0.15 * p->nrecipes));
    int any = 0;
    for (int c = 0; c < p->nrecipes; c++)
        any |= s->reg[c].ref >= 0;
    if (!any) {
        /* Nothing reached the target: an empty frame that says so. gnuplot
         * refuses a plot with no defined point ("all points y value
         * undefined"), so it draws a constant above the frame. */
        fprintf(f, "unset key\nset yrange [1:10]\nset label 1 'no batch "
                   "reached the target' at graph 0.5,0.5 center\n"
                   "plot 1e6 notitle\n");
        return;
    }
    fprintf(f, "plot ");
    for (int c = 0, first = 1; c < p->nrecipes; c++) {
        if (s->reg[c].ref < 0)
            continue;
        fprintf(f, "%s", first ? "" : ", ");
        _plot_recipe(p, s, c, dir, f);
        first = 0;
    }
    fprintf(f, "\n");
}

/* Removes what _plot_data and tsweep_plot wrote into dir, and dir. */
static void _cleanup(const char *dir, int nrecipes)
{
    char path[600];
    for (int c = 0; c < nrecipes; c++)
        for (const char *k = "cplsm"; *k; k++) {
            snprintf(path, sizeof(path), "%s/%c%d", dir, *k, c);
            unlink(path);
        }
    snprintf(path, sizeof(path), "%s/plot.gp", dir);
    unlink(path);
    rmdir(dir);
}

/* Runs gnuplot on script; its messages go to stderr. */
static int _gnuplot(const char *script)
{
    pid_t pid;
    char *argv[] = {"gnuplot", (char *)script, NULL};
    int st, rc = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
    if (rc)
        return TORUS_FAIL(TSWEEP_EIO,
                          "cannot run gnuplot: %s (Debian: gnuplot-nox)",
                          strerror(rc));
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
        return TORUS_FAIL(TSWEEP_EIO, "gnuplot failed on %s", script);
    return 0;
}

int tsweep_plot(const tsweep_plan *p, const tsweep_summary *s, const char *png,
                int width, int height, const char *title)
{
    if (strpbrk(png, "'\n") || strpbrk(title, "'\n"))
        return TORUS_FAIL(TSWEEP_EPLAN, "the PNG path and title may hold no "
                                        "quote or newline");
    if (width < 200 || height < 150 || width > 8000 || height > 8000)
        return TORUS_FAIL(TSWEEP_EPLAN,
                          "--size %dx%d: not in 200x150.."
                          "8000x8000",
                          width, height);
    char dir[] = "/tmp/torus-sweep.XXXXXX", script[64];
    if (!mkdtemp(dir))
        return TORUS_FAIL(TSWEEP_EIO, "mkdtemp: %s", strerror(errno));
    int rc = 0;
    double lo = 0, hi = 0;
    _yrange(p, s, &lo, &hi);
    for (int c = 0; c < p->nrecipes && !rc; c++)
        if (s->reg[c].ref >= 0)
            rc = _plot_data(p, s, c, dir, hi * (1.2 + 0.15 * c));
    snprintf(script, sizeof(script), "%s/plot.gp", dir);
    FILE *f = rc ? NULL : fopen(script, "w");
    if (!rc && !f)
        rc = TORUS_FAIL(TSWEEP_EIO, "%s: %s", script, strerror(errno));
    if (f) {
        _plot_script(p, s, dir, png, width, height, title, f);
        fclose(f);
        rc = _gnuplot(script);
    }
    _cleanup(dir, p->nrecipes);
    return rc;
}
