/*
 * fuzz_ckpt.c: libFuzzer target for torus-train's checkpoint loader
 * (trainer/train/checkpoint.c, ttrain_ckpt_load and ttrain_ckpt_load_latest)
 * fed mutated HDF5 checkpoints through the real HDF5 library. At start a
 * real checkpoint of a small net (tiny-cnn on the oneDNN backend, its SGD
 * state and a training position) is saved by ttrain_ckpt_save; its
 * attributes and datasets are listed from the file itself, so the target
 * follows the format as it grows. Each input copies that file and rewrites
 * it through the HDF5 C API as its bytes say (up to 8 edits: an attribute
 * replaced by one of another type, rank, size or value (NaN, inf, 2^62,
 * negative), an element of a dataset poisoned the same way, a dataset
 * replaced by one of another length or type, or either removed; or a
 * dataset's storage made another file's: external storage, a virtual
 * dataset, an external link, or a gzip filter), then loads it into the
 * net. tests/fuzz/fuzz_ckpt_py.py reads the same inputs the same way for
 * the Python package's reader. The loader must refuse or load without a crash, a
 * sanitizer report or a leak. Built and run by `make fuzz-ckpt`,
 * `make fuzz-smoke` and tests/integration/fuzz_smoke.sh (seeds in
 * tests/fuzz/corpus-ckpt).
 */
#include "config.h"

#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "tests/fuzz/fuzz_input.h"
#include "trainer/backends/tbackends.h"
#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"
#include "trainer/train/ttrain_checkpoint.h"

#define _MAXN 64 /* names kept of each kind */

static char _dir[256], _base[512], _work[512];
/* Another file's bytes, which no checkpoint may read: raw, and as /x of an
 * HDF5 file. */
static char _secret[512], _secret_h5[512];
static char *_attrs[_MAXN], *_dsets[_MAXN];
static int _nattrs, _ndsets;
static teng_backend *_bk;
static teng_net *_net;
static topt_sgd _opt;
static ttrain_ckpt_meta _meta;

static herr_t _attr_cb(hid_t o, const char *name, const H5A_info_t *i, void *d)
{
    (void)o, (void)i, (void)d;
    if (_nattrs < _MAXN)
        _attrs[_nattrs++] = strdup(name);
    return 0;
}

static herr_t _obj_cb(hid_t o, const char *name, const H5O_info_t *i, void *d)
{
    (void)o, (void)d;
    if (i->type == H5O_TYPE_DATASET && _ndsets < _MAXN)
        _dsets[_ndsets++] = strdup(name);
    return 0;
}

