/* format/shard_write.c: writes one HDF5 shard (docs/shard-format.md).
 * The image stream is one chunked uint8 dataset whose chunks are
 * TDATA_CHUNK_BYTES long and file-aligned to that size, so a reader on
 * Lustre/GPFS issues few, large, stripe-aligned reads. No filters: the
 * JPEGs are already compressed, and unfiltered chunks let readers pread()
 * them directly. The file appears under its final name only once complete
 * and durable (format/durable.c); HDF5 runs under tdata_h5_lock(). */
#include <errno.h>
#include <hdf5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "data/format/format.h"
#include "data/format/tdata_h5attr.h"

static void _no_locking_env(void)
{
    setenv("HDF5_USE_FILE_LOCKING", "FALSE", 0);
}

long tdata_h5_fapl(void)
{
    /* Parallel file systems dislike (or lack) the flock() HDF5 1.10 does by
     * default; shards are never modified in place, so locking buys nothing.
     * The property is the 1.10.7+ way; the env var (set once, before any
     * decode thread exists, since setenv races with getenv) covers code
     * that opens files without our property list. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, _no_locking_env);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_file_locking(fapl, 0, 1);
    return (long)fapl;
}

/* A 1-D attribute of n native elements; the shard is named by its
 * caller's message. */
static int _attr_int(hid_t obj, const char *name, hid_t type, const void *v,
                     size_t n)
{
    return tdata_h5_attr_write(obj, "shard", name, type, type, v, n);
}

static int _attr_str(hid_t obj, const char *name, const char *v)
{
    return tdata_h5_attr_write_str(obj, "shard", name, v);
}

/* 1-D dataset of n elements, contiguous (small metadata arrays). */
static int _dset_1d(hid_t f, const char *name, hid_t type, hsize_t n,
                    const void *v)
{
    hsize_t dims = n;
    hid_t sp = H5Screate_simple(1, &dims, NULL);
    hid_t d =
        H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc =
        d < 0 ? -1
              : (n ? H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) : 0);
    if (d >= 0)
        H5Dclose(d);
    H5Sclose(sp);
    return rc < 0 ? -1 : 0;
}

static int _dset_strings(hid_t f, const char *name, hsize_t n,
                         const char *const *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    int rc = _dset_1d(f, name, t, n, v);
    H5Tclose(t);
    return rc;
}

/* The image stream: rank 1 (encoded, bytes) or rank 4 (dense N,H,W,C). */
static int _dset_images(hid_t f, const tdata_shard_meta *m, uint64_t n,
                        uint64_t bytes, const uint8_t *data)
{
    hsize_t dims[4], chunk[4];
    int rank;
    if (m->layout == TDATA_LAYOUT_DENSE) {
        uint64_t img = (uint64_t)m->height * m->width * m->channels;
        uint64_t k = TDATA_CHUNK_BYTES / (img ? img : 1);
        if (k < 1)
            k = 1;
        if (k > n)
            k = n;
        rank = 4;
        dims[0] = n;
        dims[1] = m->height;
        dims[2] = m->width;
        dims[3] = m->channels;
        chunk[0] = k;
        chunk[1] = m->height;
        chunk[2] = m->width;
        chunk[3] = m->channels;
    } else {
        rank = 1;
        dims[0] = bytes;
        chunk[0] = bytes < TDATA_CHUNK_BYTES ? bytes : TDATA_CHUNK_BYTES;
    }
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, rank, chunk);
    /* Allocate every chunk at create time, in order: the stream is then one
     * run of aligned chunks in the file, read back with sequential I/O. */
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t d = H5Dcreate2(f, "images", H5T_NATIVE_UINT8, sp, H5P_DEFAULT, dcpl,
                         H5P_DEFAULT);
    herr_t rc = d < 0 ? -1
                      : H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL,
                                 H5P_DEFAULT, data);
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    return rc < 0 ? -1 : 0;
}

/* CRC32C of each image (malloc'd), or NULL when out of memory. */
static uint32_t *_image_crcs(const tdata_shard_meta *m, uint64_t n,
                             const uint8_t *data, const uint64_t *offsets)
{
    uint64_t img = (uint64_t)m->height * m->width * m->channels;
    uint32_t *crcs = malloc(n * sizeof *crcs);
    if (!crcs)
        return NULL;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t lo = m->layout == TDATA_LAYOUT_DENSE ? i * img : offsets[i];
        uint64_t hi =
            m->layout == TDATA_LAYOUT_DENSE ? lo + img : offsets[i + 1];
        crcs[i] = tdata_crc32c(0, data + lo, hi - lo);
    }
    return crcs;
}

