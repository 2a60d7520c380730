/* checkpoint.c: HDF5 checkpoints (see ttrain_checkpoint.h): their I/O.
 * What the values must be (names, configuration, counters, position
 * against the plan) is ckpt_schema.c's; the tensors' checks are
 * data/format/ckpt.c's. */
#include "trainer/train/ttrain_checkpoint.h"
#include "trainer/train/ttrain_ckpt_schema.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "data/format/tdata_ckpt.h"
#include "data/format/tdata_format.h"
#include "data/format/tdata_h5attr.h"
#include "trainer/train/ttrain_options.h"

/* 2: the configuration record and the run id; samples over all ranks. */
#define _FORMAT "torus-checkpoint-2"
#define _CHUNK  ((hsize_t)1 << 18) /* floats per chunk (1 MiB) */

/* ---- small HDF5 helpers: scalar attributes and flat float datasets ---- */

/* Attributes go through data/format/tdata_h5attr.h, the checked readers
 * and matching writers every HDF5 file of torus shares. Their messages name
 * _WHAT; the callers here replace them with what failed for the user. */
#define _WHAT "checkpoint"

static int _put_i64(hid_t loc, const char *name, int64_t v)
{
    return tdata_h5_attr_write(loc, _WHAT, name, H5T_STD_I64LE,
                               H5T_NATIVE_INT64, &v, TDATA_H5_SCALAR);
}

static int _put_f64(hid_t loc, const char *name, double v)
{
    return tdata_h5_attr_write(loc, _WHAT, name, H5T_IEEE_F64LE,
                               H5T_NATIVE_DOUBLE, &v, TDATA_H5_SCALAR);
}

static int _put_str(hid_t loc, const char *name, const char *v)
{
    return tdata_h5_attr_write_str(loc, _WHAT, name, v);
}

/* One number (a scalar, or one element in one dimension) of the class of
 * the memory type: tdata_h5_attr_read checks class, rank and count first,
 * as a file is hostile until checked. */
static int _get_i64(hid_t loc, const char *name, int64_t *v)
{
    return tdata_h5_attr_read(loc, _WHAT, name, H5T_NATIVE_INT64, v, 1);
}

static int _get_f64(hid_t loc, const char *name, double *v)
{
    return tdata_h5_attr_read(loc, _WHAT, name, H5T_NATIVE_DOUBLE, v, 1);
}

/* A fixed-length string of fewer than n bytes into v, NUL-terminated. A
 * longer one is refused, not cut (a cut run id would name another run):
 * read into one byte more than v holds, what fills it is too long. */
static int _get_str(hid_t loc, const char *name, char *v, size_t n)
{
    char *buf = malloc(n + 1);
    int rc = !buf || tdata_h5_attr_str(loc, _WHAT, name, buf, n + 1) ||
                     strlen(buf) >= n
                 ? -1
                 : 0;
    if (!rc)
        memcpy(v, buf, strlen(buf) + 1);
    free(buf);
    return rc;
}

static int _put_floats(hid_t g, const char *name, const float *v, size_t n)
{
    hsize_t dims = n, chunk = n < _CHUNK ? n : _CHUNK;
    hid_t s = H5Screate_simple(1, &dims, NULL);
    hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    /* Chunked so that the Fletcher32 checksum can guard every chunk. */
    H5Pset_chunk(p, 1, &chunk);
    H5Pset_fletcher32(p);
    hid_t d =
        H5Dcreate2(g, name, H5T_IEEE_F32LE, s, H5P_DEFAULT, p, H5P_DEFAULT);
    herr_t rc =
        d < 0 ? -1
              : H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(p);
    H5Sclose(s);
    return rc < 0 ? -1 : 0;
}

/* ---- the checkpoint contents ---- */

/* The three groups of float datasets, one dataset a tensor. */
enum { _PARAMS, _MOMENTUM, _STATS, _NGROUPS };
static const char *const _group_names[_NGROUPS] = {"params", "momentum",
                                                   "bn_stats"};

