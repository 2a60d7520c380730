/* test_data_shard.c: shard writer/reader and index round trips: bytes
 * across chunk boundaries, attributes, labels, names, CRCs; a newer
 * format version and a mismatched index are refused with the numbers. */
#include <check.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/format/format.h"
#include "data/read/tdata_read.h"
#include "tests/unit/test_data_main.h"

static char _dir[256];

static void _setup(void)
{
    snprintf(_dir, sizeof _dir, "/tmp/test_data_shard.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(_dir));
}

static void _teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", _dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *const _ids[] = {"n01", "n02", "n03"};
static const char *const _words[] = {"one", "", "three, 3"};

/* Three "images" of 3 MiB + odd sizes, so reads cross 4 MiB chunks. */
static uint8_t *_make(uint64_t *off, int32_t *lab, const char **names)
{
    const uint64_t sz[3] = {3u << 20, 5u << 20 | 17, 1234567};
    off[0] = 0;
    for (int i = 0; i < 3; i++)
        off[i + 1] = off[i] + sz[i];
    uint8_t *d = malloc(off[3]);
    uint64_t x = 88172645463325252ull;
    for (uint64_t i = 0; i < off[3]; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        d[i] = (uint8_t)x;
    }
    lab[0] = 2;
    lab[1] = 0;
    lab[2] = 1;
    names[0] = "a/x.JPEG";
    names[1] = "b/y.JPEG";
    names[2] = "c/z.JPEG";
    return d;
}

static void _meta(tdata_shard_meta *m, int idx, int n)
{
    memset(m, 0, sizeof *m);
    m->layout = TDATA_LAYOUT_ENCODED;
    m->shard_index = idx;
    m->num_shards = n;
    m->num_classes = 3;
    m->split = "train";
    m->creator = "unit test";
    m->class_ids = _ids;
    m->class_words = _words;
    for (int c = 0; c < 3; c++) {
        m->pixel_sum[c] = 50.0 * (c + 1);
        m->pixel_sumsq[c] = 30.0 * (c + 1);
    }
    m->pixel_count = 100;
}

/* The three-image shard every test starts from. */
typedef struct {
    uint64_t off[4];
    int32_t lab[3];
    const char *names[3];
    uint8_t *d;
    char path[512];
} _fixture;

static void _write_fixture(_fixture *fx)
{
    tdata_shard_meta m;
    fx->d = _make(fx->off, fx->lab, fx->names);
    _meta(&m, 0, 1);
    snprintf(fx->path, sizeof fx->path, "%s/train-00000-of-00001.h5", _dir);
    ck_assert_int_eq(
        tdata_shard_write(fx->path, &m, 3, fx->d, fx->off, fx->lab, fx->names),
        0);
}

START_TEST(test_roundtrip)
{
    _fixture fx;
    _write_fixture(&fx);
    uint64_t *off = fx.off;
    int32_t *lab = fx.lab;
    const char **names = fx.names;
    uint8_t *d = fx.d;
    const char *p = fx.path;
    tdata_shard s;
    ck_assert_int_eq(tdata_shard_open(p, &s, 1), 0);
    ck_assert_uint_eq(s.n, 3);
    ck_assert_int_eq(s.format_version, TDATA_FORMAT_VERSION);
    ck_assert_uint_eq(s.chunk_bytes, TDATA_CHUNK_BYTES);
    ck_assert_str_eq(s.class_words[2], "three, 3");
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(s.labels[i], lab[i]);
        ck_assert_uint_eq(s.offsets[i + 1], off[i + 1]);
        ck_assert_uint_eq(s.crcs[i],
                          tdata_crc32c(0, d + off[i], off[i + 1] - off[i]));
        char nm[64];
        ck_assert_int_eq(tdata_shard_name(&s, i, nm, sizeof nm), 0);
        ck_assert_str_eq(nm, names[i]);
    }
    /* Whole stream, and odd ranges around the chunk boundaries. */
    uint8_t *back = malloc(off[3]);
    ck_assert_int_eq(tdata_shard_pread(&s, 0, off[3], back), 0);
    ck_assert(memcmp(back, d, off[3]) == 0);
    const uint64_t C = TDATA_CHUNK_BYTES;
    uint64_t r[][2] = {{C - 1, C + 1},
                       {C - 5000, 2 * C + 3},
                       {off[1], off[2]},
                       {2 * C, off[3]},
                       {7, 8}};
    for (size_t k = 0; k < sizeof r / sizeof r[0]; k++) {
        memset(back, 0, off[3]);
        ck_assert_int_eq(tdata_shard_pread(&s, r[k][0], r[k][1], back), 0);
        ck_assert(memcmp(back, d + r[k][0], r[k][1] - r[k][0]) == 0);
    }
    free(back);
    tdata_shard_close(&s);

    /* Index from the shard; dataset open checks it; reads agree. */
    char ip[512];
    ck_assert_int_eq(tdata_index_build(_dir, "train", 1, ip, sizeof ip), 0);
    tdata_dataset *ds;
    ck_assert_int_eq(tdata_dataset_open(_dir, &ds), 0);
    const tdata_dataset_info *in = tdata_dataset_get_info(ds);
    ck_assert_uint_eq(in->num_images, 3);
    ck_assert_int_eq(in->num_classes, 3);
    ck_assert_double_eq_tol(in->mean[1], 1.0, 1e-6);
    ck_assert_str_eq(tdata_dataset_class_name(ds, 0), "n01");
    uint8_t *buf = NULL;
    size_t cap = 0, len;
    int32_t l;
    uint32_t crc;
    ck_assert_int_eq(tdata_dataset_read(ds, 1, &buf, &cap, &len, &l, &crc), 0);
    ck_assert_uint_eq(len, off[2] - off[1]);
    ck_assert(memcmp(buf, d + off[1], len) == 0);
    ck_assert_int_eq(l, 0);
    free(buf);
    tdata_dataset_close(ds);
    free(d);
}
END_TEST

