/* train/metrics.c: the --metrics records (see ttrain_metrics.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_metrics.h"

int ttrain_metrics_open(const char *path, int rank, FILE **out)
{
    *out = NULL;
    if (!path[0] || rank != 0)
        return 0;
    if (!(*out = fopen(path, "a")))
        return TORUS_FAIL(TTRAIN_EIO,
                          "--metrics: cannot open %s for "
                          "appending: %s",
                          path, strerror(errno));
    return 0;
}

void ttrain_metrics_step(FILE *f, const ttrain_metrics_progress *p)
{
    if (!f)
        return;
    char l[32] = "null";
    if (isfinite(p->loss))
        snprintf(l, sizeof(l), "%.17g", p->loss);
    fprintf(f,
            "{\"epoch\":%d,\"step\":%ld,\"global_step\":%ld,"
            "\"images_per_s\":%.3f,\"loss\":%s,\"lr\":%.17g,"
            "\"global_batch\":%d,\"data_wait\":%.4f,\"comm_wait\":%.4f}\n",
            p->epoch, p->step, p->global_step, p->images_per_s, l, p->lr,
            p->global_batch, p->data_wait, p->comm_wait);
    fflush(f);
}

void ttrain_metrics_eval(FILE *f, int epoch, long gstep, double top1,
                         double top5, double loss, double t)
{
    if (!f)
        return;
    fprintf(f,
            "{\"epoch\":%d,\"global_step\":%ld,\"top1\":%.4f,"
            "\"top5\":%.4f,\"test_loss\":%.6f,\"time\":%.3f}\n",
            epoch, gstep, top1, top5, loss, t);
    fflush(f);
}

void ttrain_metrics_target(FILE *f, double target, long gstep, double top1,
                           double t)
{
    if (!f)
        return;
    fprintf(f,
            "{\"target_top1\":%.4f,\"global_step\":%ld,\"top1\":%.4f,"
            "\"time\":%.3f}\n",
            target, gstep, top1, t);
    fflush(f);
}

void ttrain_metrics_diverged(FILE *f, long gstep)
{
    if (!f)
        return;
    fprintf(f, "{\"diverged\":1,\"global_step\":%ld}\n", gstep);
    fflush(f);
}

void ttrain_metrics_close(FILE *f)
{
    if (f)
        fclose(f);
}
