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

static int _get_attr(hid_t f, const char *name, hid_t type, void *v)
{
    if (H5Aexists(f, name) <= 0)
        return -1;
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    herr_t rc = H5Aread(a, type, v);
    H5Aclose(a);
    return rc < 0 ? -1 : 0;
}

static int _get_attr_str(hid_t f, const char *name, char *buf, size_t n)
{
    buf[0] = 0;
    if (H5Aexists(f, name) <= 0)
        return -1;
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    hid_t ft = H5Aget_type(a);
    int rc = -1;
    if (H5Tget_class(ft) == H5T_STRING && !H5Tis_variable_str(ft)) {
        size_t sz = H5Tget_size(ft);
        char *tmp = calloc(1, sz + 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, sz);
        if (H5Aread(a, mt, tmp) >= 0) {
            snprintf(buf, n, "%s", tmp);
            rc = 0;
        }
        H5Tclose(mt);
        free(tmp);
    }
    H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

/* Read a whole 1-D dataset of n elements of TYPE into a new buffer. */
static void *_read_1d(hid_t f, const char *name, hid_t type, uint64_t n)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0)
        return NULL;
    hid_t sp = H5Dget_space(d);
    hsize_t dims = 0;
    int ok = H5Sget_simple_extent_ndims(sp) == 1 &&
             H5Sget_simple_extent_dims(sp, &dims, NULL) == 1 && dims == n;
    H5Sclose(sp);
    void *buf = ok ? malloc(n ? n * H5Tget_size(type) : 1) : NULL;
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
    for (uint64_t i = 0; i < n; i++) {
        out[i] = strdup(v[i] ? v[i] : "");
        H5free_memory(v[i]);
    }
    free(v);
    return out;
}