/* Creates (create) or opens every group into g; -1 if any failed (the
 * others are open all the same: _close_groups closes what is). */
static int _groups(hid_t f, int create, hid_t g[_NGROUPS])
{
    int rc = 0;
    for (int i = 0; i < _NGROUPS; i++) {
        const char *n = _group_names[i];
        /* Opened through tdata_ckpt_group: hard links only (an external
         * link would read another file). */
        g[i] = create ? H5Gcreate2(f, n, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                      : tdata_ckpt_group(f, n);
        if (g[i] < 0)
            rc = -1;
    }
    return rc;
}

static void _close_groups(const hid_t g[_NGROUPS])
{
    for (int i = 0; i < _NGROUPS; i++)
        if (g[i] >= 0)
            H5Gclose(g[i]);
}

static int _write_attrs(hid_t f, const ttrain_ckpt_meta *m, topt_sgd *opt,
                        const ttrain_progress *p, const char *config_text)
{
    /* Samples over all ranks (the position on any number of ranks). */
    int64_t global = (int64_t)p->samples;
    return _put_str(f, "format", _FORMAT) ||
           _put_str(f, "run", m->run) ||
           _put_str(f, "model", m->model) ||
           _put_i64(f, "world", m->world) ||
           _put_str(f, "batch_schedule", m->batch) ||
           _put_str(f, "data", m->data) ||
           _put_str(f, "data_id", m->data_id) ||
           _put_str(f, "wire", m->wire) ||
           _put_str(f, "config", config_text) ||
           _put_i64(f, "epoch", p->epoch) ||
           _put_i64(f, "step", p->step) ||
           _put_i64(f, "global_step", p->global_step) ||
           _put_i64(f, "samples", global) ||
           _put_i64(f, "dropout_step", (int64_t)p->dropout_step) ||
           _put_i64(f, "optimizer_steps", opt->steps) ||
           _put_f64(f, "previous_lr", opt->prev_lr) ||
           _put_i64(f, "bucket_kb", m->bucket_kb) ||
           _put_i64(f, "data_order", 1) ||
           _put_str(f, "loss_scale_mode", m->loss_scale) ||
           _put_f64(f, "loss_scale", p->ls.scale) ||
           _put_i64(f, "loss_scale_clean", p->ls.clean) ||
           _put_i64(f, "loss_scale_overflows", p->ls.overflows);
}

static int _write(hid_t f, const ttrain_ckpt_meta *m, teng_net *net,
                  topt_sgd *opt, const ttrain_progress *p,
                  const char *config_text, float *buf)
{
    hid_t g[_NGROUPS];
    int rc = _groups(f, 1, g);
    hid_t gp = g[_PARAMS], gm = g[_MOMENTUM], gs = g[_STATS];
    /* The first attribute that fails names itself (tdata_h5attr.h);
     * _write_file adds HDF5's reason. */
    if (rc)
        rc = TORUS_FAIL(TTRAIN_CKPT_EBAD, "creating the checkpoint's groups");
    else if (_write_attrs(f, m, opt, p, config_text))
        rc = torus_error_prefix(TTRAIN_CKPT_EBAD,
                                "writing the checkpoint's attributes");
    for (int i = 0; i < teng_net_nparams(net) && !rc; i++) {
        const teng_param *prm = teng_net_param(net, i);
        const char *name = prm->name;
        if (teng_param_read(net, i, 0, buf) ||
            _put_floats(gp, name, buf, prm->count) ||
            topt_sgd_state_read(opt, i, buf) ||
            _put_floats(gm, name, buf, prm->count))
            rc = TORUS_FAIL(TTRAIN_CKPT_EBAD, "writing param %s", name);
    }
    for (int i = 0; i < teng_net_nstats(net) && !rc; i++) {
        char name[16];
        snprintf(name, sizeof(name), "%d", i);
        if (teng_stats_read(net, i, buf) ||
            _put_floats(gs, name, buf, teng_stats_count(net, i)))
            rc = TORUS_FAIL(TTRAIN_CKPT_EBAD, "writing BN statistics %d", i);
    }
    _close_groups(g);
    return rc;
}

/* What a file that is not a regular one is, for a message. */
static const char *_kind(mode_t m)
{
    return S_ISFIFO(m)   ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
           : S_ISDIR(m)  ? "a directory"
           : S_ISLNK(m)  ? "a dangling symbolic link"
                         : "not a regular file";
}

int ttrain_ckpt_open_regular(const char *path)
{
    struct stat st;
    /* A socket cannot be opened at all: say what it is before trying. */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "'%s' is %s, not a regular file",
                          path, _kind(st.st_mode));
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "cannot open '%s': %s", path,
                          strerror(errno));
    /* The name may have changed since the stat: the open file decides. */
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "'%s' is %s, not a regular file",
                          path, _kind(st.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int ttrain_ckpt_file_id(const char *path, uint64_t max_bytes, char *id,
                        size_t idlen)
{
    int fd = ttrain_ckpt_open_regular(path);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "'%s': %s", path, strerror(e));
    }
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "'%s' is %lld bytes, more than %" PRIu64, path,
                          (long long)st.st_size, max_bytes);
    }
    uint64_t h = 0xcbf29ce484222325ULL, total = 0;
    unsigned char buf[65536];
    ssize_t got;
    while ((got = read(fd, buf, sizeof(buf))) > 0)
        for (ssize_t i = 0; i < got; i++, total++)
            h = (h ^ buf[i]) * 0x100000001b3ULL;
    int e = errno;
    close(fd);
    if (got < 0)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "reading '%s': %s", path,
                          strerror(e));
    snprintf(id, idlen, "%" PRIu64 " bytes, fnv1a64 %016" PRIx64, total, h);
    return 0;
}

