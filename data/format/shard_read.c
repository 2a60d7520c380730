/* format/shard_read.c: opens one shard read-only and serves byte ranges of its
 * image stream.
 * HDF5 is used once, at open, to check the attributes and to learn where
 * each (unfiltered) chunk of the stream lies in the file. Sample reads
 * then go straight to pread() on those addresses: no HDF5 call and no
 * library lock on the hot path, and each read is one large contiguous
 * request that the parallel file system serves at full stripe width. */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "data/format/format.h"
#include "data/format/tdata_h5attr.h"

uint32_t tdata_crc_of_crcs(const uint32_t *crcs, uint64_t n)
{
    /* Little-endian bytes of the array, so the value is host-independent. */
    uint32_t c = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t b[4] = {(uint8_t)crcs[i], (uint8_t)(crcs[i] >> 8),
                        (uint8_t)(crcs[i] >> 16), (uint8_t)(crcs[i] >> 24)};
        c = tdata_crc32c(c, b, 4);
    }
    return c;
}

/* Here, below index.c (which opens shards to check them), so that index.c
 * calls down into this file and never the other way. */
void tdata_strv_free(char **v, int64_t n)
{
    for (int64_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* The length of 1-D dataset NAME, or -1 when it is absent or not 1-D. */
static int64_t _extent_1d(hid_t f, const char *name)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0)
        return -1;
    hid_t sp = H5Dget_space(d);
    hsize_t dims = 0;
    int ok = sp >= 0 && H5Sget_simple_extent_ndims(sp) == 1 &&
             H5Sget_simple_extent_dims(sp, &dims, NULL) == 1;
    if (sp >= 0)
        H5Sclose(sp);
    H5Dclose(d);
    return ok && dims <= INT64_MAX ? (int64_t)dims : -1;
}

/* Read a whole 1-D dataset of n elements of TYPE into a new buffer; NULL
 * when its extent is not n (checked before the allocation). */
static void *_read_1d(hid_t f, const char *name, hid_t type, uint64_t n)
{
    size_t esz = H5Tget_size(type);
    if (_extent_1d(f, name) != (int64_t)n || esz == 0 || n > SIZE_MAX / esz - 1)
        return NULL;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0)
        return NULL;
    void *buf = malloc(n ? n * esz : 1);
    if (buf && n && H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        buf = NULL;
    }
    H5Dclose(d);
    return buf;
}

static char **_read_strings(hid_t f, const char *name, uint64_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    char **v = _read_1d(f, name, t, n);
    H5Tclose(t);
    if (!v)
        return NULL;
    /* Own the strings with malloc so callers free() them plainly. */
    char **out = calloc(n ? n : 1, sizeof *out);
    int ok = out != NULL;
    for (uint64_t i = 0; i < n; i++) {
        if (ok && !(out[i] = strdup(v[i] ? v[i] : "")))
            ok = 0;
        H5free_memory(v[i]);
    }
    free(v);
    if (!ok)
        tdata_strv_free(out, (int64_t)n);
    return ok ? out : NULL;
}

/* The image stream's shape: 1-D bytes (encoded) or n x H x W x C (dense),
 * uint8, chunked and unfiltered with chunks that hold whole rows, so each
 * chunk is one contiguous byte range of the stream. *chunk_bytes is the
 * size of one chunk. */
static int _check_stream_shape(hid_t d, const tdata_shard *s,
                               uint64_t *chunk_bytes)
{
    int dense = s->layout == TDATA_LAYOUT_DENSE;
    int want = dense ? 4 : 1;
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d),
          dcpl = H5Dget_create_plist(d);
    hsize_t dims[4] = {0, 0, 0, 0}, cdims[4] = {0, 0, 0, 0};
    int ok = t >= 0 && H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == 1;
    ok = ok && sp >= 0 && H5Sget_simple_extent_ndims(sp) == want &&
         H5Sget_simple_extent_dims(sp, dims, NULL) == want;
    ok = ok && dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
         H5Pget_chunk(dcpl, 4, cdims) == want && H5Pget_nfilters(dcpl) == 0;
    if (ok && dense)
        ok = dims[0] == s->n && dims[1] == (hsize_t)s->height &&
             dims[2] == (hsize_t)s->width && dims[3] == (hsize_t)s->channels &&
             cdims[1] == dims[1] && cdims[2] == dims[2] && cdims[3] == dims[3];
    uint64_t cb = 0;
    if (ok && dense)
        ok = !__builtin_mul_overflow(
            (uint64_t)cdims[0], (uint64_t)s->height * s->width * s->channels,
            &cb);
    else if (ok)
        cb = cdims[0];
    *chunk_bytes = cb;
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (!ok || cb == 0 || cb > s->file_size)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: image stream must be a chunked, unfiltered "
                          "uint8 dataset of the shard's shape (was it "
                          "h5repack'ed with compression?)",
                          s->path);
    return TDATA_OK;
}

