/* ckpt_attr.c: replaces one attribute of an HDF5 file by a hostile one, to
 * test that torus-train reads checkpoints attribute by attribute with their
 * type, rank and size checked (train_ckpt.sh).
 *
 *   ckpt_attr FILE NAME KIND
 *
 * KIND: i64x1000 (1000 64-bit integers where one is expected), str60k (a
 * fixed-length string of 60000 bytes: an object header holds at most
 * 64 KiB), f64 (a double where a string is expected), f64=V (the double V,
 * e.g. a value out of range, nan, inf), i64=V (the 64-bit integer V), str=V
 * (the fixed-length string V), vlen
 * (a variable-length string); or, when NAME is a dataset (params/conv1.w),
 * fill=V: every element of it becomes the float V (nan, inf, -1), written
 * through HDF5 so that its checksum still holds; or its storage becomes
 * another file's, which no reader may read: external=PATH (raw floats in
 * PATH, written here), virtual=PATH and extlink=PATH (a virtual dataset
 * of, or an external link to, /x of the HDF5 file PATH, written here), or
 * gzip (the same values through a gzip filter). Exit 0, or 1 with a
 * message.
 */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int _write(hid_t f, const char *name, hid_t type, hid_t space,
                  const void *v)
{
    hid_t a = H5Acreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, type, v) < 0;
    if (a >= 0)
        H5Aclose(a);
    return rc;
}

static int _forge(hid_t f, const char *name, const char *kind)
{
    static int64_t many[1000];
    hsize_t n = 1000;
    hid_t scalar = H5Screate(H5S_SCALAR), rc = 1;
    if (!strcmp(kind, "i64x1000")) {
        hid_t s = H5Screate_simple(1, &n, NULL);
        for (int i = 0; i < 1000; i++)
            many[i] = 0x4141414141414141LL;
        rc = _write(f, name, H5T_NATIVE_INT64, s, many);
        H5Sclose(s);
    } else if (!strcmp(kind, "str60k")) {
        char *big = malloc(60000);
        hid_t t = H5Tcopy(H5T_C_S1);
        memset(big, 'A', 60000);
        H5Tset_size(t, 60000);
        rc = big ? _write(f, name, t, scalar, big) : 1;
        H5Tclose(t);
        free(big);
    } else if (!strcmp(kind, "f64")) {
        double d = 1.5;
        rc = _write(f, name, H5T_NATIVE_DOUBLE, scalar, &d);
    } else if (!strncmp(kind, "f64=", 4)) {
        char *end;
        double d = strtod(kind + 4, &end);
        rc = *end ? 1 : _write(f, name, H5T_NATIVE_DOUBLE, scalar, &d);
    } else if (!strncmp(kind, "str=", 4)) {
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, strlen(kind + 4) + 1);
        rc = _write(f, name, t, scalar, kind + 4);
        H5Tclose(t);
    } else if (!strncmp(kind, "i64=", 4)) {
        char *end;
        int64_t v = strtoll(kind + 4, &end, 0);
        rc = *end ? 1 : _write(f, name, H5T_NATIVE_INT64, scalar, &v);
    } else if (!strcmp(kind, "vlen")) {
        const char *v = "tiny-cnn";
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        rc = _write(f, name, t, scalar, &v);
        H5Tclose(t);
    }
    H5Sclose(scalar);
    return (int)rc;
}

/* Every element of dataset name set to v. */
static int _fill(hid_t f, const char *name, const char *v)
{
    char *end;
    float x = strtof(v, &end);
    hid_t d = *end ? -1 : H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0)
        return 1;
    hid_t s = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(s);
    float *buf = n > 0 ? malloc(sizeof(float) * (size_t)n) : NULL;
    int rc = !buf;
    for (hssize_t i = 0; buf && i < n; i++)
        buf[i] = x;
    rc = rc ||
         H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0;
    free(buf);
    H5Sclose(s);
    H5Dclose(d);
    return rc;
}

/* PATH as an HDF5 file whose /x holds n floats of 1234.5 (raw: the floats
 * alone). */
static int _secret(const char *path, hsize_t n, int raw)
{
    float *v = malloc(sizeof(float) * n);
    int rc = !v;
    for (hsize_t i = 0; v && i < n; i++)
        v[i] = 1234.5f;
    if (!rc && raw) {
        FILE *o = fopen(path, "wb");
        rc = !o || fwrite(v, sizeof(float), n, o) != n;
        rc = (o && fclose(o)) || rc;
    } else if (!rc) {
        hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hid_t s = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(f, "x", H5T_IEEE_F32LE, s, H5P_DEFAULT,
                             H5P_DEFAULT, H5P_DEFAULT);
        rc = d < 0 ||
             H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0;
        H5Dclose(d);
        H5Sclose(s);
        H5Fclose(f);
    }
    free(v);
    return rc;
}

/* Dataset name recreated with its count and another storage (see above). */
static int _store(hid_t f, const char *name, const char *kind)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0)
        return 1;
    hid_t sp = H5Dget_space(d);
    hssize_t got = H5Sget_simple_extent_npoints(sp);
    hsize_t n = got > 0 ? (hsize_t)got : 1;
    H5Dclose(d);
    H5Ldelete(f, name, H5P_DEFAULT);
    const char *path = strchr(kind, '=') ? strchr(kind, '=') + 1 : "";
    if (!strncmp(kind, "extlink=", 8)) {
        H5Sclose(sp);
        return _secret(path, n, 0) ||
               H5Lcreate_external(path, "/x", f, name, H5P_DEFAULT,
                                  H5P_DEFAULT) < 0;
    }
    hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    int rc = 0;
    if (!strncmp(kind, "external=", 9))
        rc = _secret(path, n, 1) || H5Pset_external(p, path, 0, n * 4) < 0;
    else if (!strncmp(kind, "virtual=", 8))
        rc = _secret(path, n, 0) || H5Pset_virtual(p, sp, path, "/x", sp) < 0;
    else
        rc = H5Pset_chunk(p, 1, &n) < 0 || H5Pset_deflate(p, 6) < 0 ||
             H5Pset_fletcher32(p) < 0;
    d = rc ? -1
           : H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, p,
                        H5P_DEFAULT);
    if (d >= 0 && !strcmp(kind, "gzip")) {
        float *z = calloc(n, sizeof(float));
        rc = !z || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                            z) < 0;
        free(z);
    }
    rc = rc || d < 0;
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(p);
    H5Sclose(sp);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ckpt_attr FILE NAME "
                        "i64x1000|str60k|f64|f64=V|i64=V|str=V|vlen|fill=V|"
                        "external=P|virtual=P|extlink=P|gzip\n");
        return 1;
    }
    hid_t f = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) {
        fprintf(stderr, "ckpt_attr: cannot open %s\n", argv[1]);
        return 1;
    }
    int rc;
    if (!strncmp(argv[3], "fill=", 5))
        rc = _fill(f, argv[2], argv[3] + 5);
    else if (!strncmp(argv[3], "external=", 9) ||
             !strncmp(argv[3], "virtual=", 8) ||
             !strncmp(argv[3], "extlink=", 8) || !strcmp(argv[3], "gzip"))
        rc = _store(f, argv[2], argv[3]);
    else {
        rc = H5Aexists(f, argv[2]) > 0 && H5Adelete(f, argv[2]) < 0;
        rc = rc || _forge(f, argv[2], argv[3]);
    }
    H5Fclose(f);
    if (rc)
        fprintf(stderr, "ckpt_attr: cannot write %s %s into %s\n", argv[3],
                argv[2], argv[1]);
    return rc;
}