/* ---- saving ---- */

/* The first system error under a failed HDF5 call of a write (0: none).
 * HDF5 keeps errno only in its error stack's text ("errno = 28"), and the
 * next call clears the stack: so the stack's automatic handler, called at
 * every failing API call, keeps it. Under tdata_h5_lock. */
static int _h5_errno;
/* HDF5's own reason for the first failed call of a write: the innermost
 * entry of its stack ("" none), for failures without an errno (an
 * attribute too large for its object header). */
static char _h5_why[256];

/* The errno of one stack entry, 0 if none. HDF5's system-call entries end
 * "..., filename = '<path>', ..., errno = <n>, error message = '<strerror>'
 * ...": the path comes first and may itself hold "errno = ", strerror's
 * text never does, so the last "errno = " is HDF5's own. */
static int _entry_errno(const char *desc)
{
    const char *at = NULL;
    for (const char *s = desc; s && (s = strstr(s, "errno = ")); s++)
        at = s;
    if (!at || at[8] < '1' || at[8] > '9')
        return 0;
    long v = strtol(at + 8, NULL, 10);
    return v > 0 && v < 4096 ? (int)v : 0;
}

static herr_t _errno_of(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    if (!_h5_errno)
        _h5_errno = _entry_errno(e->desc);
    if (data && e->desc && e->desc[0]) /* walking down: the last one wins */
        snprintf(_h5_why, sizeof(_h5_why), "%s", e->desc);
    return 0;
}

static herr_t _on_h5_error(hid_t stack, void *data)
{
    (void)data;
    H5Ewalk2(stack, H5E_WALK_DOWNWARD, _errno_of,
             _h5_why[0] ? NULL : _h5_why);
    return 0;
}

/* A file whose close failed (its last flush: a full file system) stays
 * half-closed in HDF5, and HDF5 1.10.8 crashes on it in its exit handler
 * (H5F__close_cb under H5_term_library; a second H5Fclose crashes too).
 * Every file of ours is closed by its own code, so the library's exit
 * handler has nothing to do: it is turned off before HDF5 starts. */
