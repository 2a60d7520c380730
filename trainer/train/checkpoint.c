/* checkpoint.c: HDF5 checkpoints (see checkpoint.h). */
#include "trainer/train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define _FORMAT "torus-checkpoint-1"
#define _CHUNK  ((hsize_t)1 << 18) /* floats per chunk (1 MiB) */

static int _err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- small HDF5 helpers: scalar attributes and flat float datasets ---- */

/* A scalar attribute of file type ft from memory type mt. */
static int _put_attr(hid_t loc, const char *name, hid_t ft, hid_t mt,
                     const void *v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, ft, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, mt, v);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(s);
    return rc < 0 ? -1 : 0;
}

static int _put_i64(hid_t loc, const char *name, int64_t v)
{
    return _put_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

static int _put_f64(hid_t loc, const char *name, double v)
{
    return _put_attr(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

static int _put_str(hid_t loc, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v) + 1);
    int rc = _put_attr(loc, name, t, t, v);
    H5Tclose(t);
    return rc;
}

static int _get_attr(hid_t loc, const char *name, hid_t mt, void *v)
{
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Aread(a, mt, v);
    if (a >= 0)
        H5Aclose(a);
    return rc < 0 ? -1 : 0;
}

static int _get_i64(hid_t loc, const char *name, int64_t *v)
{
    return _get_attr(loc, name, H5T_NATIVE_INT64, v);
}

static int _get_f64(hid_t loc, const char *name, double *v)
{
    return _get_attr(loc, name, H5T_NATIVE_DOUBLE, v);
}

static int _get_str(hid_t loc, const char *name, char *v, size_t n)
{
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    hid_t ft = H5Aget_type(a);
    size_t sz = H5Tget_size(ft);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, sz);
    char *buf = malloc(sz + 1);
    herr_t rc = buf ? H5Aread(a, t, buf) : -1;
    if (rc >= 0) {
        buf[sz] = '\0';
        snprintf(v, n, "%s", buf);
    }
    free(buf);
    H5Tclose(t);
    H5Tclose(ft);
    H5Aclose(a);
    return rc < 0 ? -1 : 0;
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

/* Reads dataset name of exactly n floats; -1 if missing, of another
 * size, or failing its checksum. */
static int _get_floats(hid_t g, const char *name, float *v, size_t n)
{
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    if (d < 0)
        return -1;
    hid_t s = H5Dget_space(d);
    hssize_t have = H5Sget_simple_extent_npoints(s);
    herr_t rc = have == (hssize_t)n ? H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL,
                                              H5S_ALL, H5P_DEFAULT, v)
                                    : -1;
    H5Sclose(s);
    H5Dclose(d);
    return rc < 0 ? -1 : 0;
}

/* ---- the checkpoint contents ---- */

