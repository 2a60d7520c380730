/* format/ckpt.c: checkpoint file names and tensor validation, shared by
 * the trainer's checkpoint module and the Python package (see
 * tdata_ckpt.h). */
#include "data/format/tdata_ckpt.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/torus_error.h"
#include "data/format/tdata_h5attr.h"

int tdata_ckpt_name(char *out, size_t n, const char *dir, int64_t step,
                    const char *run)
{
    const char *d = dir ? dir : "";
    size_t len = strlen(d);
    if (n)
        out[0] = '\0';
    for (int i = 0; i < TDATA_CKPT_RUN_CHARS; i++)
        if (!run || !((run[i] >= '0' && run[i] <= '9') ||
                      (run[i] >= 'a' && run[i] <= 'f')))
            return TORUS_FAIL(TDATA_EINVAL,
                              "run id '%s' for a checkpoint in '%s' is not %d "
                              "lowercase hex digits",
                              run ? run : "(none)", d, TDATA_CKPT_RUN_CHARS);
    if (run[TDATA_CKPT_RUN_CHARS] != '\0')
        return TORUS_FAIL(TDATA_EINVAL, "run id '%s' is longer than %d digits",
                          run, TDATA_CKPT_RUN_CHARS);
    if (step < 0)
        return TORUS_FAIL(TDATA_EINVAL,
                          "global step %" PRId64 " of a checkpoint in '%s' "
                          "is negative",
                          step, d);
    /* "run/" and "run" name one folder: one slash between it and the
     * name, whatever the user typed ("/" keeps its own). */
    while (len > 1 && d[len - 1] == '/')
        len--;
    int got = snprintf(out, n, "%.*s%sckpt-%" PRId64 "-%s.h5", (int)len, d,
                       len && d[len - 1] != '/' ? "/" : "", step, run);
    if (got < 0 || (size_t)got >= n)
        return TORUS_FAIL(TDATA_EINVAL, "the folder name '%s' is too long", d);
    return TDATA_OK;
}

/* Whether NAME in LOC is a hard link (1), not one (0), or absent (-1). */
static int _hard(hid_t loc, const char *name)
{
    H5L_info_t li;
    if (H5Lexists(loc, name, H5P_DEFAULT) <= 0 ||
        H5Lget_info(loc, name, &li, H5P_DEFAULT) < 0)
        return -1;
    return li.type == H5L_TYPE_HARD;
}

hid_t tdata_ckpt_group(hid_t loc, const char *name)
{
    tdata_h5_lock();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int hard = _hard(loc, name);
    hid_t g = hard == 1 ? H5Gopen2(loc, name, H5P_DEFAULT) : -1;
    tdata_h5_unlock();
    if (hard == 0)
        TORUS_FAIL(TDATA_EFORMAT,
                   "group %s is a soft or external link (it could name "
                   "another file)",
                   name);
    else if (g < 0)
        TORUS_FAIL(TDATA_EFORMAT, "group %s is missing", name);
    return g;
}

/* The element type, the shape and the storage of dataset d against COUNT
 * floats stored in this file. */
static int _check_shape(hid_t d, const char *label, uint64_t count)
{
    hid_t t = H5Dget_type(d), s = H5Dget_space(d);
    int fl = t >= 0 && H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 4;
    int rank = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    hssize_t have = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
    if (t >= 0)
        H5Tclose(t);
    if (s >= 0)
        H5Sclose(s);
    if (!fl)
        return TORUS_FAIL(TDATA_EFORMAT, "%s is not of 4-byte floats", label);
    if (rank != 1 || have < 0 || (uint64_t)have != count)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s holds %lld values in %d dimension(s), the model "
                          "needs %" PRIu64 " in one",
                          label, (long long)have, rank, count);
    /* All its bytes in this file: a count is then bounded by the file's
     * size before any reader allocates for it. */
    if (count > UINT64_MAX / 4 || H5Dget_storage_size(d) < count * 4)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s stores %llu bytes, fewer than its %" PRIu64
                          " floats",
                          label, (unsigned long long)H5Dget_storage_size(d),
                          count);
    return TDATA_OK;
}

/* The storage: chunked or contiguous in this file, no external file, no
 * filter but Fletcher32. */
static int _check_storage(hid_t d, const char *label)
{
    hid_t p = H5Dget_create_plist(d);
    if (p < 0)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: its storage is unreadable",
                          label);
    H5D_layout_t lay = H5Pget_layout(p);
    int ext = H5Pget_external_count(p), nf = H5Pget_nfilters(p), bad = -1;
    for (int i = 0; i < nf && bad < 0; i++) {
        unsigned flags, conf;
        size_t nv = 0;
        if (H5Pget_filter2(p, (unsigned)i, &flags, &nv, NULL, 0, NULL,
                           &conf) != H5Z_FILTER_FLETCHER32)
            bad = i;
    }
    H5Pclose(p);
    if (lay == H5D_VIRTUAL || ext != 0)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s is %s: its values would come from another file",
                          label,
                          lay == H5D_VIRTUAL ? "a virtual dataset"
                                             : "stored in an external file");
    if (lay != H5D_CHUNKED && lay != H5D_CONTIGUOUS)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s is not stored chunked or contiguous", label);
    if (nf < 0 || bad >= 0)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s has a filter other than the Fletcher32 "
                          "checksum",
                          label);
    return TDATA_OK;
}

/* The values read: finite, and a variance >= 0. */
static int _check_values(const float *v, uint64_t n, int kind,
                         const char *label)
{
    uint64_t bad = 0, first = 0;
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(v[i]) && bad++ == 0)
            first = i;
    if (bad)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s holds %" PRIu64 " NaN or infinite value(s) of "
                          "%" PRIu64 " (the first at element %" PRIu64 ")",
                          label, bad, n, first);
    for (uint64_t i = 0; kind == TDATA_CKPT_VARIANCE && i < n; i++)
        if (v[i] < 0)
            return TORUS_FAIL(TDATA_EFORMAT,
                              "%s is a BN running variance and holds %g at "
                              "element %" PRIu64 " (a variance is >= 0)",
                              label, (double)v[i], i);
    return TDATA_OK;
}

/* tdata_ckpt_tensor under the HDF5 lock. */
static int _tensor(hid_t g, const char *dset, const char *label,
                   uint64_t count, int kind, float *buf)
{
    int hard = _hard(g, dset);
    if (hard < 0)
        return TORUS_FAIL(TDATA_EMISSING, "%s is missing", label);
    if (!hard)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s is a soft or external link (it could name "
                          "another file)",
                          label);
    hid_t d = H5Dopen2(g, dset, H5P_DEFAULT);
    if (d < 0)
        return TORUS_FAIL(TDATA_EFORMAT, "%s is not a dataset", label);
    int rc = _check_storage(d, label);
    if (!rc)
        rc = _check_shape(d, label, count);
    if (!rc && buf &&
        H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        rc = TORUS_FAIL(TDATA_ECRC,
                        "%s does not read (it fails its checksum)", label);
    H5Dclose(d);
    return rc || !buf ? rc : _check_values(buf, count, kind, label);
}

int tdata_ckpt_tensor(hid_t g, const char *dset, const char *label,
                      uint64_t count, int kind, float *buf)
{
    tdata_h5_lock();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = _tensor(g, dset, label, count, kind, buf);
    tdata_h5_unlock();
    return rc;
}