__attribute__((constructor)) static void _no_h5_atexit(void)
{
    H5dont_atexit();
}

/* Writes the checkpoint into tmp (created afresh). A full file system or
 * quota is named as such (ENOSPC, EDQUOT: HDF5's own message names
 * neither). */
static int _write_file(const char *tmp, const ttrain_ckpt_meta *m,
                       teng_net *net, topt_sgd *opt, const ttrain_progress *p,
                       const char *config_text)
{
    float *buf = malloc(teng_net_largest_buffer(net) * sizeof(float));
    if (!buf)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "out of memory");
    /* HDF5 is not thread-safe here: the data loader's threads use it too
     * (data/format/tdata_h5attr.h). */
    tdata_h5_lock();
    _h5_errno = 0;
    _h5_why[0] = '\0';
    H5Eset_auto2(H5E_DEFAULT, _on_h5_error, NULL); /* reported here */
    /* Attributes in dense storage from the first one (the 1.8 format, read
     * by every HDF5 since 2008): the configuration record grows with the
     * epochs of the plan, and an object header holds no attribute of 64
     * KiB or more (--epochs 984 could not save). */
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fcpl >= 0 && fapl >= 0 &&
        (H5Pset_attr_phase_change(fcpl, 0, 0) < 0 ||
         H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST) < 0)) {
        H5Pclose(fcpl);
        fcpl = -1;
    }
    hid_t f = fcpl < 0 || fapl < 0 ? -1
                                   : H5Fcreate(tmp, H5F_ACC_EXCL, fcpl, fapl);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (fapl >= 0)
        H5Pclose(fapl);
    int rc = f < 0 ? TORUS_FAIL(TTRAIN_CKPT_EBAD, "cannot create '%s'", tmp)
                   : _write(f, m, net, opt, p, config_text, buf);
    if (f >= 0 && H5Fclose(f) < 0 && !rc)
        rc = TORUS_FAIL(TTRAIN_CKPT_EBAD, "closing '%s'", tmp);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int e = _h5_errno;
    tdata_h5_unlock();
    free(buf);
    if (rc && e)
        rc = torus_error_prefix(-1, "%s%s", strerror(e),
                                e == ENOSPC   ? " (ENOSPC)"
                                : e == EDQUOT ? " (EDQUOT)"
                                              : "");
    else if (rc && _h5_why[0]) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", torus_error_msg());
        rc = TORUS_FAIL(TTRAIN_CKPT_EBAD, "%s (HDF5: %s)", msg, _h5_why);
    }
    return rc;
}

int ttrain_ckpt_save(const char *dir, int keep, int rank,
                     const ttrain_ckpt_meta *m, teng_net *net, topt_sgd *opt,
                     const ttrain_progress *p, const char *config_text)
{
    char tmp[4096], path[4096];
    if (mkdir(dir, 0777) && errno != EEXIST)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "cannot create '%s': %s", dir,
                          strerror(errno));
    /* A name no other writer can pick: two jobs resuming one run, or a
     * rank 0 that lingers after its job was replaced, never write into
     * each other's file. */
    char salt[TTRAIN_RUN_LEN];
    ttrain_ckpt_new_run(salt);
    if (ttrain_ckpt_name(path, sizeof(path), dir, p->global_step, m->run))
        return TTRAIN_CKPT_EBAD;
    int len = snprintf(tmp, sizeof(tmp), "%s/.ckpt-%ld-%s.h5.%ld-%d-%s.tmp",
                       dir, p->global_step, m->run, (long)getpid(), rank, salt);
    if (len < 0 || (size_t)len >= sizeof(tmp))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "--checkpoint-dir '%s' is too long",
                          dir);
    int rc = _write_file(tmp, m, net, opt, p, config_text);
    /* Durable before visible: the data, then the name, then the dir
     * (libtdata's rule for every file it publishes). */
    int step = rc ? 0 : tdata_publish(tmp, path);
    if (step == TDATA_PUBLISH_SYNC)
        rc = TORUS_FAIL(TTRAIN_CKPT_EBAD, "fsync '%s': %s", tmp,
                        strerror(errno));
    else if (step == TDATA_PUBLISH_RENAME)
        rc = TORUS_FAIL(TTRAIN_CKPT_EBAD, "rename to '%s': %s", path,
                        strerror(errno));
    if (rc) {
        unlink(tmp);
        return rc;
    }
    if (step == TDATA_PUBLISH_DIRSYNC)
        return TORUS_FAIL(
            TTRAIN_CKPT_EBAD,
            "fsync of the directory '%s' after writing %s: %s (the "
            "checkpoint may not survive a crash)",
            dir, path, strerror(errno));
    ttrain_ckpt_prune(dir, m->run, p->global_step, keep);
    return 0;
}

