/* test_cuda_tune.c: the cuda backend's convolution tuning and tune cache
 * file (trainer/backends/cuda/cuda_tune.c) without a GPU: a stand-in for
 * cuDNN behind tcuda_tune_ops answers the measurements, the heuristics
 * and the workspace queries and counts the calls. Checked: the choice
 * (fastest usable within the workspace limit, math from the result,
 * deterministic mode); the round trip (a second tuner loads the file and
 * measures nothing); TCUDA_TUNE=0 (heuristics only); and the hostile
 * files: truncated, foreign GPU model or SM count, stale cuDNN, an
 * algorithm id out of range, an algorithm cuDNN no longer offers, huge
 * counts and sizes, a shape out of range, garbage text and binary. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/backends/cuda/cuda_tune.h"

typedef struct {
    int finds, heuristics, workspaces;
    int offered; /* algorithms below this have a workspace */
} _fake;

static int _find(void *ctx, const tcuda_algo_key *key, tcuda_tune_result *r,
                 int max)
{
    _fake *f = ctx;
    f->finds++;
    ck_assert_int_ge(max, 3);
    /* Fastest first: a non-deterministic one, a deterministic one, one
     * over any workspace limit. The algorithm depends on the direction so
     * that the keys' answers differ. */
    r[0] = (tcuda_tune_result){1 + key->dir, 1, 1, 0, 1000, 0.5f};
    r[1] = (tcuda_tune_result){4, 1, 3, 1, 10, 0.9f};
    r[2] = (tcuda_tune_result){5, 1, 1, 1, (size_t)1 << 40, 0.1f};
    return 3;
}

static int _heur(void *ctx, const tcuda_algo_key *key, tcuda_algo_val *out)
{
    (void)key;
    ((_fake *)ctx)->heuristics++;
    *out = (tcuda_algo_val){0, 0, 0};
    return 0;
}

static int _ws(void *ctx, const tcuda_algo_key *key, int algo, int math,
               size_t *bytes)
{
    _fake *f = ctx;
    (void)key;
    (void)math;
    f->workspaces++;
    if (algo >= f->offered)
        return -1;
    *bytes = 100u * (unsigned)(algo + 1);
    return 0;
}

static _fake F;
static tcuda_tune_ops OPS = {&F, _find, _heur, _ws, {8, 6, 7}, 4};
static const tcuda_tune_device DEV = {"NVIDIA H100 80GB HBM3", 132, 91900};
static char DIR_[64], PATH_[96];

static void _setup(void)
{
    memset(&F, 0, sizeof F);
    F.offered = 8;
    OPS.nalgo[0] = 8;
    strcpy(DIR_, "/tmp/test_cuda_tune.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(DIR_));
    snprintf(PATH_, sizeof PATH_, "%s/torus/conv-algos", DIR_);
}

static void _teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", DIR_);
    ck_assert_int_eq(system(cmd), 0);
}

static tcuda_algo_key _key(int dir, int c)
{
    return (tcuda_algo_key){dir, 256, c, 56, 56, 64, 3, 3, 1, 1, 1, 1, 2, 1};
}

/* A tuner on PATH_ (mode det) that resolves n keys; returns its counts
 * as tuned*100 + cached*10 + heuristic. */
static int _run(int tune, int det, int n, size_t ws_max)
{
    tcuda_tuner t;
    tcuda_algo_val v;
    ck_assert_int_eq(tcuda_tune_open(&t, PATH_, &DEV, &OPS, tune, det, ws_max),
                     0);
    for (int i = 0; i < n; i++) {
        tcuda_algo_key k = _key(i % 3, 64 + i);
        ck_assert_int_eq(tcuda_tune_resolve(&t, &k, &v), 0);
        /* Asked twice: answered from this run's table, counted once. */
        ck_assert_int_eq(tcuda_tune_resolve(&t, &k, &v), 0);
    }
    tcuda_tune_save(&t);
    int r = (int)(t.tuned * 100 + t.cached * 10 + t.heuristic);
    tcuda_tune_close(&t);
    return r;
}

START_TEST(pick_rules)
{
    tcuda_tune_result r[3];
    tcuda_algo_val v;
    _find(&F, &(tcuda_algo_key){0}, r, 3);
    ck_assert_int_eq(tcuda_tune_pick(r, 3, (size_t)1 << 30, 0, &v), 0);
    ck_assert_int_eq(v.algo, 1);
    ck_assert_int_eq(v.math, 1); /* from the winning result */
    ck_assert_uint_eq(v.workspace, 1000);
    ck_assert_int_eq(tcuda_tune_pick(r, 3, (size_t)1 << 30, 1, &v), 0);
    ck_assert_int_eq(v.algo, 4); /* deterministic only */
    ck_assert_int_eq(v.math, 3);
    ck_assert_int_eq(tcuda_tune_pick(r, 3, 100, 0, &v), 0);
    ck_assert_int_eq(v.algo, 4); /* within the workspace limit */
    ck_assert_int_eq(tcuda_tune_pick(r, 3, 5, 0, &v), -1);
    r[1].ok = 0;
    ck_assert_int_eq(tcuda_tune_pick(r, 3, 100, 0, &v), -1);
}
END_TEST

