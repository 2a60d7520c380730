/*
 * fuzz_data.c: libFuzzer target for every reader of user files in
 * libtdata: the index parser, the shard reader (real HDF5 shards written
 * by libtdata, then rewritten from the fuzzer's bytes: attributes of any
 * type, rank and size, datasets of any length, or removed), and the
 * packer's inputs (JPEG header and region decode, PNG, IDX), torus-pack's
 * saved listing, and the escaping of names in the text files (its round
 * trip must be exact and its output plain). The first input byte picks
 * the reader (240-247: listing and names; else modulo 5); the rest is its
 * input. Built and run by
 * tests/integration/data_fuzz.sh (CI, a fixed short time, seeds in
 * tests/fuzz/corpus-data), or by hand:
 *
 *   make fuzz-data             # clang -fsanitize=fuzzer,address,undefined
 *   make fuzz-data-run FUZZ_SECONDS=60
 */
#include "config.h"

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/format/format.h"
#include "data/image/image.h"
#include "data/pack/pack.h"

static char _dir[256]; /* this process's scratch directory */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *t = getenv("TMPDIR");
    snprintf(_dir, sizeof _dir, "%s/fuzz_data.XXXXXX", t ? t : "/tmp");
    if (!mkdtemp(_dir))
        abort();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* Small limits keep each input fast; the checks are what is tested. */
    tdata_set_max_pixels(1u << 20);
    tdata_set_max_idx_bytes(1u << 20);
    return 0;
}

static void _put(const char *name, const uint8_t *d, size_t n, char *path,
                 size_t pn)
{
    snprintf(path, pn, "%s/%s", _dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n || fclose(f) != 0)
        abort();
}

static void _index(const uint8_t *d, size_t n)
{
    char p[512];
    _put("index.txt", d, n, p, sizeof p);
    tdata_index ix;
    if (tdata_index_read(p, &ix) == TDATA_OK) {
        /* Everything it promises must be there. */
        for (int i = 0; i < ix.num_shards; i++)
            if (strchr(ix.shards[i].file, '/'))
                abort();
        for (int i = 0; i < ix.num_classes; i++)
            if (!ix.class_ids[i] || !ix.class_words[i])
                abort();
        tdata_index_free(&ix);
    }
}

static void _jpeg(const uint8_t *d, size_t n)
{
    tdata_jdec *j = tdata_jdec_new();
    tdata_image im;
    memset(&im, 0, sizeof im);
    int w, h;
    if (tdata_jpeg_header(j, d, n, &w, &h, NULL, NULL) == TDATA_OK) {
        tdata_jpeg_decode_region(j, d, n, 0, 0, w, h, 8, TDATA_DEC_STRICT, &im);
        if (tdata_jpeg_decode_region(j, d, n, w / 4, h / 4, w / 2 + 1,
                                     h / 2 + 1, 3, 0, &im) == TDATA_OK) {
            uint8_t out[16 * 16 * 3];
            tdata_scratch sc = {0};
            tdata_resize(im.px + im.off, im.w, im.h, im.stride, 3, 0, 0, im.w,
                         im.h, out, 16, 16, &sc);
            tdata_scratch_free(&sc);
        }
    }
    tdata_image_free(&im);
    tdata_jdec_free(j);
}

static void _png(const uint8_t *d, size_t n)
{
    tdata_image im;
    memset(&im, 0, sizeof im);
    char msg[256];
    tdata_png_decode(d, n, &im, msg, sizeof msg);
    tdata_image_free(&im);
}

/* IDX: byte 0 splits the rest into the image and the label file. */
static void _idx(const uint8_t *d, size_t n)
{
    if (n < 1)
        return;
    size_t cut = 1 + (n - 1) * d[0] / 256;
    char pi[512], pl[512];
    _put("images", d + 1, cut - 1, pi, sizeof pi);
    _put("labels", d + cut, n - cut, pl, sizeof pl);
    tdata_pack_src src;
    memset(&src, 0, sizeof src);
    tdata_idx_load(pi, pl, &src);
    tdata_pack_src_free(&src);
}

/* A listing read back: what it promises must be there and in range. */
static void _listing(const uint8_t *d, size_t n)
{
    char p[512];
    _put("listing", d, n, p, sizeof p);
    tdata_pack_src src;
    if (tdata_listing_read(p, "/src", &src) == TDATA_OK)
        for (uint64_t i = 0; i < src.n; i++)
            if (!src.items[i].name || !src.items[i].path ||
                src.items[i].label < 0 ||
                src.items[i].label >= src.num_classes ||
                strncmp(src.items[i].path, "/src/", 5))
                abort();
    tdata_pack_src_free(&src);
}

/* Escaping: plain output (no control byte, valid UTF-8 since everything
 * else is \xHH, no space with TDATA_ESC_SPACE) and an exact round trip;
 * unescaping arbitrary text never grows it. */
static void _names(const uint8_t *d, size_t n)
{
    if (n < 1)
        return;
    int flags = d[0] & 1 ? TDATA_ESC_SPACE : 0;
    char *name = strndup((const char *)d + 1, n - 1);
    char *e = tdata_name_escape(name, flags);
    for (const unsigned char *q = (const unsigned char *)e; *q; q++)
        if (*q < 0x20 || *q == 0x7f || (*q == ' ' && flags) ||
            (*q == 0xc2 && q[1] < 0xa0))
            abort();
    if (tdata_name_unescape(e) || strcmp(e, name))
        abort();
    size_t len = strlen(name);
    if (tdata_name_unescape(name) == 0 && strlen(name) > len)
        abort();
    free(e);
    free(name);
}

void fuzz_data_shard(const uint8_t *d, size_t n, const char *dir);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    if (data[0] >= 240 && data[0] < 248) {
        if (data[0] & 1)
            _names(data + 1, size - 1);
        else
            _listing(data + 1, size - 1);
        return 0;
    }
    switch (data[0] % 5) {
    case 0:
        _index(data + 1, size - 1);
        break;
    case 1:
        _jpeg(data + 1, size - 1);
        break;
    case 2:
        _png(data + 1, size - 1);
        break;
    case 3:
        _idx(data + 1, size - 1);
        break;
    default:
        fuzz_data_shard(data + 1, size - 1, _dir);
        break;
    }
    return 0;
}