/* ---- loading ---- */

static int _read_meta(hid_t f, ttrain_ckpt_meta *m)
{
    char format[64];
    int64_t world;
    if (_get_str(f, "format", format, sizeof(format)) ||
        strcmp(format, _FORMAT))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "not a %s checkpoint", _FORMAT);
    if (_get_str(f, "run", m->run, sizeof(m->run)) ||
        _get_str(f, "model", m->model, sizeof(m->model)) ||
        _get_i64(f, "world", &world) ||
        _get_str(f, "batch_schedule", m->batch, sizeof(m->batch)) ||
        _get_str(f, "data", m->data, sizeof(m->data)) ||
        _get_str(f, "data_id", m->data_id, sizeof(m->data_id)) ||
        _get_str(f, "wire", m->wire, sizeof(m->wire)))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "its configuration record is missing or malformed");
    /* Files written before loss scaling record no mode: "". */
    m->loss_scale[0] = '\0';
    m->plan = NULL;
    if (H5Aexists(f, "loss_scale_mode") > 0 &&
        _get_str(f, "loss_scale_mode", m->loss_scale, sizeof(m->loss_scale)))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "its loss-scale mode is malformed");
    if (world < 1 || world > 1 << 24)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "it records %" PRId64 " ranks",
                          world);
    m->world = (int)world;
    /* Files written before it record no bucket size: 0. A resume may
     * take the size, so it is held to what --bucket-kb accepts. */
    int64_t kb = 0;
    if (H5Aexists(f, "bucket_kb") > 0 && _get_i64(f, "bucket_kb", &kb))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "its bucket size is malformed");
    if (kb < 0 || kb > TTRAIN_BUCKET_KB_MAX)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "it records a bucket size of %" PRId64 " KiB (0..%d)",
                          kb, TTRAIN_BUCKET_KB_MAX);
    m->bucket_kb = (int)kb;
    /* Files written before the global-block order record none: 0. */
    int64_t order = 0;
    if (H5Aexists(f, "data_order") > 0 &&
        (_get_i64(f, "data_order", &order) || order < 0 || order > 1))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "its data order is malformed");
    m->data_order = (int)order;
    return 0;
}

/* The loss scale's state where the file records one (p->ls.scale stays 0
 * where it does not); its values are checked against this run's settings
 * by the caller (topt_loss_scale_restore), here only for their type. */
