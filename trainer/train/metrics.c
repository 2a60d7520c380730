/* train/metrics.c: the --metrics records (see ttrain_metrics.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* A record's line is far shorter (about 250 bytes); a longer one is not
 * ours. */
#define _LINE_CAP 65536

/* Copies in's records at or before global step `at` to out, line by line
 * and byte for byte; those past it are counted in *dropped. A record
 * without a global_step is kept; one whose global_step is not an integer,
 * and a line that is not a JSON object, are errors naming path:line. A
 * last line without its newline is the write a crash cut short (rank 0
 * writes a record and its newline at once, so only the end can be cut):
 * it is dropped too, else the run that crashed could not resume. */
static int _copy_kept(FILE *in, FILE *out, const char *path, long at,
                      long *dropped)
{
    char *buf = malloc(_LINE_CAP + 1);
    long line = 0;
    int rc = 0;
    if (!buf)
        return TORUS_FAIL(TTRAIN_ENOMEM, "--metrics: out of memory");
    for (;;) {
        torus_json_rec rec;
        long long g = 0;
        int jr = torus_json_read_line(in, path, &line, buf, _LINE_CAP, &rec);
        if (jr)
            torus_json_rec_free(&rec);
        if (jr && jr != TORUS_JSON_EIO && feof(in)) {
            ++*dropped; /* the cut last line */
            break;
        }
        if (jr) {
            rc = torus_error_prefix(
                jr == TORUS_JSON_EIO ? TTRAIN_EIO : TTRAIN_EFORMAT, "--metrics");
            break;
        }
        if (!rec.obj)
            break;
        if (torus_json_has(&rec, "global_step") &&
            torus_json_int(&rec, "global_step", 0, LONG_MAX, &g))
            rc = torus_error_prefix(TTRAIN_EFORMAT, "--metrics");
        torus_json_rec_free(&rec);
        if (rc)
            break;
        if (g > at)
            ++*dropped;
        else if (fprintf(out, "%s\n", buf) < 0)
            rc = TORUS_FAIL(TTRAIN_EIO,
                            "--metrics: cannot write the trimmed copy of "
                            "%s: %s",
                            path, strerror(errno));
        if (rc)
            break;
    }
    free(buf);
    return rc;
}

/* The kept lines, on disk, then in path's place (same folder: rename is
 * atomic), with path's permissions. */
static int _replace(FILE *out, const char *tmp, const char *path,
                    mode_t mode)
{
    int bad = fflush(out) || fchmod(fileno(out), mode) ||
              fsync(fileno(out));
    if (fclose(out) || bad)
        return TORUS_FAIL(TTRAIN_EIO, "--metrics: cannot write %s: %s", tmp,
                          strerror(errno));
    if (rename(tmp, path))
        return TORUS_FAIL(TTRAIN_EIO, "--metrics: cannot rename %s to %s: %s",
                          tmp, path, strerror(errno));
    return 0;
}

/* A temporary file beside real (the metrics file, a symlink resolved:
 * the link stays a link, its target is trimmed), under a name of its own
 * (mkstemp: never a file of the user's, such as FILE.tmp): *out, and its
 * name in tmp. */
static int _open_tmp(const char *real, char *tmp, size_t n, FILE **out)
{
    *out = NULL;
    if ((size_t)snprintf(tmp, n, "%s.trim.XXXXXX", real) >= n)
        return TORUS_FAIL(TTRAIN_EIO, "--metrics: path too long: %s", real);
    int fd = mkstemp(tmp);
    if (fd >= 0 && !(*out = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
    }
    if (!*out)
        return TORUS_FAIL(TTRAIN_EIO, "--metrics: cannot create %s: %s", tmp,
                          strerror(errno));
    return 0;
}

int ttrain_metrics_trim(const char *path, long at, long *dropped)
{
    char real[PATH_MAX], tmp[PATH_MAX + 16];
    struct stat st;
    FILE *in = NULL, *out = NULL;
    *dropped = 0;
    /* Resolved once, before reading: what is read is what is replaced. */
    if (!realpath(path, real) || !(in = fopen(real, "r")))
        return errno == ENOENT ? 0
                               : TORUS_FAIL(TTRAIN_EIO,
                                            "--metrics: cannot read %s: %s",
                                            path, strerror(errno));
    int rc = fstat(fileno(in), &st)
                 ? TORUS_FAIL(TTRAIN_EIO, "--metrics: cannot stat %s: %s",
                              path, strerror(errno))
                 : _open_tmp(real, tmp, sizeof(tmp), &out);
    if (!rc)
        rc = _copy_kept(in, out, path, at, dropped);
    fclose(in);
    if (!out)
        return rc;
    if (rc || !*dropped) { /* nothing dropped: the file stays as it is */
        fclose(out);
        unlink(tmp);
        return rc;
    }
    if ((rc = _replace(out, tmp, real, st.st_mode & 07777)))
        unlink(tmp);
    return rc;
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