START_TEST(round_trip)
{
    ck_assert_int_eq(_run(1, 0, 6, 1 << 20), 600);
    ck_assert_int_eq(F.finds, 6);
    ck_assert_int_eq(access(PATH_, R_OK), 0);
    /* The second run loads the file and measures nothing; the workspace
     * is cuDNN's answer, not the file's. */
    tcuda_tuner t;
    tcuda_algo_val v;
    F.finds = 0;
    ck_assert_int_eq(tcuda_tune_open(&t, PATH_, &DEV, &OPS, 1, 0, 1 << 20), 0);
    ck_assert_uint_eq(t.file.n, 6);
    tcuda_algo_key k = _key(2, 66);
    ck_assert_int_eq(tcuda_tune_resolve(&t, &k, &v), 0);
    ck_assert_int_eq(v.algo, 3);
    ck_assert_int_eq(v.math, 1);
    ck_assert_uint_eq(v.workspace, 400);
    tcuda_tune_close(&t);
    ck_assert_int_eq(_run(1, 0, 6, 1 << 20), 60);
    ck_assert_int_eq(F.finds, 0);
    /* The deterministic mode does not take the other mode's entries. */
    ck_assert_int_eq(_run(1, 1, 2, 1 << 20), 200);
    /* A new shape is measured; the known ones still come from the file. */
    ck_assert_int_eq(_run(1, 1, 3, 1 << 20), 120);
}
END_TEST

START_TEST(tune_off)
{
    ck_assert_int_eq(_run(1, 0, 3, 1 << 20), 300);
    F.finds = 0;
    ck_assert_int_eq(_run(0, 0, 3, 1 << 20), 3);
    ck_assert_int_eq(F.finds, 0);
    ck_assert_int_eq(F.heuristics, 3);
}
END_TEST

/* The good file's text, for the hostile variants. */
static char *_good(size_t *len)
{
    ck_assert_int_eq(_run(1, 0, 4, 1 << 20), 400);
    FILE *fp = fopen(PATH_, "rb");
    ck_assert_ptr_nonnull(fp);
    char *buf = calloc(1, 4096);
    *len = fread(buf, 1, 4095, fp);
    fclose(fp);
    return buf;
}

static void _put(const char *text, size_t len)
{
    FILE *fp = fopen(PATH_, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(text, 1, len, fp), len);
    fclose(fp);
}

/* Entries a fresh tuner accepts from the file now at PATH_. */
static int _loaded(void)
{
    tcuda_tuner t;
    ck_assert_int_eq(tcuda_tune_open(&t, NULL, &DEV, &OPS, 1, 0, 1 << 20), 0);
    int n = tcuda_tune_load(&t, PATH_);
    ck_assert_int_eq((int)t.file.n, n);
    tcuda_tune_close(&t);
    return n;
}

/* The good file with its text from `from` replaced by `to`. */
static void _edit(const char *good, const char *from, const char *to)
{
    const char *at = strstr(good, from);
    char buf[4096];
    ck_assert_ptr_nonnull(at);
    int n = snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - good), good, to,
                     at + strlen(from));
    _put(buf, (size_t)n);
}

START_TEST(hostile_files)
{
    size_t len;
    char *good = _good(&len);
    ck_assert_int_eq(_loaded(), 4);
    /* Truncated inside the last entry: that entry's checksum fails. */
    _put(good, len - 5);
    ck_assert_int_eq(_loaded(), 3);
    _put(good, 20); /* inside the header */
    ck_assert_int_eq(_loaded(), 0);
    /* Another GPU model, another SM count, another cuDNN. */
    _edit(good, "H100", "A100");
    ck_assert_int_eq(_loaded(), 0);
    _edit(good, "sms=132", "sms=114");
    ck_assert_int_eq(_loaded(), 0);
    _edit(good, "cudnn=91900", "cudnn=91000");
    ck_assert_int_eq(_loaded(), 0);
    _edit(good, "torus-conv-algos 1", "torus-conv-algos 2");
    ck_assert_int_eq(_loaded(), 0);
    /* Huge counts: said and ignored, nothing allocated for them. */
    _edit(good, "entries 4", "entries 99999999999999999999");
    ck_assert_int_eq(_loaded(), 0);
    _edit(good, "entries 4", "entries 70000");
    ck_assert_int_eq(_loaded(), 0);
    _edit(good, "entries 4", "entries 9"); /* truncated: the 4 are kept */
    ck_assert_int_eq(_loaded(), 4);
    /* A changed number breaks its line's checksum. */
    _edit(good, "E 0 256 64", "E 0 256 65");
    ck_assert_int_eq(_loaded(), 3);
    _edit(good, "E 0 256 64", "E 0 256 64 7");
    ck_assert_int_eq(_loaded(), 3);
    /* Garbage: text, and binary with a NUL. */
    _put("hello\nworld\n", 12);
    ck_assert_int_eq(_loaded(), 0);
    _put("torus-conv-algos 1\0\xff\xfe", 21);
    ck_assert_int_eq(_loaded(), 0);
    /* A file larger than any tune cache: not read. */
    FILE *fp = fopen(PATH_, "wb");
    ck_assert_int_eq(ftruncate(fileno(fp), (off_t)TCUDA_TUNE_MAX_BYTES + 1), 0);
    fclose(fp);
    ck_assert_int_eq(_loaded(), 0);
    free(good);
}
END_TEST

