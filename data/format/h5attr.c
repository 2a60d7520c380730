/* format/h5attr.c: checked HDF5 attribute reads, and the writes they
 * accept (format/tdata_h5attr.h). H5Aread writes as many elements as the
 * attribute's dataspace holds, and a shard or checkpoint is a file users
 * can rewrite (h5py, h5repack), so the dataspace and type are compared
 * with the caller's buffer first. Also the process-wide HDF5 lock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "data/format/tdata_h5attr.h"

static pthread_mutex_t _h5_mutex;
static pthread_once_t _h5_once = PTHREAD_ONCE_INIT;
static int _h5_threadsafe;

static void _h5_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    /* Recursive: the attribute helpers lock again inside a caller's hold
     * (shard open, checkpoint save). */
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&_h5_mutex, &a);
    pthread_mutexattr_destroy(&a);
    /* Asked once, inside the once: every HDF5 user waits here first, so
     * this call is alone in the library. */
    hbool_t ts = 0;
    _h5_threadsafe = H5is_library_threadsafe(&ts) >= 0 && ts;
    /* TORUS_HDF5_LOCK=always takes the lock with a thread-safe HDF5 too:
     * for tests (which then see every call site wait on it) and for an
     * HDF5 that claims a safety it lacks. */
    const char *e = getenv("TORUS_HDF5_LOCK");
    if (e && strcmp(e, "always") == 0)
        _h5_threadsafe = 0;
}

void tdata_h5_lock(void)
{
    pthread_once(&_h5_once, _h5_init);
    if (!_h5_threadsafe)
        pthread_mutex_lock(&_h5_mutex);
}

void tdata_h5_unlock(void)
{
    if (!_h5_threadsafe)
        pthread_mutex_unlock(&_h5_mutex);
}

/* Open attribute NAME and check it holds `count` elements in at most one
 * dimension; *a is the open attribute on success. */
static int _open_counted(hid_t loc, const char *what, const char *name,
                         size_t count, hid_t *a)
{
    *a = H5I_INVALID_HID;
    if (H5Aexists(loc, name) <= 0)
        return TORUS_FAIL(TDATA_EMISSING, "%s: no attribute '%s'", what, name);
    hid_t at = H5Aopen(loc, name, H5P_DEFAULT);
    if (at < 0)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: cannot open attribute '%s'", what,
                          name);
    hid_t sp = H5Aget_space(at);
    int rank = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    hssize_t npts = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    if (sp >= 0)
        H5Sclose(sp);
    if (rank < 0 || rank > 1 || npts < 0 || (uint64_t)npts != count) {
        H5Aclose(at);
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: attribute '%s' has rank %d and %lld "
                          "elements, expected %zu",
                          what, name, rank, (long long)npts, count);
    }
    *a = at;
    return TDATA_OK;
}

static int _h5_attr_read(hid_t loc, const char *what, const char *name,
                         hid_t mem_type, void *buf, size_t count)
{
    hid_t a;
    int rc = _open_counted(loc, what, name, count, &a);
    if (rc)
        return rc;
    hid_t ft = H5Aget_type(a);
    H5T_class_t want = H5Tget_class(mem_type);
    H5T_class_t have = ft < 0 ? H5T_NO_CLASS : H5Tget_class(ft);
    if (ft >= 0)
        H5Tclose(ft);
    if (have != want || (want != H5T_INTEGER && want != H5T_FLOAT))
        rc = TORUS_FAIL(TDATA_EFORMAT,
                        "%s: attribute '%s' is not of the expected %s type",
                        what, name, want == H5T_FLOAT ? "float" : "integer");
    else if (H5Aread(a, mem_type, buf) < 0)
        rc = TORUS_FAIL(TDATA_EFORMAT, "%s: cannot read attribute '%s'", what,
                        name);
    H5Aclose(a);
    return rc;
}

/* Read the fixed string of `sz` bytes held by attribute a into buf. */
static int _read_fixed(hid_t a, size_t sz, char *buf, size_t n)
{
    char *tmp = calloc(1, sz + 1);
    if (!tmp)
        return -1;
    hid_t mt = H5Tcopy(H5T_C_S1);
    int ok = mt >= 0 && H5Tset_size(mt, sz) >= 0 && H5Aread(a, mt, tmp) >= 0;
    if (mt >= 0)
        H5Tclose(mt);
    if (ok) {
        size_t l = strnlen(tmp, sz);
        if (l >= n)
            l = n - 1;
        memcpy(buf, tmp, l);
        buf[l] = 0;
    }
    free(tmp);
    return ok ? 0 : -1;
}