/* Chunk file addresses of the image stream, in stream order. */
static int _map_chunks(hid_t d, tdata_shard *s)
{
    hid_t dcpl = H5Dget_create_plist(d);
    hsize_t cdims[4] = {0, 0, 0, 0};
    int rank = H5Pget_chunk(dcpl, 4, cdims);
    int nfilt = H5Pget_nfilters(dcpl);
    H5Pclose(dcpl);
    if (rank < 1 || nfilt != 0)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: image stream must be chunked and unfiltered "
                          "(was it h5repack'ed with compression?)",
                          s->path);
    uint64_t row = 1;
    for (int i = 1; i < rank; i++)
        row *= cdims[i];
    s->chunk_bytes = cdims[0] * row;
    uint64_t total = s->offsets[s->n];
    s->nchunks = (total + s->chunk_bytes - 1) / s->chunk_bytes;
    s->chunk_addr = calloc(s->nchunks ? s->nchunks : 1, sizeof(uint64_t));
    for (uint64_t c = 0; c < s->nchunks; c++) {
        hsize_t off[4] = {c * cdims[0], 0, 0, 0};
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

/* The file attributes: version, layout, counts, packing statistics. */
static int _load_attrs(hid_t f, tdata_shard *s)
{
    const char *p = s->path;
    int32_t v32;
    if (_get_attr(f, "torus_format_version", H5T_NATIVE_INT32, &v32) < 0)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: not a torus shard (no torus_format_version)", p);
    s->format_version = v32;
    if (v32 > TDATA_FORMAT_VERSION)
        return TORUS_FAIL(TDATA_EVERSION,
                          "%s: shard format version %d is newer than this "
                          "reader supports (%d); update torus",
                          p, v32, TDATA_FORMAT_VERSION);
    char layout[32];
    _get_attr_str(f, "layout", layout, sizeof layout);
    _get_attr_str(f, "split", s->split, sizeof s->split);
    _get_attr_str(f, "creator", s->creator, sizeof s->creator);
    s->layout = strcmp(layout, "dense") == 0 ? TDATA_LAYOUT_DENSE
                                             : TDATA_LAYOUT_ENCODED;
    if (_get_attr(f, "num_images", H5T_NATIVE_UINT64, &s->n) < 0 ||
        _get_attr(f, "num_classes", H5T_NATIVE_INT32, &s->num_classes) < 0 ||
        _get_attr(f, "shard_index", H5T_NATIVE_INT32, &s->shard_index) < 0 ||
        _get_attr(f, "num_shards", H5T_NATIVE_INT32, &s->num_shards) < 0)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: shard attributes missing", p);
    _get_attr(f, "pixel_sum", H5T_NATIVE_DOUBLE, s->pixel_sum);
    _get_attr(f, "pixel_sumsq", H5T_NATIVE_DOUBLE, s->pixel_sumsq);
    _get_attr(f, "pixel_count", H5T_NATIVE_DOUBLE, &s->pixel_count);
    _get_attr(f, "num_rejected", H5T_NATIVE_INT32, &s->num_rejected);
    _get_attr(f, "num_reencoded", H5T_NATIVE_INT32, &s->num_reencoded);
    return TDATA_OK;
}

/* n+1 stream offsets: computed for the dense layout, read (and checked
 * monotone) for the encoded one. */
static int _load_offsets(hid_t f, tdata_shard *s)
{
    const char *p = s->path;
    if (s->layout == TDATA_LAYOUT_DENSE) {
        int32_t shape[3];
        if (_get_attr(f, "image_shape_hwc", H5T_NATIVE_INT32, shape) < 0)
            return TORUS_FAIL(TDATA_EFORMAT,
                              "%s: dense shard lacks "
                              "image_shape_hwc",
                              p);
        s->height = shape[0];
        s->width = shape[1];
        s->channels = shape[2];
        uint64_t img = (uint64_t)shape[0] * shape[1] * shape[2];
        s->offsets = malloc((s->n + 1) * sizeof *s->offsets);
        for (uint64_t i = 0; i <= s->n; i++)
            s->offsets[i] = i * img;
        return TDATA_OK;
    }
    s->offsets = _read_1d(f, "offsets", H5T_NATIVE_UINT64, s->n + 1);
    if (!s->offsets)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: bad offsets dataset", p);
    for (uint64_t i = 0; i < s->n; i++)
        if (s->offsets[i + 1] < s->offsets[i])
            return TORUS_FAIL(TDATA_EFORMAT,
                              "%s: offsets not monotone "
                              "at %llu",
                              p, (unsigned long long)i);
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
    hssize_t npts = H5Sget_simple_extent_npoints(sp);
    H5Sclose(sp);
    int rc = (uint64_t)npts == s->offsets[s->n]
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

int tdata_shard_open(const char *path, tdata_shard *s, int load_classes)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->path = strdup(path);
    struct stat st;
    if (stat(path, &st) != 0)
        return TORUS_FAIL(
            errno == ENOENT ? TDATA_EMISSING : TDATA_EIO, "%s: %s%s", path,
            errno == ENOENT ? "missing shard: " : "", strerror(errno));
    s->file_size = (uint64_t)st.st_size;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = (hid_t)tdata_h5_fapl();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: not a readable HDF5 file "
                          "(truncated or corrupt?)",
                          path);
    int rc = _load(f, s, load_classes);
    H5Fclose(f);
    if (rc)
        return rc;
    /* Every chunk must lie inside the file: catches truncation that HDF5's
     * superblock check misses (it records the end-of-file address too). */
    for (uint64_t c = 0; c < s->nchunks; c++)
        if (s->chunk_addr[c] + s->chunk_bytes > s->file_size)
            return TORUS_FAIL(TDATA_ETRUNCATED,
                              "%s: truncated: chunk %llu "
                              "ends past the file's %llu bytes",
                              path, (unsigned long long)c,
                              (unsigned long long)s->file_size);
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0)
        return TORUS_FAIL(TDATA_EIO, "%s: %s", path, strerror(errno));
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

int tdata_shard_name(const tdata_shard *s, uint64_t i, char *buf, size_t n)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = (hid_t)tdata_h5_fapl();
    hid_t f = H5Fopen(s->path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return TORUS_FAIL(TDATA_EIO, "%s: cannot open", s->path);
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

char **tdata_shard_names(const tdata_shard *s)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = (hid_t)tdata_h5_fapl();
    hid_t f = H5Fopen(s->path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0) {
        TORUS_FAIL(TDATA_EIO, "%s: cannot open", s->path);
        return NULL;
    }
    char **v = _read_strings(f, "names", s->n);
    H5Fclose(f);
    if (!v)
        TORUS_FAIL(TDATA_EFORMAT, "%s: bad names dataset", s->path);
    return v;
}

void tdata_shard_close(tdata_shard *s)
{
    if (s->fd >= 0)
        close(s->fd);
    if (s->class_ids)
        for (int i = 0; i < s->num_classes; i++)
            free(s->class_ids[i]);
    if (s->class_words)
        for (int i = 0; i < s->num_classes; i++)
            free(s->class_words[i]);
    free(s->class_ids);
    free(s->class_words);
    free(s->path);
    free(s->offsets);
    free(s->labels);
    free(s->crcs);
    free(s->chunk_addr);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}