START_TEST(hostile_entries)
{
    size_t len;
    char *good = _good(&len);
    /* Algorithm ids valid when written, out of range for a cuDNN with
     * fewer forward algorithms: the forward entries are dropped. */
    OPS.nalgo[0] = 1;
    ck_assert_int_eq(_loaded(), 2);
    OPS.nalgo[0] = 8;
    /* An algorithm cuDNN no longer offers for the shape: re-measured. */
    F.offered = 2;
    F.finds = 0;
    ck_assert_int_eq(_run(1, 0, 4, 1 << 20), 220);
    ck_assert_int_eq(F.finds, 2);
    F.offered = 8;
    /* One within the file's limits but over this run's workspace limit. */
    _put(good, len);
    F.finds = 0;
    ck_assert_int_eq(_run(1, 0, 4, 250), 220);
    free(good);
}
END_TEST

/* torus-train's broadcast: rank 0's table as text, taken by another
 * rank's tuner, which then measures nothing; a table from another GPU is
 * ignored (that rank measures for itself). */
START_TEST(table_from_rank0)
{
    tcuda_tuner t0, t1;
    tcuda_algo_val v0, v1;
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(tcuda_tune_open(&t0, NULL, &DEV, &OPS, 1, 0, 1 << 20), 0);
    for (int i = 0; i < 3; i++) {
        tcuda_algo_key k = _key(i, 64);
        ck_assert_int_eq(tcuda_tune_resolve(&t0, &k, &v0), 0);
    }
    ck_assert_int_eq(tcuda_tune_text(&t0, &text, &len), 0);
    ck_assert_uint_eq(strlen(text), len);
    F.finds = 0;
    ck_assert_int_eq(tcuda_tune_open(&t1, NULL, &DEV, &OPS, 1, 0, 1 << 20), 0);
    ck_assert_int_eq(tcuda_tune_load_text(&t1, "from rank 0", text), 3);
    for (int i = 0; i < 3; i++) {
        tcuda_algo_key k = _key(i, 64);
        ck_assert_int_eq(tcuda_tune_resolve(&t0, &k, &v0), 0);
        ck_assert_int_eq(tcuda_tune_resolve(&t1, &k, &v1), 0);
        ck_assert_int_eq(v0.algo, v1.algo);
        ck_assert_int_eq(v0.math, v1.math);
    }
    ck_assert_int_eq(F.finds, 0);
    ck_assert_uint_eq(t1.cached, 3);
    free(text);
    tcuda_tune_close(&t1);
    /* Another GPU model's table: ignored. */
    tcuda_tune_device other = DEV;
    strcpy(other.gpu, "NVIDIA H200");
    ck_assert_int_eq(tcuda_tune_open(&t1, NULL, &other, &OPS, 1, 0, 1 << 20),
                     0);
    ck_assert_int_eq(tcuda_tune_text(&t0, &text, &len), 0);
    ck_assert_int_eq(tcuda_tune_load_text(&t1, "from rank 0", text), 0);
    free(text);
    tcuda_tune_close(&t1);
    tcuda_tune_close(&t0);
}
END_TEST

START_TEST(default_path)
{
    char p[256];
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    ck_assert_int_eq(tcuda_tune_default_path(p, sizeof p), 0);
    ck_assert_str_eq(p, "/x/cache/torus/conv-algos");
    setenv("XDG_CACHE_HOME", "relative", 1); /* not absolute: ignored */
    setenv("HOME", "/home/u", 1);
    ck_assert_int_eq(tcuda_tune_default_path(p, sizeof p), 0);
    ck_assert_str_eq(p, "/home/u/.cache/torus/conv-algos");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    ck_assert_int_eq(tcuda_tune_default_path(p, sizeof p), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_tune");
    TCase *tc = tcase_create("cuda_tune");
    tcase_add_checked_fixture(tc, _setup, _teardown);
    tcase_add_test(tc, pick_rules);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, tune_off);
    tcase_add_test(tc, hostile_files);
    tcase_add_test(tc, hostile_entries);
    tcase_add_test(tc, table_from_rank0);
    tcase_add_test(tc, default_path);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