/* The file attributes (docs/shard-format.md); nonzero if any failed. */
static int _write_attrs(hid_t f, const tdata_shard_meta *m, uint64_t n)
{
    uint64_t img = (uint64_t)m->height * m->width * m->channels;
    int32_t ver = TDATA_FORMAT_VERSION;
    int32_t si[3] = {m->shard_index, m->num_shards, m->num_classes};
    int32_t shape[3] = {m->height, m->width, m->channels};
    uint64_t chunkb =
        m->layout == TDATA_LAYOUT_DENSE
            ? (TDATA_CHUNK_BYTES / img ? TDATA_CHUNK_BYTES / img : 1) * img
            : TDATA_CHUNK_BYTES;
    int bad = 0;
    bad |= _attr_int(f, "torus_format_version", H5T_NATIVE_INT32, &ver, 1);
    bad |= _attr_str(f, "creator", m->creator ? m->creator : "libtdata");
    bad |= _attr_str(f, "split", m->split ? m->split : "train");
    bad |= _attr_str(f, "layout",
                     m->layout == TDATA_LAYOUT_DENSE ? "dense" : "encoded");
    bad |= _attr_int(f, "num_images", H5T_NATIVE_UINT64, &n, 1);
    bad |= _attr_int(f, "num_classes", H5T_NATIVE_INT32, &si[2], 1);
    bad |= _attr_int(f, "shard_index", H5T_NATIVE_INT32, &si[0], 1);
    bad |= _attr_int(f, "num_shards", H5T_NATIVE_INT32, &si[1], 1);
    bad |= _attr_int(f, "chunk_bytes", H5T_NATIVE_UINT64, &chunkb, 1);
    if (m->layout == TDATA_LAYOUT_DENSE)
        bad |= _attr_int(f, "image_shape_hwc", H5T_NATIVE_INT32, shape, 3);
    bad |= _attr_int(f, "pixel_sum", H5T_NATIVE_DOUBLE, m->pixel_sum, 3);
    bad |= _attr_int(f, "pixel_sumsq", H5T_NATIVE_DOUBLE, m->pixel_sumsq, 3);
    bad |= _attr_int(f, "pixel_count", H5T_NATIVE_DOUBLE, &m->pixel_count, 1);
    int32_t pk[2] = {m->num_rejected, m->num_reencoded};
    bad |= _attr_int(f, "num_rejected", H5T_NATIVE_INT32, &pk[0], 1);
    bad |= _attr_int(f, "num_reencoded", H5T_NATIVE_INT32, &pk[1], 1);
    return bad;
}

/* Creates TMP (never through a link: H5F_ACC_EXCL) and writes the shard;
 * the caller holds the HDF5 lock. 0, -1 when TMP could not be created, 1
 * when a write failed. */
static int _write_h5(const char *tmp, const tdata_shard_meta *m, uint64_t n,
                     uint64_t bytes, const uint8_t *data,
                     const uint64_t *offsets, const int32_t *labels,
                     const uint32_t *crcs, const char *const *names)
{
    hid_t fapl = (hid_t)tdata_h5_fapl();
    /* Objects of 1 MiB or more start on a chunk-size boundary: each chunk is
     * then exactly one Lustre stripe set / GPFS block run. */
    H5Pset_alignment(fapl, 1u << 20, TDATA_CHUNK_BYTES);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return -1;
    int bad = _write_attrs(f, m, n);
    bad |= _dset_images(f, m, n, bytes, data);
    if (m->layout == TDATA_LAYOUT_ENCODED)
        bad |= _dset_1d(f, "offsets", H5T_NATIVE_UINT64, n + 1, offsets);
    bad |= _dset_1d(f, "labels", H5T_NATIVE_INT32, n, labels);
    bad |= _dset_1d(f, "crc32c", H5T_NATIVE_UINT32, n, crcs);
    bad |= _dset_strings(f, "names", n, names);
    bad |= _dset_strings(f, "class_ids", m->num_classes, m->class_ids);
    bad |= _dset_strings(f, "class_words", m->num_classes, m->class_words);
    if (H5Fclose(f) < 0)
        bad = 1;
    return bad ? 1 : 0;
}

int tdata_shard_write(const char *path, const tdata_shard_meta *m, uint64_t n,
                      const uint8_t *data, const uint64_t *offsets,
                      const int32_t *labels, const char *const *names)
{
    if (n == 0)
        return TORUS_FAIL(TDATA_EINVAL, "%s: refusing to write an empty shard",
                          path);
    uint64_t img = (uint64_t)m->height * m->width * m->channels;
    uint64_t bytes = m->layout == TDATA_LAYOUT_DENSE ? n * img : offsets[n];
    if (bytes == 0)
        return TORUS_FAIL(TDATA_EINVAL, "%s: no image bytes", path);
    uint32_t *crcs = _image_crcs(m, n, data, offsets);
    if (!crcs)
        return TORUS_FAIL(TDATA_ENOMEM, "%s: out of memory", path);

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(crcs);
        return TORUS_FAIL(TDATA_ENOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int rc = TDATA_OK;
    if (tdata_tmp_clear(tmp) != 0) {
        rc = TORUS_FAIL(TDATA_EIO, "%s: %s " TDATA_TMP_REFUSED, tmp,
                        strerror(errno));
        goto out;
    }
    tdata_h5_lock();
    int bad = _write_h5(tmp, m, n, bytes, data, offsets, labels, crcs, names);
    tdata_h5_unlock();
    if (bad) {
        rc = TORUS_FAIL(TDATA_EIO,
                        bad < 0 ? "%s: cannot create HDF5 file"
                                : "%s: HDF5 write failed (disk full?)",
                        tmp);
        if (bad > 0)
            unlink(tmp);
        goto out;
    }
    if (tdata_publish(tmp, path) != 0) {
        rc = TORUS_FAIL(TDATA_EIO, "%s: fsync or rename to the final name: %s",
                        path, strerror(errno));
        unlink(tmp);
    }
out:
    free(tmp);
    free(crcs);
    return rc;
}