/* The secret files (1 << 16 floats of a marker). */
static void _secrets(void)
{
    static float v[1 << 16];
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        v[i] = 1234.5f;
    snprintf(_secret, sizeof _secret, "%s/secret.bin", _dir);
    snprintf(_secret_h5, sizeof _secret_h5, "%s/secret.h5", _dir);
    FILE *s = fopen(_secret, "wb");
    if (!s || fwrite(v, sizeof v, 1, s) != 1 || fclose(s))
        abort();
    hsize_t n = sizeof(v) / sizeof(v[0]);
    hid_t f = H5Fcreate(_secret_h5, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "x", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    if (d < 0 ||
        H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        abort();
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(f);
}

/* The net, its optimizer and one saved checkpoint, _base. */
static void _setup(void)
{
    teng_backend_opts bo = {.threads = 1};
    tmodel_spec s = tmodel_defaults(TMODEL_TINY_CNN);
    s.in_channels = 1;
    s.image_size = 12;
    s.classes = 4;
    topt_config oc;
    topt_config_defaults(&oc);
    if (tbackends_open("dnnl", &bo, &_bk) || teng_net_create(&_net) ||
        tmodel_build(_net, &s) < 0 || teng_net_compile(_net, _bk, 2) ||
        tmodel_init(_net, 1) || topt_sgd_init(&_opt, _net, &oc)) {
        fprintf(stderr, "fuzz_ckpt: setup: %s\n", torus_error_msg());
        abort();
    }
    _meta = (ttrain_ckpt_meta){.run = "0123abcd",
                               .model = "tiny-cnn, 1x12x12, 4 classes",
                               .world = 1,
                               .batch = "0:8 over 64 samples per epoch",
                               .data = "fuzz",
                               .data_id = "fuzz",
                               .wire = "fp32",
                               .loss_scale = "off"};
    ttrain_progress p = {.epoch = 1,
                         .step = 2,
                         .global_step = 10,
                         .samples = 80,
                         .dropout_step = 10};
    char dir[300];
    snprintf(dir, sizeof dir, "%s/base", _dir);
    if (ttrain_ckpt_save(dir, 1, 0, &_meta, _net, &_opt, &p, "fuzz config")) {
        fprintf(stderr, "fuzz_ckpt: save: %s\n", torus_error_msg());
        abort();
    }
    snprintf(_base, sizeof _base, "%s/ckpt-10-0123abcd.h5", dir);
    hid_t f = H5Fopen(_base, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        abort();
    H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_INC, NULL, _attr_cb, NULL);
    H5Ovisit(f, H5_INDEX_NAME, H5_ITER_INC, _obj_cb, NULL);
    H5Fclose(f);
    if (!_nattrs || !_ndsets)
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *t = getenv("TMPDIR");
    snprintf(_dir, sizeof _dir, "%s/fuzz_ckpt.XXXXXX", t ? t : "/tmp");
    if (!mkdtemp(_dir))
        abort();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    _secrets();
    _setup();
    char w[300];
    snprintf(w, sizeof w, "%s/work", _dir);
    mkdir(w, 0755);
    snprintf(_work, sizeof _work, "%s/ckpt-10-0123abcd.h5", w);
    return 0;
}

/* A value the loader must judge: NaN, infinities, huge, negative, zero, or
 * the input's bits. */
static double _value(_in *in)
{
    static const double special[] = {NAN, INFINITY, -INFINITY, 0x1p62, -1.0,
                                     0.0, 1e-300,   0x1p31,    1e308,  0.5};
    uint8_t k = _u8(in);
    uint64_t v = _u64(in);
    if (k % 12 < 10)
        return special[k % 12];
    return k % 12 == 10 ? (double)(int64_t)v : (double)(v % 1000);
}

/* Replace attribute NAME of F by one of the input's type, rank and size,
 * every element the value drawn. */
static void _edit_attr(hid_t f, const char *name, _in *in)
{
    uint8_t t = _u8(in), c = _u8(in);
    hsize_t count = c % 6 == 5 ? 300 : c % 6;
    double v = _value(in);
    H5Adelete(f, name);
    hid_t sp =
        count ? H5Screate_simple(1, &count, NULL) : H5Screate(H5S_SCALAR);
    hsize_t nv = count ? count : 1;
    hid_t ty = H5Tcopy(t % 5 == 0   ? H5T_NATIVE_INT64
                       : t % 5 == 1 ? H5T_NATIVE_INT32
                       : t % 5 == 2 ? H5T_NATIVE_DOUBLE
                       : t % 5 == 3 ? H5T_NATIVE_FLOAT
                                    : H5T_C_S1);
    if (t % 5 == 4)
        H5Tset_size(ty, 1 + (size_t)(isfinite(v) ? fmod(fabs(v), 300) : 7));
    double *dv = malloc(nv * sizeof *dv);
    for (hsize_t i = 0; i < nv; i++)
        dv[i] = v;
    hid_t a = H5Acreate2(f, name, ty, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0 && t % 5 == 4) {
        char *s = calloc(nv, H5Tget_size(ty));
        memset(s, 'x', nv * H5Tget_size(ty) - 1);
        H5Awrite(a, ty, s);
        free(s);
    } else if (a >= 0) {
        H5Awrite(a, H5T_NATIVE_DOUBLE, dv); /* HDF5 converts (clips) */
    }
    if (a >= 0)
        H5Aclose(a);
    free(dv);
    H5Tclose(ty);
    H5Sclose(sp);
}

/* Element k of dataset NAME set to the value drawn (the file's own
 * checksum filter is rewritten with it: only the loader's checks see it). */
static void _poison(hid_t f, const char *name, _in *in)
{
    uint64_t k = _u64(in);
    double v = _value(in);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0)
        return;
    hid_t sp = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    if (n > 0 && n < (1 << 22)) {
        double *buf = malloc((size_t)n * sizeof *buf);
        if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >=
            0) {
            buf[k % (uint64_t)n] = v;
            H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        }
        free(buf);
    }
    H5Sclose(sp);
    H5Dclose(d);
}

