/* test_data_h5lock.c: HDF5 from several threads, and how libtdata puts
 * files under their final names.
 *
 * An HDF5 built without thread safety needs every HDF5 call of the process
 * under tdata_h5_lock(); the lock is skipped when HDF5 is thread-safe (as
 * Debian's is), so main forces it (TORUS_HDF5_LOCK=always). The first test
 * does what a
 * training rank does at once: decode threads name bad samples
 * (tdata_shard_name), an I/O thread opens shards, and the main thread
 * writes a checkpoint-like file (raw HDF5 under the lock, as
 * trainer/train/checkpoint.c does) and shards: nothing fails and nothing
 * deadlocks (the lock is recursive). The second holds the lock and checks
 * that each of libtdata's HDF5 entry points waits for it.
 *
 * The others plant what a hostile neighbour in a shared directory could:
 * a symbolic link at the temporary name of a staged copy, a shard or the
 * index (refused, the link's target untouched), and a stage lock file
 * owned by another user (an error naming the file and the owner at once,
 * not an endless wait). That last one needs root to chown the file; as
 * another user the program runs the rest and exits 77 with SKIP. */
#include <check.h>
#include <hdf5.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/format/format.h"
#include "data/format/tdata_h5attr.h"
#include "data/read/tdata_read.h"
#include "tests/unit/test_data_main.h"

static char _dir[256];

static void _setup(void)
{
    snprintf(_dir, sizeof _dir, "/tmp/test_data_h5lock.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(_dir));
}

static void _teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", _dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *const _ids[] = {"n01", "n02"};
static const char *const _words[] = {"one", "two"};
static const char *const _names[] = {"a/x.JPEG", "b/y.JPEG", "c/z.JPEG"};

/* A three-image encoded shard at PATH. */
static int _shard(const char *path)
{
    static const uint8_t d[30] = {1, 2, 3};
    const uint64_t off[4] = {0, 10, 20, 30};
    const int32_t lab[3] = {0, 1, 0};
    tdata_shard_meta m;
    memset(&m, 0, sizeof m);
    m.layout = TDATA_LAYOUT_ENCODED;
    m.num_shards = 1;
    m.num_classes = 2;
    m.split = "train";
    m.creator = "unit test";
    m.class_ids = _ids;
    m.class_words = _words;
    m.pixel_count = 1;
    return tdata_shard_write(path, &m, 3, d, off, lab, _names);
}

/* ---- HDF5 from several threads ---- */

typedef struct {
    const tdata_shard *s;
    const char *path;
    atomic_int stop, bad, calls;
} _race;

static void _fail(_race *r, const char *who)
{
    if (atomic_fetch_add(&r->bad, 1) == 0)
        fprintf(stderr, "%s failed: %s\n", who, torus_error_msg());
}

/* A decode thread logging bad samples: names them from the shard. */
static void *_namer(void *arg)
{
    _race *r = arg;
    char buf[64];
    for (uint64_t i = 0; !atomic_load(&r->stop); i++) {
        if (tdata_shard_name(r->s, i % 3, buf, sizeof buf) != 0 ||
            strcmp(buf, _names[i % 3]) != 0)
            _fail(r, "tdata_shard_name");
        atomic_fetch_add(&r->calls, 1);
    }
    return NULL;
}

/* The loader's I/O thread (re)opening a shard. */
static void *_opener(void *arg)
{
    _race *r = arg;
    while (!atomic_load(&r->stop)) {
        tdata_shard s;
        if (tdata_shard_open(r->path, &s, 1) != 0 || s.n != 3 ||
            strcmp(s.class_words[1], "two") != 0)
            _fail(r, "tdata_shard_open");
        tdata_shard_close(&s);
        atomic_fetch_add(&r->calls, 1);
    }
    return NULL;
}

/* What checkpoint.c does: raw HDF5 calls under the lock, attributes
 * through the shared helpers. 0 on success. */
static int _ckpt_like(const char *path)
{
    float v[4096];
    for (int i = 0; i < 4096; i++)
        v[i] = (float)i;
    hsize_t n = 4096;
    int64_t step = 42;
    tdata_h5_lock();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int bad = f < 0;
    if (f >= 0) {
        hid_t sp = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(f, "params", H5T_NATIVE_FLOAT, sp, H5P_DEFAULT,
                             H5P_DEFAULT, H5P_DEFAULT);
        bad |= d < 0 || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
                                 H5P_DEFAULT, v) < 0;
        if (d >= 0)
            H5Dclose(d);
        H5Sclose(sp);
        bad |=
            tdata_h5_attr_write(f, "ckpt", "step", H5T_STD_I64LE,
                                H5T_NATIVE_INT64, &step, TDATA_H5_SCALAR) != 0;
        bad |= tdata_h5_attr_write_str(f, "ckpt", "format", "x") != 0;
        bad |= H5Fclose(f) < 0;
    }
    tdata_h5_unlock();
    return bad;
}

