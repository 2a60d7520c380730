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
 * fill=V: every element of it becomes the float V (nan, inf), written
 * through HDF5 so that its checksum still holds. Exit 0, or 1 with a
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

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ckpt_attr FILE NAME "
                        "i64x1000|str60k|f64|f64=V|i64=V|str=V|vlen|fill=V\n");
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
