/*
 * fuzz_shard.c: the shard half of fuzz_data.c. Each input writes a real,
 * valid shard with libtdata (dense or encoded, 1..4 images), rewrites it
 * through the HDF5 C API as the input's bytes say (up to 8 edits: an
 * attribute replaced by one of another type, rank or size, a dataset
 * replaced by one of another length or type, or either removed), and opens
 * it with tdata_shard_open. Whatever opens must then read back within its
 * own bounds.
 */
#include "config.h"

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/format/format.h"
#include "tests/fuzz/fuzz_input.h"

void fuzz_data_shard(const uint8_t *d, size_t n, const char *dir);

static const char *const _attrs[] = {
    "torus_format_version", "layout",      "split",       "creator",
    "num_images",           "num_classes", "shard_index", "num_shards",
    "image_shape_hwc",      "pixel_sum",   "pixel_count", "num_rejected",
    "num_reencoded",        "chunk_bytes"};
static const char *const _dsets[] = {"labels",     "crc32c", "offsets",
                                     "images",     "names",  "class_ids",
                                     "class_words"};

/* A valid shard of k images, 4 x 4 x 3 dense or 10-byte encoded. */
static int _base(const char *path, int dense, int k)
{
    static const char *const ids[] = {"a", "b"}, *const words[] = {"", "w"};
    static const char *const names[] = {"n0", "n1", "n2", "n3"};
    uint8_t data[4 * 48];
    uint64_t off[5];
    int32_t lab[4];
    for (int i = 0; i < (int)sizeof data; i++)
        data[i] = (uint8_t)(i * 13);
    for (int i = 0; i <= k; i++)
        off[i] = (uint64_t)i * 10;
    for (int i = 0; i < k; i++)
        lab[i] = i & 1;
    tdata_shard_meta m = {.layout =
                              dense ? TDATA_LAYOUT_DENSE : TDATA_LAYOUT_ENCODED,
                          .num_shards = 1,
                          .num_classes = 2,
                          .split = "train",
                          .creator = "fuzz",
                          .height = 4,
                          .width = 4,
                          .channels = 3,
                          .class_ids = ids,
                          .class_words = words};
    return tdata_shard_write(path, &m, (uint64_t)k, data, off, lab, names);
}

/* Replace attribute NAME by one of the input's type and size. */
static void _edit_attr(hid_t f, const char *name, _in *in)
{
    uint8_t t = _u8(in), c = _u8(in);
    hsize_t count = c % 7 == 6 ? 4096 : c % 7;
    uint64_t v = _u64(in);
    if (H5Aexists(f, name) > 0)
        H5Adelete(f, name);
    hid_t sp =
        count ? H5Screate_simple(1, &count, NULL) : H5Screate(H5S_SCALAR);
    hsize_t nv = count ? count : 1;
    hid_t ty = H5Tcopy(t % 5 == 0   ? H5T_NATIVE_UINT64
                       : t % 5 == 1 ? H5T_NATIVE_INT32
                       : t % 5 == 2 ? H5T_NATIVE_DOUBLE
                       : t % 5 == 3 ? H5T_NATIVE_UINT8
                                    : H5T_C_S1);
    if (t % 5 == 4)
        H5Tset_size(ty, 1 + v % 300);
    size_t esz = H5Tget_size(ty);
    uint8_t *buf = malloc(nv * esz);
    for (size_t i = 0; i < nv * esz; i++)
        buf[i] = (uint8_t)(v >> (8 * (i % 8)));
    hid_t a = H5Acreate2(f, name, ty, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        H5Awrite(a, ty, buf);
        H5Aclose(a);
    }
    free(buf);
    H5Tclose(ty);
    H5Sclose(sp);
}

/* Replace dataset NAME by a 1-D one of the input's length and type. */
static void _edit_dset(hid_t f, const char *name, _in *in)
{
    uint8_t t = _u8(in);
    hsize_t len = _u8(in) % 64;
    uint64_t v = _u64(in);
    H5Ldelete(f, name, H5P_DEFAULT);
    hid_t ty = t & 1 ? H5T_NATIVE_UINT8 : H5T_NATIVE_UINT64;
    hid_t sp = H5Screate_simple(1, &len, NULL);
    hid_t d =
        H5Dcreate2(f, name, ty, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    uint64_t buf[64];
    for (int i = 0; i < 64; i++)
        buf[i] = v * (uint64_t)i;
    if (d >= 0) {
        if (len)
            H5Dwrite(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        H5Dclose(d);
    }
    H5Sclose(sp);
}

static void _edit(const char *path, _in *in)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return;
    for (int e = 0; e < 8 && in->n; e++) {
        uint8_t op = _u8(in), which = _u8(in);
        const char *an = _attrs[which % (sizeof _attrs / sizeof *_attrs)];
        const char *dn = _dsets[which % (sizeof _dsets / sizeof *_dsets)];
        if (op % 4 == 0)
            _edit_attr(f, an, in);
        else if (op % 4 == 1)
            H5Adelete(f, an);
        else if (op % 4 == 2)
            _edit_dset(f, dn, in);
        else
            H5Ldelete(f, dn, H5P_DEFAULT);
    }
    H5Fclose(f);
}

/* What opened must read back inside its bounds. */
static void _use(tdata_shard *s)
{
    uint64_t lo = s->offsets[0], hi = s->offsets[s->n];
    if (hi - lo > s->file_size || s->nchunks * s->chunk_bytes < hi)
        abort();
    uint8_t *buf = malloc(hi - lo + 1);
    tdata_shard_pread(s, lo, hi, buf);
    free(buf);
    char name[64];
    if (s->n)
        tdata_shard_name(s, s->n - 1, name, sizeof name);
    char **v = tdata_shard_names(s);
    for (uint64_t i = 0; v && i < s->n; i++)
        free(v[i]);
    free(v);
}

void fuzz_data_shard(const uint8_t *d, size_t n, const char *dir)
{
    _in in = {d, n};
    uint8_t h = _u8(&in);
    char path[512];
    snprintf(path, sizeof path, "%s/shard.h5", dir);
    if (_base(path, h & 1, 1 + (h >> 1) % 4) != TDATA_OK)
        abort();
    _edit(path, &in);
    tdata_shard s;
    if (tdata_shard_open(path, &s, 1) == TDATA_OK)
        _use(&s);
    tdata_shard_close(&s);
}
