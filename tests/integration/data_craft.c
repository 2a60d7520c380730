/* data_craft.c: test helper that crafts hostile inputs for the data
 * readers from real files, with the HDF5, TurboJPEG and zlib C APIs (no
 * h5py needed):
 *   data_craft attr FILE NAME TYPE V...   replace attribute NAME of the
 *                                         HDF5 FILE's root with a 1-D array
 *                                         of the values; TYPE is u64, i32,
 *                                         f64 or str (one string value)
 *   data_craft grow FILE NAME N           replace NAME with N doubles
 *   data_craft jpeg OUT W H [DW DH]       write a real W x H RGB JPEG; with
 *                                         DW DH, patch its frame header to
 *                                         declare DW x DH (a pixel bomb)
 *   data_craft png OUT W H                a PNG whose header declares
 *                                         W x H, with one tiny IDAT
 * Exit 0 on success, 2 on errors (message on stderr). */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <zlib.h>

static int _die(const char *what)
{
    fprintf(stderr, "data_craft: %s\n", what);
    return 2;
}

/* Write attribute NAME (deleting any old one) from n values of MT,
 * stored as FT. */
static int _put(const char *file, const char *name, hid_t ft, hid_t mt,
                const void *v, hsize_t n)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return _die("cannot open the HDF5 file");
    if (H5Aexists(f, name) > 0)
        H5Adelete(f, name);
    hid_t sp = n ? H5Screate_simple(1, &n, NULL) : H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, ft, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a >= 0 && H5Awrite(a, mt, v) >= 0 ? 0 : _die("cannot write");
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    H5Fclose(f);
    return rc;
}

static int _attr(int argc, char **argv)
{
    const char *file = argv[2], *name = argv[3], *type = argv[4];
    int n = argc - 5;
    if (n < 1)
        return _die("attr needs values");
    if (!strcmp(type, "str")) {
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, strlen(argv[5]) + 1);
        int rc = _put(file, name, t, t, argv[5], 0);
        H5Tclose(t);
        return rc;
    }
    double d[16];
    uint64_t u[16];
    int32_t i[16];
    for (int k = 0; k < n && k < 16; k++) {
        d[k] = strtod(argv[5 + k], NULL);
        u[k] = strtoull(argv[5 + k], NULL, 0);
        i[k] = (int32_t)strtol(argv[5 + k], NULL, 0);
    }
    if (n > 16)
        return _die("at most 16 values");
    if (!strcmp(type, "u64"))
        return _put(file, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, u, n);
    if (!strcmp(type, "i32"))
        return _put(file, name, H5T_STD_I32LE, H5T_NATIVE_INT32, i, n);
    if (!strcmp(type, "f64"))
        return _put(file, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, d, n);
    return _die("TYPE is u64, i32, f64 or str");
}

static int _grow(char **argv)
{
    long n = strtol(argv[4], NULL, 10);
    if (n < 1 || n > 1 << 20)
        return _die("bad N");
    double *v = calloc((size_t)n, sizeof *v);
    if (!v)
        return _die("no memory");
    int rc = _put(argv[2], argv[3], H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, v,
                  (hsize_t)n);
    free(v);
    return rc;
}

static int _write(const char *out, const void *p, size_t n)
{
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        return _die("cannot write the output file");
    return 0;
}

/* Patch the first SOF marker's height and width (big-endian 16 bits). */
static int _patch_sof(unsigned char *j, unsigned long n, int dw, int dh)
{
    for (unsigned long k = 2; k + 9 < n; k++)
        if (j[k] == 0xFF && (j[k + 1] == 0xC0 || j[k + 1] == 0xC2)) {
            j[k + 5] = (unsigned char)(dh >> 8);
            j[k + 6] = (unsigned char)dh;
            j[k + 7] = (unsigned char)(dw >> 8);
            j[k + 8] = (unsigned char)dw;
            return 0;
        }
    return -1;
}

static int _jpeg(int argc, char **argv)
{
    int w = atoi(argv[3]), h = atoi(argv[4]);
    if (w < 1 || h < 1 || w > 4096 || h > 4096)
        return _die("bad size");
    unsigned char *px = malloc((size_t)w * h * 3);
    if (!px)
        return _die("no memory");
    for (size_t k = 0; k < (size_t)w * h * 3; k++)
        px[k] = (unsigned char)(k * 7 + k / 3);
    tjhandle tj = tjInitCompress();
    unsigned char *j = NULL;
    unsigned long n = 0;
    int rc = tjCompress2(tj, px, w, 0, h, TJPF_RGB, &j, &n, TJSAMP_420, 90, 0);
    free(px);
    if (rc == 0 && argc > 6)
        rc = _patch_sof(j, n, atoi(argv[5]), atoi(argv[6]));
    rc = rc == 0 ? _write(argv[2], j, n) : _die("JPEG encode or patch failed");
    tjFree(j);
    tjDestroy(tj);
    return rc;
}

/* Append one PNG chunk (length, type, data, CRC) to p at *n. */
static void _chunk(unsigned char *p, size_t *n, const char *type,
                   const unsigned char *d, uint32_t len)
{
    unsigned char *c = p + *n;
    c[0] = (unsigned char)(len >> 24);
    c[1] = (unsigned char)(len >> 16);
    c[2] = (unsigned char)(len >> 8);
    c[3] = (unsigned char)len;
    memcpy(c + 4, type, 4);
    if (len)
        memcpy(c + 8, d, len);
    uint32_t crc = (uint32_t)crc32(0, c + 4, len + 4);
    c[8 + len] = (unsigned char)(crc >> 24);
    c[9 + len] = (unsigned char)(crc >> 16);
    c[10 + len] = (unsigned char)(crc >> 8);
    c[11 + len] = (unsigned char)crc;
    *n += 12 + len;
}

static int _png(char **argv)
{
    uint32_t w = (uint32_t)strtoul(argv[3], NULL, 10),
             h = (uint32_t)strtoul(argv[4], NULL, 10);
    unsigned char p[256], ihdr[13] = {0}, raw[8] = {0}, z[64];
    size_t n = 8;
    memcpy(p, "\x89PNG\r\n\x1a\n", 8);
    for (int k = 0; k < 4; k++) {
        ihdr[k] = (unsigned char)(w >> (24 - 8 * k));
        ihdr[4 + k] = (unsigned char)(h >> (24 - 8 * k));
    }
    ihdr[8] = 8; /* bit depth; colour type 0: grey */
    _chunk(p, &n, "IHDR", ihdr, 13);
    uLongf zl = sizeof z;
    compress(z, &zl, raw, sizeof raw);
    _chunk(p, &n, "IDAT", z, (uint32_t)zl);
    _chunk(p, &n, "IEND", NULL, 0);
    return _write(argv[2], p, n);
}

int main(int argc, char **argv)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (argc >= 6 && !strcmp(argv[1], "attr"))
        return _attr(argc, argv);
    if (argc == 5 && !strcmp(argv[1], "grow"))
        return _grow(argv);
    if ((argc == 5 || argc == 7) && !strcmp(argv[1], "jpeg"))
        return _jpeg(argc, argv);
    if (argc == 5 && !strcmp(argv[1], "png"))
        return _png(argv);
    return _die("usage: see the head of data_craft.c");
}