static int _write(hid_t f, teng_net *net, topt_sgd *opt,
                  const ttrain_progress *p, const char *model,
                  const char *config_text, float *buf, char *err, size_t errlen)
{
    hid_t gp = H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t gm = H5Gcreate2(f, "momentum", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t gs = H5Gcreate2(f, "bn_stats", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = gp < 0 || gm < 0 || gs < 0 ? -1 : 0;
    rc = rc ? rc
            : _put_str(f, "format", _FORMAT) | _put_str(f, "model", model) |
                  _put_str(f, "config", config_text) |
                  _put_i64(f, "epoch", p->epoch) |
                  _put_i64(f, "step", p->step) |
                  _put_i64(f, "global_step", p->global_step) |
                  _put_i64(f, "samples", (int64_t)p->samples) |
                  _put_i64(f, "dropout_step", (int64_t)p->dropout_step) |
                  _put_i64(f, "optimizer_steps", opt->steps) |
                  _put_f64(f, "previous_lr", opt->prev_lr);
    if (rc)
        _err(err, errlen, "writing the checkpoint's attributes");
    for (int i = 0; i < teng_net_nparams(net) && !rc; i++) {
        const teng_param *prm = teng_net_param(net, i);
        const char *name = prm->name;
        if (teng_param_read(net, i, 0, buf) ||
            _put_floats(gp, name, buf, prm->count) ||
            topt_sgd_state_read(opt, i, buf) ||
            _put_floats(gm, name, buf, prm->count))
            rc = _err(err, errlen, "writing param %s", name);
    }
    for (int i = 0; i < teng_net_nstats(net) && !rc; i++) {
        char name[16];
        snprintf(name, sizeof(name), "%d", i);
        if (teng_stats_read(net, i, buf) ||
            _put_floats(gs, name, buf, teng_stats_count(net, i)))
            rc = _err(err, errlen, "writing BN statistics %d", i);
    }
    if (gp >= 0)
        H5Gclose(gp);
    if (gm >= 0)
        H5Gclose(gm);
    if (gs >= 0)
        H5Gclose(gs);
    return rc;
}

/* fsync of a path (file or directory); 0 or -1. */
static int _fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Steps of the checkpoints in dir, newest first; returns the count (0 when
 * dir does not exist) and a malloc'd array in *out. */
static int _list(const char *dir, long **out)
{
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    long *v = NULL;
    *out = NULL;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));) {
        long s;
        char tail[8];
        if (sscanf(e->d_name, "ckpt-%ld.h5%7s", &s, tail) != 1 || s < 0)
            continue;
        if (n == cap) {
            long *nv =
                realloc(v, sizeof(long) * (size_t)(cap = cap ? 2 * cap : 16));
            if (!nv)
                break;
            v = nv;
        }
        v[n++] = s;
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* newest first */
        for (int j = i; j > 0 && v[j] > v[j - 1]; j--) {
            long t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    *out = v;
    return n;
}

int ttrain_ckpt_save(const char *dir, int keep, teng_net *net, topt_sgd *opt,
                     const ttrain_progress *p, const char *model,
                     const char *config_text, char *err, size_t errlen)
{
    char tmp[4096], path[4096];
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported here */
    if (mkdir(dir, 0777) && errno != EEXIST)
        return _err(err, errlen, "cannot create '%s': %s", dir,
                    strerror(errno));
    snprintf(path, sizeof(path), "%s/ckpt-%ld.h5", dir, p->global_step);
    snprintf(tmp, sizeof(tmp), "%s/.ckpt-%ld.h5.tmp", dir, p->global_step);
    float *buf = malloc(teng_net_largest_buffer(net) * sizeof(float));
    if (!buf)
        return _err(err, errlen, "out of memory");
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int rc = f < 0
                 ? _err(err, errlen, "cannot create '%s'", tmp)
                 : _write(f, net, opt, p, model, config_text, buf, err, errlen);
    if (f >= 0 && H5Fclose(f) < 0 && !rc)
        rc = _err(err, errlen, "closing '%s'", tmp);
    free(buf);
    /* Durable before visible: the data, then the name, then the dir. */
    if (!rc && _fsync_path(tmp))
        rc = _err(err, errlen, "fsync '%s': %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path))
        rc = _err(err, errlen, "rename to '%s': %s", path, strerror(errno));
    if (!rc)
        _fsync_path(dir);
    if (rc) {
        unlink(tmp);
        return rc;
    }
    long *steps;
    int n = _list(dir, &steps);
    for (int i = keep > 0 ? keep : 1; i < n; i++) {
        snprintf(path, sizeof(path), "%s/ckpt-%ld.h5", dir, steps[i]);
        unlink(path);
    }
    free(steps);
    return 0;
}

int ttrain_ckpt_load(const char *path, teng_net *net, topt_sgd *opt,
                     ttrain_progress *p, const char *model, char *err,
                     size_t errlen)
{
    char text[64];
    int64_t v[7];
    double prev_lr;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return _err(err, errlen, "not a readable HDF5 file");
    int rc = 0;
    if (_get_str(f, "format", text, sizeof(text)) || strcmp(text, _FORMAT))
        rc = _err(err, errlen, "not a torus checkpoint");
    else if (_get_str(f, "model", text, sizeof(text)) || strcmp(text, model))
        rc = _err(err, errlen, "it holds model '%s', not '%s'", text, model);
    else if (_get_i64(f, "epoch", &v[0]) || _get_i64(f, "step", &v[1]) ||
             _get_i64(f, "global_step", &v[2]) ||
             _get_i64(f, "samples", &v[3]) ||
             _get_i64(f, "dropout_step", &v[4]) ||
             _get_i64(f, "optimizer_steps", &v[5]) ||
             _get_f64(f, "previous_lr", &prev_lr))
        rc = _err(err, errlen, "training position missing");
    float *buf =
        rc ? NULL : malloc(teng_net_largest_buffer(net) * sizeof(float));
    if (!rc && !buf)
        rc = _err(err, errlen, "out of memory");
    hid_t gp = rc ? -1 : H5Gopen2(f, "params", H5P_DEFAULT);
    hid_t gm = rc ? -1 : H5Gopen2(f, "momentum", H5P_DEFAULT);
    hid_t gs = rc ? -1 : H5Gopen2(f, "bn_stats", H5P_DEFAULT);
    if (!rc && (gp < 0 || gm < 0 || gs < 0))
        rc = _err(err, errlen, "groups missing");
    for (int i = 0; i < teng_net_nparams(net) && !rc; i++) {
        const teng_param *prm = teng_net_param(net, i);
        const char *name = prm->name;
        if (_get_floats(gp, name, buf, prm->count) ||
            teng_param_write(net, i, 0, buf) ||
            _get_floats(gm, name, buf, prm->count) ||
            topt_sgd_state_write(opt, i, buf))
            rc = _err(err, errlen,
                      "param %s is missing, of another shape, "
                      "or fails its checksum",
                      name);
    }
    for (int i = 0; i < teng_net_nstats(net) && !rc; i++) {
        char name[16];
        snprintf(name, sizeof(name), "%d", i);
        if (_get_floats(gs, name, buf, teng_stats_count(net, i)) ||
            teng_stats_write(net, i, buf))
            rc = _err(err, errlen, "BN statistics %d missing or damaged", i);
    }
    if (!rc) {
        *p = (ttrain_progress){(int)v[0], (long)v[1], (long)v[2],
                               (uint64_t)v[3], (uint64_t)v[4]};
        opt->steps = (long)v[5];
        opt->prev_lr = prev_lr;
    }
    if (gp >= 0)
        H5Gclose(gp);
    if (gm >= 0)
        H5Gclose(gm);
    if (gs >= 0)
        H5Gclose(gs);
    free(buf);
    H5Fclose(f);
    return rc;
}

int ttrain_ckpt_load_latest(const char *dir, teng_net *net, topt_sgd *opt,
                            ttrain_progress *p, const char *model, char *path,
                            size_t pathlen, char *err, size_t errlen)
{
    long *steps;
    int n = _list(dir, &steps);
    char why[256];
    if (!n)
        return 1;
    for (int i = 0; i < n; i++) {
        snprintf(path, pathlen, "%s/ckpt-%ld.h5", dir, steps[i]);
        if (!ttrain_ckpt_load(path, net, opt, p, model, why, sizeof(why))) {
            free(steps);
            return 0;
        }
        fprintf(stderr,
                "torus-train: warning: checkpoint %s does not load "
                "(%s)%s\n",
                path, why, i + 1 < n ? "; trying the one before it" : "");
    }
    free(steps);
    return _err(err, errlen, "none of the %d checkpoints in '%s' loads", n,
                dir);
}