START_TEST(test_threads_share_hdf5)
{
    char shard[400], ck[400], other[400];
    snprintf(shard, sizeof shard, "%s/train-00000-of-00001.h5", _dir);
    snprintf(ck, sizeof ck, "%s/ckpt.h5", _dir);
    snprintf(other, sizeof other, "%s/other.h5", _dir);
    ck_assert_int_eq(_shard(shard), 0);
    tdata_shard s;
    ck_assert_int_eq(tdata_shard_open(shard, &s, 0), 0);
    _race r = {.s = &s, .path = shard};
    pthread_t t[3];
    pthread_create(&t[0], NULL, _namer, &r);
    pthread_create(&t[1], NULL, _namer, &r);
    pthread_create(&t[2], NULL, _opener, &r);
    int writes = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        if (_ckpt_like(ck) != 0)
            _fail(&r, "checkpoint-like write");
        if (writes % 4 == 0 && _shard(other) != 0)
            _fail(&r, "tdata_shard_write");
        writes++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - t0.tv_sec) * 1000 +
                     (now.tv_nsec - t0.tv_nsec) / 1000000 <
                 1500 &&
             atomic_load(&r.bad) == 0);
    atomic_store(&r.stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    tdata_shard_close(&s);
    fprintf(stderr, "%d writes, %d reader calls\n", writes,
            atomic_load(&r.calls));
    ck_assert_int_eq(atomic_load(&r.bad), 0);
    ck_assert_int_gt(atomic_load(&r.calls), 100);
}
END_TEST

/* ---- every HDF5 user waits on the lock ---- */

/* One HDF5 user of libtdata, run on a thread while the test holds the
 * lock: it must not finish before the lock is released. */
typedef struct {
    int op;
    const char *path;
    const tdata_shard *s;
    hid_t f;
    atomic_int done;
    int rc;
} _user;

enum { _NAME, _NAMES, _OPEN, _WRITE, _ATTR_READ, _ATTR_WRITE, _NOPS };
static const char *const _opname[_NOPS] = {
    "tdata_shard_name",  "tdata_shard_names",  "tdata_shard_open",
    "tdata_shard_write", "tdata_h5_attr_read", "tdata_h5_attr_write_str"};

static void *_use(void *arg)
{
    _user *u = arg;
    char buf[64];
    tdata_shard s;
    int64_t v = 0;
    switch (u->op) {
    case _NAME:
        u->rc = tdata_shard_name(u->s, 1, buf, sizeof buf);
        break;
    case _NAMES:
        tdata_strv_free(tdata_shard_names(u->s), 3);
        break;
    case _OPEN:
        u->rc = tdata_shard_open(u->path, &s, 1);
        tdata_shard_close(&s);
        break;
    case _WRITE:
        u->rc = _shard(u->path);
        break;
    case _ATTR_READ:
        /* The caller evaluates H5T_NATIVE_INT64 (an HDF5 call) outside:
         * harmless, as the lock is held by the test, not by HDF5. */
        u->rc = tdata_h5_attr_read(u->f, "t", "num_images", H5T_NATIVE_INT64,
                                   &v, 1);
        break;
    case _ATTR_WRITE:
        u->rc = tdata_h5_attr_write_str(u->f, "t", "note", "x");
        break;
    }
    atomic_store(&u->done, 1);
    return NULL;
}

START_TEST(test_users_wait_on_lock)
{
    char shard[400], other[400];
    snprintf(shard, sizeof shard, "%s/train-00000-of-00001.h5", _dir);
    snprintf(other, sizeof other, "%s/other.h5", _dir);
    ck_assert_int_eq(_shard(shard), 0);
    ck_assert_int_eq(_shard(other), 0);
    tdata_shard s;
    ck_assert_int_eq(tdata_shard_open(shard, &s, 0), 0);
    tdata_h5_lock();
    hid_t f = H5Fopen(other, H5F_ACC_RDWR, H5P_DEFAULT);
    tdata_h5_unlock();
    ck_assert_int_ge(f, 0);
    for (int op = 0; op < _NOPS; op++) {
        _user u = {
            .op = op, .path = op == _WRITE ? other : shard, .s = &s, .f = f};
        pthread_t t;
        tdata_h5_lock();
        pthread_create(&t, NULL, _use, &u);
        struct timespec ts = {0, 150 * 1000 * 1000};
        nanosleep(&ts, NULL);
        int early = atomic_load(&u.done);
        tdata_h5_unlock();
        pthread_join(t, NULL);
        if (early)
            fprintf(stderr, "%s ran while the HDF5 lock was held\n",
                    _opname[op]);
        ck_assert_int_eq(early, 0);
        ck_assert_int_eq(u.rc, 0);
    }
    tdata_h5_lock();
    H5Fclose(f);
    tdata_h5_unlock();
    tdata_shard_close(&s);
}
END_TEST

/* ---- durable, link-proof writes ---- */