static int _read_loss_scale(hid_t f, ttrain_progress *p)
{
    int64_t clean, overflows;
    double scale;
    p->ls = (topt_loss_scale_state){0, 0, 0};
    if (H5Aexists(f, "loss_scale") <= 0)
        return 0;
    if (_get_f64(f, "loss_scale", &scale) ||
        _get_i64(f, "loss_scale_clean", &clean) ||
        _get_i64(f, "loss_scale_overflows", &overflows))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "its loss-scale state is malformed");
    if (clean < 0 || clean > LONG_MAX / 2 || overflows < 0 ||
        overflows > LONG_MAX / 2)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "its loss-scale counts are out of range");
    /* Every mode records a scale in [1, 2^24] (1 when off). */
    if (!(isfinite(scale) && scale >= 1 && scale <= 16777216.0))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                          "its loss scale %g is not finite in [1, 2^24]",
                          scale);
    p->ls = (topt_loss_scale_state){scale, (long)clean, (long)overflows};
    return 0;
}

/* The training position (its samples over all ranks), checked (_check_counts; _check_plan against want->plan unless
 * eval_only). */
static int _read_position(hid_t f, const ttrain_ckpt_meta *want, int eval_only,
                          ttrain_progress *p, topt_sgd *opt)
{
    int64_t v[6];
    double prev_lr;
    if (_get_i64(f, "epoch", &v[0]) || _get_i64(f, "step", &v[1]) ||
        _get_i64(f, "global_step", &v[2]) || _get_i64(f, "samples", &v[3]) ||
        _get_i64(f, "dropout_step", &v[4]) ||
        _get_i64(f, "optimizer_steps", &v[5]) ||
        _get_f64(f, "previous_lr", &prev_lr))
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "training position missing");
    for (int i = 0; i < 6; i++)
        if (v[i] < 0 || (i == 0 && v[i] > INT32_MAX))
            return TORUS_FAIL(TTRAIN_CKPT_EBAD,
                              "training position out of range");
    *p = (ttrain_progress){(int)v[0],      (long)v[1],
                           (long)v[2],     (uint64_t)v[3],
                           (uint64_t)v[4], {0, 0, 0}};
    opt->steps = (long)v[5];
    opt->prev_lr = prev_lr;
    if (_read_loss_scale(f, p) ||
        ttrain_ckpt_check_counts(p, opt->steps, prev_lr))
        return TTRAIN_CKPT_EBAD;
    return want->plan && !eval_only
               ? ttrain_ckpt_check_plan(p, v[3], want->plan)
               : 0;
}

/* One tensor of group g into buf: checked, read whole and checksummed,
 * then finite (NaN would pass through ReLU unseen and into the next
 * checkpoint) and, for a BN running variance, >= 0: tdata_ckpt_tensor,
 * the one validation the Python package shares. what/name name it in the
 * reason. */
static int _get_tensor(hid_t g, const char *dset, float *buf, size_t n,
                       int kind, const char *what, const char *name)
{
    char label[256];
    snprintf(label, sizeof(label), "%s %s", what, name);
    return tdata_ckpt_tensor(g, dset, label, n, kind, buf) ? TTRAIN_CKPT_EBAD
                                                           : 0;
}

/* Params, momentum and BN statistics. */
static int _read_state(hid_t f, teng_net *net, topt_sgd *opt)
{
    float *buf = malloc(teng_net_largest_buffer(net) * sizeof(float));
    if (!buf)
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "out of memory");
    hid_t g[_NGROUPS];
    /* tdata_ckpt_group said which group is missing or a link. */
    int rc = _groups(f, 0, g) ? TTRAIN_CKPT_EBAD : 0;
    hid_t gp = g[_PARAMS], gm = g[_MOMENTUM], gs = g[_STATS];
    for (int i = 0; i < teng_net_nparams(net) && !rc; i++) {
        const teng_param *prm = teng_net_param(net, i);
        rc = _get_tensor(gp, prm->name, buf, prm->count, TDATA_CKPT_VALUES,
                         "param", prm->name);
        if (!rc && teng_param_write(net, i, 0, buf))
            rc = TORUS_FAIL(TTRAIN_CKPT_EBAD, "param %s cannot be set",
                            prm->name);
        if (!rc)
            rc = _get_tensor(gm, prm->name, buf, prm->count, TDATA_CKPT_VALUES,
                             "the momentum of param", prm->name);
        if (!rc && topt_sgd_state_write(opt, i, buf))
            rc = TORUS_FAIL(TTRAIN_CKPT_EBAD,
                            "the momentum of %s cannot be set", prm->name);
    }
    for (int i = 0; i < teng_net_nstats(net) && !rc; i++) {
        char name[16];
        snprintf(name, sizeof(name), "%d", i);
        /* BN layer k's statistics are 2k (mean) and 2k+1 (variance). */
        rc = _get_tensor(gs, name, buf, teng_stats_count(net, i),
                         i % 2 ? TDATA_CKPT_VARIANCE : TDATA_CKPT_VALUES,
                         "BN statistics", name);
        if (!rc && teng_stats_write(net, i, buf))
            rc = TORUS_FAIL(TTRAIN_CKPT_EBAD, "BN statistics %d cannot be set",
                            i);
    }
    _close_groups(g);
    free(buf);
    return rc;
}