static void _set_version(const char *p, int v)
{
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    hid_t a = H5Aopen(f, "torus_format_version", H5P_DEFAULT);
    int32_t x = v;
    ck_assert_int_ge(H5Awrite(a, H5T_NATIVE_INT32, &x), 0);
    H5Aclose(a);
    H5Fclose(f);
}

START_TEST(test_newer_version_refused)
{
    _fixture fx;
    _write_fixture(&fx);
    const char *p = fx.path;
    free(fx.d);
    _set_version(p, TDATA_FORMAT_VERSION + 1);
    tdata_shard s;
    ck_assert_int_eq(tdata_shard_open(p, &s, 0), TDATA_EVERSION);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "version 2 is newer"));
    tdata_shard_close(&s);

    /* A newer index version is refused too, with both numbers. */
    char ip[512];
    snprintf(ip, sizeof ip, "%s/x-index.txt", _dir);
    FILE *f = fopen(ip, "w");
    fprintf(f, "torus-index 9\n");
    fclose(f);
    tdata_index ix;
    ck_assert_int_eq(tdata_index_read(ip, &ix), TDATA_EVERSION);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "version 9"));
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "(1)"));
}
END_TEST

START_TEST(test_mismatched_index)
{
    _fixture fx;
    _write_fixture(&fx);
    tdata_shard_meta m;
    _meta(&m, 0, 1);
    char ip[512];
    ck_assert_int_eq(tdata_index_build(_dir, "train", 1, ip, sizeof ip), 0);
    /* Replace the shard by one with a flipped bit: same size and count,
     * different content CRCs. */
    fx.d[10] ^= 1;
    ck_assert_int_eq(
        tdata_shard_write(fx.path, &m, 3, fx.d, fx.off, fx.lab, fx.names), 0);
    tdata_dataset *ds;
    ck_assert_int_eq(tdata_dataset_open(ip, &ds), TDATA_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "does not match the index"));
    free(fx.d);
}
END_TEST

/* One name: its escaped form, and back. */
static void _esc(const char *name, int flags, const char *want)
{
    char *e = tdata_name_escape(name, flags);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e, want);
    ck_assert_int_eq(tdata_name_unescape(e), 0);
    ck_assert_str_eq(e, name);
    free(e);
}

/* The escaping of names in the text files (docs/shard-format.md, "Names
 * and lines"): control characters, C1, bytes that are not well-formed
 * UTF-8 (overlong, surrogate, cut) and the backslash become \xHH; the
 * space only in a field; UTF-8 text stays. Unescaping refuses \x00 and
 * leaves a backslash that starts no \xHH as it is. */
START_TEST(test_names_escape)
{
    _esc("a\nmean nan", 0, "a\\x0amean nan");
    _esc("a\nmean nan", TDATA_ESC_SPACE, "a\\x0amean\\x20nan");
    _esc("tab\there\r\x7f", 0, "tab\\x09here\\x0d\\x7f");
    _esc("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0,
         "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    _esc("\xc2\x85\x1b[0m", 0, "\\xc2\\x85\\x1b[0m");
    _esc("\xff\xfe", 0, "\\xff\\xfe");
    _esc("\xc0\xaf \xed\xa0\x80 \xe2\x82", 0,
         "\\xc0\\xaf \\xed\\xa0\\x80 \\xe2\\x82");
    _esc("back\\x41slash", 0, "back\\x5cx41slash");
    char s1[] = "a\\x00b", s2[] = "a\\b \\x4 \\xg0 \\X41";
    ck_assert_int_eq(tdata_name_unescape(s1), -1);
    ck_assert_int_eq(tdata_name_unescape(s2), 0);
    ck_assert_str_eq(s2, "a\\b \\x4 \\xg0 \\X41");
}
END_TEST

START_TEST(test_dense)
{
    const int n = 7, h = 5, w = 4, c = 3;
    uint8_t *d = malloc(n * h * w * c);
    for (int i = 0; i < n * h * w * c; i++)
        d[i] = (uint8_t)(i * 7);
    int32_t lab[7] = {0, 1, 2, 0, 1, 2, 0};
    const char *names[7] = {"a", "b", "c", "d", "e", "f", "g"};
    tdata_shard_meta m;
    _meta(&m, 0, 1);
    m.layout = TDATA_LAYOUT_DENSE;
    m.height = h;
    m.width = w;
    m.channels = c;
    char p[512];
    snprintf(p, sizeof p, "%s/d-00000-of-00001.h5", _dir);
    ck_assert_int_eq(tdata_shard_write(p, &m, n, d, NULL, lab, names), 0);
    tdata_shard s;
    ck_assert_int_eq(tdata_shard_open(p, &s, 0), 0);
    ck_assert_int_eq(s.layout, TDATA_LAYOUT_DENSE);
    ck_assert_int_eq(s.height, h);
    uint8_t back[60];
    ck_assert_int_eq(tdata_shard_pread(&s, s.offsets[5], s.offsets[6], back),
                     0);
    ck_assert(memcmp(back, d + 5 * 60, 60) == 0);
    tdata_shard_close(&s);
    free(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data_shard");
    TCase *tc = tcase_create("shard");
    tcase_add_checked_fixture(tc, _setup, _teardown);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_newer_version_refused);
    tcase_add_test(tc, test_mismatched_index);
    tcase_add_test(tc, test_dense);
    tcase_add_test(tc, test_names_escape);
    suite_add_tcase(s, tc);
    return tdata_test_run(s);
}
