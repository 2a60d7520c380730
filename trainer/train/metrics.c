/* train/metrics.c: the --metrics records (see ttrain_metrics.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/torus_error.h"
#include "common/torus_json.h"
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

/* Each record is one json-c object written as one line; the numbers keep
 * the decimals they always had (torus-plot, torus-sweep and the tests read
 * them). A failed write does not stop the training: the records report
 * progress, the checkpoints hold the state. */
static void _emit(FILE *f, json_object *o)
{
    (void)torus_json_write_line(f, o);
    fflush(f);
}

void ttrain_metrics_step(FILE *f, const ttrain_metrics_progress *p)
{
    if (!f)
        return;
    json_object *o = json_object_new_object();
    torus_json_int64(o, "epoch", p->epoch);
    torus_json_int64(o, "step", p->step);
    torus_json_int64(o, "global_step", p->global_step);
    torus_json_fixed(o, "images_per_s", p->images_per_s, 3);
    torus_json_exact(o, "loss", p->loss); /* null once it is not finite */
    torus_json_exact(o, "lr", p->lr);
    torus_json_int64(o, "global_batch", p->global_batch);
    torus_json_fixed(o, "data_wait", p->data_wait, 4);
    torus_json_fixed(o, "comm_wait", p->comm_wait, 4);
    _emit(f, o);
}

void ttrain_metrics_eval(FILE *f, int epoch, long gstep, double top1,
                         double top5, double loss, double t)
{
    if (!f)
        return;
    json_object *o = json_object_new_object();
    torus_json_int64(o, "epoch", epoch);
    torus_json_int64(o, "global_step", gstep);
    torus_json_fixed(o, "top1", top1, 4);
    torus_json_fixed(o, "top5", top5, 4);
    torus_json_fixed(o, "test_loss", loss, 6);
    torus_json_fixed(o, "time", t, 3);
    _emit(f, o);
}

void ttrain_metrics_target(FILE *f, double target, long gstep, double top1,
                           double t)
{
    if (!f)
        return;
    json_object *o = json_object_new_object();
    torus_json_fixed(o, "target_top1", target, 4);
    torus_json_int64(o, "global_step", gstep);
    torus_json_fixed(o, "top1", top1, 4);
    torus_json_fixed(o, "time", t, 3);
    _emit(f, o);
}

void ttrain_metrics_diverged(FILE *f, long gstep)
{
    if (!f)
        return;
    json_object *o = json_object_new_object();
    torus_json_int64(o, "diverged", 1);
    torus_json_int64(o, "global_step", gstep);
    _emit(f, o);
}

void ttrain_metrics_close(FILE *f)
{
    if (f)
        fclose(f);
}