/* Chunk file addresses of the image stream, in stream order. */
static int _map_chunks(hid_t d, tdata_shard *s)
{
    uint64_t cb;
    int rc = _check_stream_shape(d, s, &cb);
    if (rc)
        return rc;
    s->chunk_bytes = cb;
    uint64_t total = s->offsets[s->n];
    s->nchunks = total / cb + (total % cb != 0);
    /* Every chunk is stored in the file: a count beyond its size is a lie. */
    if (s->nchunks > s->file_size)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: %llu chunks in a %llu-byte file",
                          s->path, (unsigned long long)s->nchunks,
                          (unsigned long long)s->file_size);
    s->chunk_addr = calloc(s->nchunks ? s->nchunks : 1, sizeof(uint64_t));
    if (!s->chunk_addr)
        return TORUS_FAIL(TDATA_ENOMEM,
                          "%s: no memory for %llu chunk addresses", s->path,
                          (unsigned long long)s->nchunks);
    uint64_t rows = s->layout == TDATA_LAYOUT_DENSE
                        ? cb / ((uint64_t)s->height * s->width * s->channels)
                        : cb;
    for (uint64_t c = 0; c < s->nchunks; c++) {
        hsize_t off[4] = {c * rows, 0, 0, 0};
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info_by_coord(d, off, &mask, &addr, &size) < 0 ||
            addr == HADDR_UNDEF || mask != 0 || size != s->chunk_bytes)
            return TORUS_FAIL(TDATA_EFORMAT,
                              "%s: chunk %llu of the image stream is missing "
                              "or filtered",
                              s->path, (unsigned long long)c);
        s->chunk_addr[c] = addr;
    }
    return TDATA_OK;
}

/* A required numeric attribute; the message names the shard. */
static int _need(hid_t f, const tdata_shard *s, const char *name, hid_t type,
                 void *v, size_t count)
{
    int rc = tdata_h5_attr_read(f, s->path, name, type, v, count);
    return rc == TDATA_EMISSING ? TORUS_FAIL(TDATA_EFORMAT,
                                             "%s: shard attribute '%s' "
                                             "missing",
                                             s->path, name)
                                : rc;
}

/* An optional one (packing statistics): absent is fine, malformed is not. */
static int _opt(hid_t f, const tdata_shard *s, const char *name, hid_t type,
                void *v, size_t count)
{
    int rc = tdata_h5_attr_read(f, s->path, name, type, v, count);
    return rc == TDATA_EMISSING ? TDATA_OK : rc;
}

/* The layout and name attributes (strings). */
static int _load_strings(hid_t f, tdata_shard *s)
{
    char layout[32] = "";
    int rc = tdata_h5_attr_str(f, s->path, "layout", layout, sizeof layout);
    if (rc && rc != TDATA_EMISSING)
        return rc;
    if (layout[0] && strcmp(layout, "dense") && strcmp(layout, "encoded"))
        return TORUS_FAIL(TDATA_EFORMAT, "%s: unknown layout '%s'", s->path,
                          layout);
    s->layout = strcmp(layout, "dense") == 0 ? TDATA_LAYOUT_DENSE
                                             : TDATA_LAYOUT_ENCODED;
    rc = tdata_h5_attr_str(f, s->path, "split", s->split, sizeof s->split);
    if (rc == TDATA_OK || rc == TDATA_EMISSING)
        rc = tdata_h5_attr_str(f, s->path, "creator", s->creator,
                               sizeof s->creator);
    return rc == TDATA_EMISSING ? TDATA_OK : rc;
}

/* The counts, each checked against what the file can really hold: the
 * labels dataset's extent, and one byte of unfiltered stream per image. */