/* A file "victim" holding "keep", and a link to it at LINK. */
static void _plant(const char *link, char *victim, size_t n)
{
    snprintf(victim, n, "%s/victim", _dir);
    FILE *f = fopen(victim, "w");
    ck_assert_ptr_nonnull(f);
    fputs("keep", f);
    fclose(f);
    ck_assert_int_eq(symlink(victim, link), 0);
}

static void _victim_kept(const char *victim, const char *link)
{
    char buf[16] = {0};
    FILE *f = fopen(victim, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(buf, 1, sizeof buf - 1, f), 4);
    fclose(f);
    ck_assert_str_eq(buf, "keep");
    struct stat st;
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
}

START_TEST(test_link_at_tmp_refused)
{
    char path[400], link[500], victim[400], idx[400];
    snprintf(path, sizeof path, "%s/train-00000-of-00001.h5", _dir);
    snprintf(link, sizeof link, "%s.tmp.%ld", path, (long)getpid());
    _plant(link, victim, sizeof victim);
    ck_assert_int_ne(_shard(path), 0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), link));
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "symbolic link"));
    _victim_kept(victim, link);
    unlink(link);
    ck_assert_int_eq(_shard(path), 0);
    /* The index writer: same refusal. */
    snprintf(link, sizeof link, "%s/train-index.txt.tmp.%ld", _dir,
             (long)getpid());
    ck_assert_int_eq(symlink(victim, link), 0);
    ck_assert_int_ne(tdata_index_build(_dir, "train", 1, idx, sizeof idx), 0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), link));
    _victim_kept(victim, link);
}
END_TEST

/* A packed one-shard dataset in _dir, opened. */
static tdata_dataset *_dataset(char *file, size_t n)
{
    char path[400], idx[400];
    tdata_shard_filename(file, n, "train", 0, 1);
    snprintf(path, sizeof path, "%s/%s", _dir, file);
    ck_assert_int_eq(_shard(path), 0);
    ck_assert_int_eq(tdata_index_build(_dir, "train", 1, idx, sizeof idx), 0);
    tdata_dataset *ds;
    ck_assert_int_eq(tdata_dataset_open(idx, &ds), 0);
    return ds;
}

START_TEST(test_stage_link_refused)
{
    char file[128], st[300], link[600], victim[400];
    tdata_dataset *ds = _dataset(file, sizeof file);
    snprintf(st, sizeof st, "%s/stage", _dir);
    ck_assert_int_eq(mkdir(st, 0755), 0);
    snprintf(link, sizeof link, "%s/%s.tmp.%ld", st, file, (long)getpid());
    _plant(link, victim, sizeof victim);
    ck_assert_int_ne(tdata_stage(ds, st), 0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), link));
    _victim_kept(victim, link);
    /* Once the link is gone, staging works and leaves no lock behind. */
    unlink(link);
    ck_assert_int_eq(tdata_stage(ds, st), 0);
    ck_assert_ptr_nonnull(strstr(tdata_dataset_shard_path(ds, 0), "/stage/"));
    tdata_dataset_close(ds);
}
END_TEST

START_TEST(test_stage_foreign_lock)
{
    struct passwd *pw = getpwnam("nobody");
    char file[128], st[300], lock[600];
    tdata_dataset *ds = _dataset(file, sizeof file);
    snprintf(st, sizeof st, "%s/stage", _dir);
    ck_assert_int_eq(mkdir(st, 0755), 0);
    snprintf(lock, sizeof lock, "%s/%s.lock", st, file);
    FILE *f = fopen(lock, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(chown(lock, pw->pw_uid, pw->pw_gid), 0);
    time_t t0 = time(NULL);
    ck_assert_int_ne(tdata_stage(ds, st), 0);
    ck_assert_int_le(time(NULL) - t0, 2);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), lock));
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "nobody"));
    tdata_dataset_close(ds);
}
END_TEST

int main(void)
{
    /* The lock is a no-op with a thread-safe HDF5 (Debian's is); forced
     * here so that the tests see every call site take it. */
    setenv("TORUS_HDF5_LOCK", "always", 1);
    Suite *s = suite_create("data_h5lock");
    TCase *tc = tcase_create("h5lock");
    tcase_add_checked_fixture(tc, _setup, _teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_threads_share_hdf5);
    tcase_add_test(tc, test_users_wait_on_lock);
    tcase_add_test(tc, test_link_at_tmp_refused);
    tcase_add_test(tc, test_stage_link_refused);
    suite_add_tcase(s, tc);
    /* Chowning a lock file to another user needs root. */
    struct passwd *pw = getpwnam("nobody");
    int skipped = geteuid() != 0 || !pw;
    if (!skipped)
        tcase_add_test(tc, test_stage_foreign_lock);
    int rc = tdata_test_run(s);
    if (!rc && skipped) {
        printf("SKIP: the foreign stage-lock test needs root (to chown a "
               "file to nobody); the other tests passed\n");
        return 77;
    }
    return rc;
}