/* Opens path, a regular file (ttrain_ckpt_open_regular), for HDF5
 * through its descriptor, so that what HDF5 opens is the file checked;
 * *fd is to be closed after H5Fclose. -1 after TORUS_FAIL. Under
 * tdata_h5_lock. */
static hid_t _open_h5(const char *path, int *fd)
{
    char self[64];
    if ((*fd = ttrain_ckpt_open_regular(path)) < 0)
        return -1;
    snprintf(self, sizeof(self), "/proc/self/fd/%d", *fd);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f =
        H5Fopen(access(self, F_OK) ? path : self, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        close(*fd);
        return TORUS_FAIL(TTRAIN_CKPT_EBAD, "not a readable HDF5 file");
    }
    return f;
}

/* ttrain_ckpt_load, and *claimed: the file's record reads, with the run id
 * of its name (it is that run's checkpoint, whatever else is wrong). */
static int _load(const char *path, const ttrain_ckpt_meta *want, int eval_only,
                 teng_net *net, topt_sgd *opt, ttrain_progress *p,
                 ttrain_ckpt_meta *got, char *note, size_t notelen,
                 int *claimed)
{
    const char *base = strrchr(path, '/');
    char run[TTRAIN_RUN_LEN];
    long step;
    int named = !ttrain_ckpt_parse_name(base ? base + 1 : path, &step, run), fd;
    note[0] = '\0';
    *claimed = 0;
    tdata_h5_lock(); /* shared with the data loader's threads */
    hid_t f = _open_h5(path, &fd);
    if (f < 0) {
        tdata_h5_unlock();
        return -1;
    }
    int rc = _read_meta(f, got);
    if (!rc && named && strcmp(got->run, run))
        rc = TORUS_FAIL(TTRAIN_CKPT_EBAD,
                        "it records run %s, not the %s of its name", got->run,
                        run);
    *claimed = !rc;
    if (!rc && ttrain_ckpt_check(got, want, eval_only, teng_net_nstats(net) > 0,
                                 note, notelen))
        rc = TTRAIN_CKPT_ECONFIG;
    if (!rc)
        rc = _read_position(f, want, eval_only, p, opt);
    if (!rc && named && p->global_step != step)
        rc = TORUS_FAIL(TTRAIN_CKPT_EBAD,
                        "it records global step %ld, not the %ld of its "
                        "name",
                        p->global_step, step);
    if (!rc)
        rc = _read_state(f, net, opt);
    H5Fclose(f);
    tdata_h5_unlock();
    close(fd);
    return rc;
}

int ttrain_ckpt_load(const char *path, const ttrain_ckpt_meta *want,
                     int eval_only, teng_net *net, topt_sgd *opt,
                     ttrain_progress *p, ttrain_ckpt_meta *got, char *note,
                     size_t notelen)
{
    int claimed;
    return _load(path, want, eval_only, net, opt, p, got, note, notelen,
                 &claimed);
}