static int _load_counts(hid_t f, tdata_shard *s)
{
    const char *p = s->path;
    int rc = _need(f, s, "num_images", H5T_NATIVE_UINT64, &s->n, 1);
    if (!rc)
        rc = _need(f, s, "num_classes", H5T_NATIVE_INT32, &s->num_classes, 1);
    if (!rc)
        rc = _need(f, s, "shard_index", H5T_NATIVE_INT32, &s->shard_index, 1);
    if (!rc)
        rc = _need(f, s, "num_shards", H5T_NATIVE_INT32, &s->num_shards, 1);
    if (rc)
        return rc;
    int64_t nl = _extent_1d(f, "labels");
    if (s->n > s->file_size || nl < 0 || (uint64_t)nl != s->n)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: num_images %llu does not match the labels "
                          "dataset (%lld) or the file size (%llu bytes)",
                          p, (unsigned long long)s->n, (long long)nl,
                          (unsigned long long)s->file_size);
    if (s->num_classes < 1 || s->num_classes > TDATA_MAX_CLASSES ||
        s->num_shards < 1 || s->num_shards > TDATA_MAX_SHARDS ||
        s->shard_index < 0 || s->shard_index >= s->num_shards)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: bad counts (%d classes, shard %d of %d)", p,
                          s->num_classes, s->shard_index, s->num_shards);
    return TDATA_OK;
}

/* The file attributes: version, layout, counts, packing statistics. */
static int _load_attrs(hid_t f, tdata_shard *s)
{
    const char *p = s->path;
    int32_t v32;
    int rc = tdata_h5_attr_read(f, p, "torus_format_version", H5T_NATIVE_INT32,
                                &v32, 1);
    if (rc)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: not a torus shard (no usable "
                          "torus_format_version)",
                          p);
    s->format_version = v32;
    if (v32 > TDATA_FORMAT_VERSION)
        return TORUS_FAIL(TDATA_EVERSION,
                          "%s: shard format version %d is newer than this "
                          "reader supports (%d); update torus",
                          p, v32, TDATA_FORMAT_VERSION);
    if ((rc = _load_strings(f, s)) || (rc = _load_counts(f, s)))
        return rc;
    hid_t D = H5T_NATIVE_DOUBLE, I = H5T_NATIVE_INT32;
    if ((rc = _opt(f, s, "pixel_sum", D, s->pixel_sum, 3)) ||
        (rc = _opt(f, s, "pixel_sumsq", D, s->pixel_sumsq, 3)) ||
        (rc = _opt(f, s, "pixel_count", D, &s->pixel_count, 1)) ||
        (rc = _opt(f, s, "num_rejected", I, &s->num_rejected, 1)))
        return rc;
    return _opt(f, s, "num_reencoded", I, &s->num_reencoded, 1);
}

/* Dense offsets: image i starts at i * H*W*C, with the shape checked
 * against the pixel limit first so that n * image size cannot wrap. */
static int _dense_offsets(hid_t f, tdata_shard *s)
{
    const char *p = s->path;
    int32_t shape[3];
    int rc = _need(f, s, "image_shape_hwc", H5T_NATIVE_INT32, shape, 3);
    if (rc)
        return rc;
    if (shape[0] < 1 || shape[1] < 1 ||
        (uint64_t)shape[0] * (uint64_t)shape[1] > tdata_max_pixels() ||
        (shape[2] != 1 && shape[2] != 3))
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: image_shape_hwc %d x %d x %d is not H x W x C "
                          "with C 1 or 3 and H*W at most %llu "
                          "(TDATA_MAX_PIXELS)",
                          p, shape[0], shape[1], shape[2],
                          (unsigned long long)tdata_max_pixels());
    s->height = shape[0];
    s->width = shape[1];
    s->channels = shape[2];
    uint64_t img = (uint64_t)shape[0] * shape[1] * shape[2];
    if (s->n > s->file_size / img)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: %llu images of %llu bytes do not fit in its "
                          "%llu bytes",
                          p, (unsigned long long)s->n, (unsigned long long)img,
                          (unsigned long long)s->file_size);
    s->offsets = malloc((s->n + 1) * sizeof *s->offsets);
    if (!s->offsets)
        return TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for %llu offsets", p,
                          (unsigned long long)s->n + 1);
    for (uint64_t i = 0; i <= s->n; i++)
        s->offsets[i] = i * img;
    return TDATA_OK;
}

/* n+1 stream offsets: computed for the dense layout, read (and checked
 * monotone) for the encoded one. */