static int _h5_attr_str(hid_t loc, const char *what, const char *name,
                        char *buf, size_t n)
{
    if (n)
        buf[0] = 0;
    hid_t a;
    int rc = _open_counted(loc, what, name, 1, &a);
    if (rc)
        return rc;
    hid_t ft = H5Aget_type(a);
    int fixed = ft >= 0 && H5Tget_class(ft) == H5T_STRING &&
                H5Tis_variable_str(ft) == 0;
    size_t sz = fixed ? H5Tget_size(ft) : 0;
    if (ft >= 0)
        H5Tclose(ft);
    if (!fixed || sz == 0 || sz > TDATA_H5_STR_MAX)
        rc = TORUS_FAIL(TDATA_EFORMAT,
                        "%s: attribute '%s' is not a fixed-length string of "
                        "1..%d bytes",
                        what, name, TDATA_H5_STR_MAX);
    else if (n == 0 || _read_fixed(a, sz, buf, n) != 0)
        rc = TORUS_FAIL(TDATA_EFORMAT, "%s: cannot read attribute '%s'", what,
                        name);
    H5Aclose(a);
    return rc;
}

static int _h5_attr_write(hid_t loc, const char *what, const char *name,
                          hid_t file_type, hid_t mem_type, const void *buf,
                          size_t count)
{
    hsize_t n = count;
    hid_t sp = count == TDATA_H5_SCALAR ? H5Screate(H5S_SCALAR)
                                        : H5Screate_simple(1, &n, NULL);
    hid_t a =
        sp < 0 ? H5I_INVALID_HID
               : H5Acreate2(loc, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, mem_type, buf);
    if (a >= 0)
        H5Aclose(a);
    if (sp >= 0)
        H5Sclose(sp);
    if (rc < 0)
        return TORUS_FAIL(TDATA_EIO, "%s: cannot write attribute '%s'", what,
                          name);
    return TDATA_OK;
}

static int _h5_attr_write_str(hid_t loc, const char *what, const char *name,
                              const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    /* NULLTERM is H5T_C_S1's padding already; set, not assumed, as it is
     * what readers of other languages (h5py) rely on. */
    int bad = t < 0 || H5Tset_size(t, strlen(v) + 1) < 0 ||
              H5Tset_strpad(t, H5T_STR_NULLTERM) < 0;
    int rc = bad ? TORUS_FAIL(TDATA_EIO, "%s: cannot write attribute '%s'",
                              what, name)
                 : _h5_attr_write(loc, what, name, t, t, v, TDATA_H5_SCALAR);
    if (t >= 0)
        H5Tclose(t);
    return rc;
}

/* ---- the public helpers: the bodies above, under the HDF5 lock ---- */

int tdata_h5_attr_read(hid_t loc, const char *what, const char *name,
                       hid_t mem_type, void *buf, size_t count)
{
    tdata_h5_lock();
    int rc = _h5_attr_read(loc, what, name, mem_type, buf, count);
    tdata_h5_unlock();
    return rc;
}

int tdata_h5_attr_str(hid_t loc, const char *what, const char *name, char *buf,
                      size_t n)
{
    tdata_h5_lock();
    int rc = _h5_attr_str(loc, what, name, buf, n);
    tdata_h5_unlock();
    return rc;
}

int tdata_h5_attr_write(hid_t loc, const char *what, const char *name,
                        hid_t file_type, hid_t mem_type, const void *buf,
                        size_t count)
{
    tdata_h5_lock();
    int rc = _h5_attr_write(loc, what, name, file_type, mem_type, buf, count);
    tdata_h5_unlock();
    return rc;
}

int tdata_h5_attr_write_str(hid_t loc, const char *what, const char *name,
                            const char *v)
{
    tdata_h5_lock();
    int rc = _h5_attr_write_str(loc, what, name, v);
    tdata_h5_unlock();
    return rc;
}