/* The run of the file written last (by modification time) among v's
 * files of runs not tried yet (run ""); NULL when none is left. */
static const char *_latest_run(const ttrain_ckpt_entry *v, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (v[i].run[0] &&
            (best < 0 || v[i].mtime.tv_sec > v[best].mtime.tv_sec ||
             (v[i].mtime.tv_sec == v[best].mtime.tv_sec &&
              v[i].mtime.tv_nsec > v[best].mtime.tv_nsec)))
            best = i;
    return best < 0 ? NULL : v[best].run;
}

/* The argument list of load_latest, passed on whole. */
typedef struct {
    const ttrain_ckpt_meta *want;
    int eval_only;
    teng_net *net;
    topt_sgd *opt;
    ttrain_progress *p;
    ttrain_ckpt_meta *got;
    char *name, *note;
    size_t namelen, notelen;
} _want;

/* Run's checkpoints in dir, newest first, until one loads: 0 (a->name
 * set), -1 (none; *claimed: one of them read as the run's own, the
 * message is then set) or -2 (another configuration). */
static int _load_run(const char *dir, const char *run, const _want *a,
                     int *claimed)
{
    ttrain_ckpt_entry *v;
    char path[4096];
    int n = ttrain_ckpt_list(dir, run, 1, &v), rc = -1, mine;
    *claimed = 0;
    for (int i = 0; i < n && rc == -1; i++) {
        if (ttrain_ckpt_name(path, sizeof(path), dir, v[i].step, run))
            break;
        rc = _load(path, a->want, a->eval_only, a->net, a->opt, a->p, a->got,
                   a->note, a->notelen, &mine);
        *claimed |= mine;
        if (rc == -1)
            torus_warn("checkpoint %s does not load (%s)%s", path,
                       torus_error_msg(),
                       i + 1 < n ? "; trying the one before it" : "");
        else if (rc == TTRAIN_CKPT_ECONFIG)
            torus_error_prefix(rc, "%s", path);
        else
            ttrain_ckpt_name(a->name, a->namelen, NULL, v[i].step, run);
    }
    free(v);
    if (rc == -1 && *claimed)
        TORUS_FAIL(TTRAIN_CKPT_EBAD,
                   "none of the %d checkpoints of run %s in '%s' loads", n, run,
                   dir);
    return rc;
}

int ttrain_ckpt_load_latest(const char *dir, const ttrain_ckpt_meta *want,
                            int eval_only, teng_net *net, topt_sgd *opt,
                            ttrain_progress *p, ttrain_ckpt_meta *got,
                            char *name, size_t namelen, char *note,
                            size_t notelen)
{
    _want a = {want, eval_only, net, opt, p, got, name, note, namelen, notelen};
    ttrain_ckpt_entry *all;
    int nall = ttrain_ckpt_list(dir, NULL, 1, &all), rc = -1, claimed = 0;
    const char *latest;
    if (!nall)
        return 1;
    /* Runs by their newest file; a run none of whose files is its own
     * checkpoint (junk under its name) is passed over. */
    while (rc == -1 && !claimed && (latest = _latest_run(all, nall))) {
        char run[TTRAIN_RUN_LEN];
        snprintf(run, sizeof(run), "%s", latest);
        for (int i = 0; i < nall; i++)
            if (!strcmp(all[i].run, run))
                all[i].run[0] = '\0';
        rc = _load_run(dir, run, &a, &claimed);
        if (rc == -1 && !claimed)
            torus_warn("no file named for run %s in '%s' reads as a "
                       "checkpoint of that run; passing them over",
                       run, dir);
    }
    free(all);
    if (rc == -1 && !claimed)
        TORUS_FAIL(TTRAIN_CKPT_EBAD,
                   "none of the %d checkpoints in '%s' loads (none reads as a "
                   "checkpoint of the run its name gives)",
                   nall, dir);
    return rc;
}