static int _load_offsets(hid_t f, tdata_shard *s)
{
    const char *p = s->path;
    if (s->layout == TDATA_LAYOUT_DENSE)
        return _dense_offsets(f, s);
    /* _load_counts bounded n by the file size, so n + 1 cannot wrap. */
    s->offsets = _read_1d(f, "offsets", H5T_NATIVE_UINT64, s->n + 1);
    if (!s->offsets)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: bad offsets dataset", p);
    for (uint64_t i = 0; i < s->n; i++)
        if (s->offsets[i + 1] < s->offsets[i])
            return TORUS_FAIL(TDATA_EFORMAT,
                              "%s: offsets not monotone "
                              "at %llu",
                              p, (unsigned long long)i);
    if (s->offsets[s->n] - s->offsets[0] > s->file_size)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: offsets span %llu bytes, more than the file", p,
                          (unsigned long long)s->offsets[s->n]);
    return TDATA_OK;
}

/* Labels (checked against the class count) and CRCs. */
static int _load_labels(hid_t f, tdata_shard *s)
{
    const char *p = s->path;
    s->labels = _read_1d(f, "labels", H5T_NATIVE_INT32, s->n);
    s->crcs = _read_1d(f, "crc32c", H5T_NATIVE_UINT32, s->n);
    if (!s->labels || !s->crcs)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: bad labels/crc32c dataset", p);
    for (uint64_t i = 0; i < s->n; i++)
        if (s->labels[i] < 0 || s->labels[i] >= s->num_classes)
            return TORUS_FAIL(TDATA_EFORMAT,
                              "%s: label %d of image %llu "
                              "out of range",
                              p, s->labels[i], (unsigned long long)i);
    s->crc_of_crcs = tdata_crc_of_crcs(s->crcs, s->n);
    return TDATA_OK;
}

/* The image stream: its size must match the offsets; then its chunks. */
static int _load_stream(hid_t f, tdata_shard *s)
{
    hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
    if (d < 0)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: no images dataset", s->path);
    hid_t sp = H5Dget_space(d);
    hssize_t npts = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    if (sp >= 0)
        H5Sclose(sp);
    int rc = npts >= 0 && (uint64_t)npts == s->offsets[s->n]
                 ? _map_chunks(d, s)
                 : TORUS_FAIL(TDATA_EFORMAT,
                              "%s: images dataset holds %lld bytes, "
                              "offsets say %llu",
                              s->path, (long long)npts,
                              (unsigned long long)s->offsets[s->n]);
    H5Dclose(d);
    return rc;
}

static int _load(hid_t f, tdata_shard *s, int load_classes)
{
    int rc = _load_attrs(f, s);
    if (rc == TDATA_OK)
        rc = _load_offsets(f, s);
    if (rc == TDATA_OK)
        rc = _load_labels(f, s);
    if (rc == TDATA_OK)
        rc = _load_stream(f, s);
    if (rc || !load_classes)
        return rc;
    s->class_ids = _read_strings(f, "class_ids", s->num_classes);
    s->class_words = _read_strings(f, "class_words", s->num_classes);
    if (!s->class_ids || !s->class_words)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: bad class name datasets",
                          s->path);
    return TDATA_OK;
}

/* H5Fopen of PATH, read-only, once tdata_open_regular has seen a regular
 * file there: HDF5 opens a FIFO blocking, and would wait inside H5Fopen,
 * holding the HDF5 lock, for a writer that never comes. The caller holds
 * the lock; a negative id with the error set on failure. */
static hid_t _h5_open(const char *path)
{
    int fd;
    if (tdata_open_regular(path, &fd, NULL) != TDATA_OK)
        return -1;
    close(fd);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = (hid_t)tdata_h5_fapl();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0)
        TORUS_FAIL(TDATA_EFORMAT,
                   "%s: not a readable HDF5 file (truncated or corrupt?)",
                   path);
    return f;
}

/* The HDF5 part of tdata_shard_open, under the process-wide HDF5 lock
 * (decode threads may be naming a sample, rank 0 writing a checkpoint). */
static int _open_h5(const char *path, tdata_shard *s, int load_classes)
{
    tdata_h5_lock();
    hid_t f = _h5_open(path);
    int rc = f < 0 ? TDATA_EFORMAT : _load(f, s, load_classes);
    if (f >= 0)
        H5Fclose(f);
    tdata_h5_unlock();
    return rc;
}