/* Replace dataset NAME by a 1-D one of the input's length and type. */
static void _edit_dset(hid_t f, const char *name, _in *in)
{
    uint8_t t = _u8(in);
    hsize_t len = _u8(in) % 200;
    double v = _value(in);
    H5Ldelete(f, name, H5P_DEFAULT);
    hid_t ty = t % 3 == 0   ? H5T_NATIVE_FLOAT
               : t % 3 == 1 ? H5T_NATIVE_DOUBLE
                            : H5T_NATIVE_INT64;
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = H5Screate_simple(1, &len, NULL);
    hid_t d = H5Dcreate2(f, name, ty, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    double buf[200];
    for (int i = 0; i < 200; i++)
        buf[i] = v;
    if (d >= 0) {
        if (len)
            H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        H5Dclose(d);
    }
    H5Sclose(sp);
    H5Pclose(lcpl);
}

/* The count of dataset NAME (4 when it is none), which a replacement of
 * its storage keeps. Removes NAME. */
static hsize_t _take(hid_t f, const char *name)
{
    hsize_t n = 4;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d >= 0) {
        hid_t sp = H5Dget_space(d);
        hssize_t k = H5Sget_simple_extent_npoints(sp);
        n = k > 0 && k < (1 << 16) ? (hsize_t)k : 4;
        H5Sclose(sp);
        H5Dclose(d);
    }
    H5Ldelete(f, name, H5P_DEFAULT);
    return n;
}

/* NAME's storage made another file's (op 5: external storage, 6: a
 * virtual dataset, 7: an external link) or gzip-filtered (8). */
static void _foreign(hid_t f, const char *name, int op)
{
    hsize_t n = _take(f, name);
    if (op == 7) {
        H5Lcreate_external(_secret_h5, "/x", f, name, H5P_DEFAULT,
                           H5P_DEFAULT);
        return;
    }
    hid_t sp = H5Screate_simple(1, &n, NULL), p = H5Pcreate(H5P_DATASET_CREATE);
    if (op == 5)
        H5Pset_external(p, _secret, 0, n * 4);
    else if (op == 6)
        H5Pset_virtual(p, sp, _secret_h5, "/x", sp);
    else {
        H5Pset_chunk(p, 1, &n);
        H5Pset_deflate(p, 6);
        H5Pset_fletcher32(p);
    }
    hid_t d = H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, p,
                         H5P_DEFAULT);
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(p);
    H5Sclose(sp);
}

static void _edit(const char *path, _in *in)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return;
    for (int e = 0; e < 8 && in->n; e++) {
        uint8_t op = _u8(in), which = _u8(in);
        const char *an = _attrs[which % _nattrs];
        const char *dn = _dsets[which % _ndsets];
        switch (op % 9) {
        case 0:
            _edit_attr(f, an, in);
            break;
        case 1:
            H5Adelete(f, an);
            break;
        case 2:
            _poison(f, dn, in);
            break;
        case 3:
            _edit_dset(f, dn, in);
            break;
        case 4:
            H5Ldelete(f, dn, H5P_DEFAULT);
            break;
        default:
            _foreign(f, dn, op % 9);
        }
    }
    H5Fclose(f);
}

static void _copy(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    if (!a || !b)
        abort();
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        if (fwrite(buf, 1, n, b) != n)
            abort();
    fclose(a);
    if (fclose(b))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    _in in = {data, size};
    _copy(_base, _work);
    _edit(_work, &in);
    ttrain_progress p;
    ttrain_ckpt_meta got;
    char note[512], name[256];
    int rc = ttrain_ckpt_load(_work, &_meta, 0, _net, &_opt, &p, &got, note,
                              sizeof note);
    if (rc != 0 && rc != -1 && rc != -2)
        abort();
    char wd[300];
    snprintf(wd, sizeof wd, "%s/work", _dir);
    rc = ttrain_ckpt_load_latest(wd, &_meta, 0, _net, &_opt, &p, &got, name,
                                 sizeof name, note, sizeof note);
    if (rc < -2 || rc > 1)
        abort();
    unlink(_work);
    return 0;
}