int tdata_shard_open(const char *path, tdata_shard *s, int load_classes)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->path = strdup(path);
    if (!s->path)
        return TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for the path", path);
    /* The descriptor pread() serves samples from, opened first: it sees a
     * regular file (or the open fails here, naming what is there). */
    int rc = tdata_open_regular(path, &s->fd, &s->file_size);
    if (rc == TDATA_EMISSING)
        return TORUS_FAIL(rc, "%s: missing shard: %s", path, strerror(ENOENT));
    if (rc == TDATA_OK)
        rc = _open_h5(path, s, load_classes);
    if (rc)
        return rc;
    /* Every chunk must lie inside the file: catches truncation that HDF5's
     * superblock check misses (it records the end-of-file address too). */
    for (uint64_t c = 0; c < s->nchunks; c++)
        if (s->chunk_addr[c] > s->file_size ||
            s->chunk_bytes > s->file_size - s->chunk_addr[c])
            return TORUS_FAIL(TDATA_ETRUNCATED,
                              "%s: truncated: chunk %llu "
                              "ends past the file's %llu bytes",
                              path, (unsigned long long)c,
                              (unsigned long long)s->file_size);
    return TDATA_OK;
}

int tdata_shard_pread(const tdata_shard *s, uint64_t lo, uint64_t hi,
                      uint8_t *dst)
{
    while (lo < hi) {
        uint64_t c = lo / s->chunk_bytes;
        uint64_t in = lo - c * s->chunk_bytes;
        uint64_t take = s->chunk_bytes - in;
        /* Neighbouring chunks are usually adjacent in the file: extend the
         * request across them so one syscall covers the whole range. */
        while (lo + take < hi && c + 1 < s->nchunks &&
               s->chunk_addr[c + 1] == s->chunk_addr[c] + s->chunk_bytes) {
            c++;
            take += s->chunk_bytes;
        }
        if (take > hi - lo)
            take = hi - lo;
        uint64_t addr = s->chunk_addr[lo / s->chunk_bytes] + in;
        uint64_t done = 0;
        while (done < take) {
            ssize_t r =
                pread(s->fd, dst + done, take - done, (off_t)(addr + done));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return TORUS_FAIL(r == 0 ? TDATA_ETRUNCATED : TDATA_EIO,
                                  "%s: read at %llu: %s", s->path,
                                  (unsigned long long)(addr + done),
                                  r == 0 ? "unexpected end of file"
                                         : strerror(errno));
            done += (uint64_t)r;
        }
        lo += take;
        dst += take;
    }
    return TDATA_OK;
}

/* tdata_shard_name's HDF5 part; the caller holds the HDF5 lock. */
static int _name_h5(const tdata_shard *s, uint64_t i, char *buf, size_t n)
{
    hid_t f = _h5_open(s->path);
    if (f < 0)
        return TDATA_EIO;
    int rc = TDATA_EFORMAT;
    hid_t d = H5Dopen2(f, "names", H5P_DEFAULT);
    if (d >= 0) {
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        hid_t fs = H5Dget_space(d);
        hsize_t start = i, count = 1;
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
        hid_t ms = H5Screate_simple(1, &count, NULL);
        char *v = NULL;
        if (H5Dread(d, t, ms, fs, H5P_DEFAULT, &v) >= 0 && v) {
            snprintf(buf, n, "%s", v);
            H5free_memory(v);
            rc = TDATA_OK;
        }
        H5Sclose(ms);
        H5Sclose(fs);
        H5Tclose(t);
        H5Dclose(d);
    }
    H5Fclose(f);
    return rc ? TORUS_FAIL(rc, "%s: cannot read name %llu", s->path,
                           (unsigned long long)i)
              : rc;
}

int tdata_shard_name(const tdata_shard *s, uint64_t i, char *buf, size_t n)
{
    /* Called from decode threads (bad-sample messages) while the I/O
     * threads open shards and rank 0 may write a checkpoint. */
    tdata_h5_lock();
    int rc = _name_h5(s, i, buf, n);
    tdata_h5_unlock();
    return rc;
}

char **tdata_shard_names(const tdata_shard *s)
{
    tdata_h5_lock();
    hid_t f = _h5_open(s->path);
    char **v = f < 0 ? NULL : _read_strings(f, "names", s->n);
    if (f >= 0)
        H5Fclose(f);
    tdata_h5_unlock();
    if (f < 0)
        return NULL;
    if (!v)
        TORUS_FAIL(TDATA_EFORMAT, "%s: bad names dataset", s->path);
    return v;
}

void tdata_shard_close(tdata_shard *s)
{
    if (s->fd >= 0)
        close(s->fd);
    tdata_strv_free(s->class_ids, s->num_classes);
    tdata_strv_free(s->class_words, s->num_classes);
    free(s->path);
    free(s->offsets);
    free(s->labels);
    free(s->crcs);
    free(s->chunk_addr);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}
