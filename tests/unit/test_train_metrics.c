/* test_train_metrics.c: torus-train's --metrics records
 * (trainer/train/ttrain_metrics.h), the lines torus-sweep and torus-plot
 * read back: each record exactly as written, a window of skipped steps
 * with a null loss (JSON has no NaN), records appended to what the file
 * holds, only rank 0 writing, every call a no-op without a file, and an
 * unopenable path refused naming the file. On resuming, the trim: records
 * past the step dropped, the rest byte for byte (those without a
 * global_step too) with the file's mode, a last line cut by a crash
 * dropped; nothing dropped, the file not
 * rewritten; a damaged line refused naming FILE:LINE, the file intact; a
 * user's FILE.tmp untouched; a symlinked FILE trimmed through the link,
 * which stays a link. */
#include <check.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_json.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_metrics.h"

/* A fresh file name in the test's temporary folder. */
static void _path(char *p, size_t n)
{
    const char *dir = getenv("TMPDIR");
    snprintf(p, n, "%s/test_train_metrics.%d.jsonl", dir ? dir : "/tmp",
             (int)getpid());
    unlink(p);
}

/* The file's whole text, into buf. */
static void _slurp(const char *p, char *buf, size_t n)
{
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

/* The records written above, read back through json-c with the readers'
 * rules (common/torus_json.h): six objects, each field typed. */
static void _read_back(const char *p)
{
    static char buf[4097];
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    long line = 0, gstep[6];
    double v[6];
    for (int i = 0; i < 6; i++) {
        torus_json_rec r;
        long long g;
        ck_assert_msg(!torus_json_read_line(f, p, &line, buf, 4096, &r),
                      "%s", torus_error_msg());
        ck_assert_ptr_nonnull(r.obj);
        ck_assert_int_eq(torus_json_int(&r, "global_step", 0, 100, &g), 0);
        gstep[i] = (long)g;
        const char *k = i < 2 ? "images_per_s" : i < 4 ? "top1" : "diverged";
        ck_assert_msg(!torus_json_num(&r, k, 0, 1e9, &v[i]), "%s",
                      torus_error_msg());
        ck_assert_int_eq(torus_json_has(&r, "loss"), i == 0);
        torus_json_rec_free(&r);
    }
    torus_json_rec end;
    ck_assert_int_eq(torus_json_read_line(f, p, &line, buf, 4096, &end), 0);
    ck_assert_ptr_null(end.obj);
    fclose(f);
    ck_assert(gstep[0] == 4 && gstep[3] == 6 && gstep[5] == 9);
    ck_assert(fabs(v[0] - 123.457) < 1e-9 && fabs(v[2] - 81.25) < 1e-9);
    ck_assert(v[4] == 1 && v[5] == 1);
}

START_TEST(records_as_written)
{
    char p[512], text[2048];
    FILE *f;
    _path(p, sizeof p);
    ck_assert_int_eq(ttrain_metrics_open(p, 0, &f), 0);
    ck_assert_ptr_nonnull(f);
    ttrain_metrics_step(f, &(ttrain_metrics_progress){0, 4, 4, 123.4567, 0.5,
                                                      0.1, 32, 0.25, 0.125});
    ttrain_metrics_step(
        f, &(ttrain_metrics_progress){1, 2, 6, 10, NAN, 0.05, 64, 0, 0});
    ttrain_metrics_eval(f, 1, 6, 81.25, 97.5, 0.52, 3.25);
    ttrain_metrics_target(f, 80, 6, 81.25, 3.25);
    ttrain_metrics_diverged(f, 7);
    ttrain_metrics_close(f);
    _slurp(p, text, sizeof text);
    ck_assert_str_eq(
        text,
        "{\"epoch\":0,\"step\":4,\"global_step\":4,\"images_per_s\":123.457,"
        "\"loss\":0.5,\"lr\":0.10000000000000001,\"global_batch\":32,"
        "\"data_wait\":0.2500,\"comm_wait\":0.1250}\n"
        "{\"epoch\":1,\"step\":2,\"global_step\":6,\"images_per_s\":10.000,"
        "\"loss\":null,\"lr\":0.050000000000000003,\"global_batch\":64,"
        "\"data_wait\":0.0000,\"comm_wait\":0.0000}\n"
        "{\"epoch\":1,\"global_step\":6,\"top1\":81.2500,\"top5\":97.5000,"
        "\"test_loss\":0.520000,\"time\":3.250}\n"
        "{\"target_top1\":80.0000,\"global_step\":6,\"top1\":81.2500,"
        "\"time\":3.250}\n"
        "{\"diverged\":1,\"global_step\":7}\n");
    /* A resumed run appends. */
    ck_assert_int_eq(ttrain_metrics_open(p, 0, &f), 0);
    ttrain_metrics_diverged(f, 9);
    ttrain_metrics_close(f);
    _slurp(p, text, sizeof text);
    ck_assert_ptr_nonnull(strstr(text, "\"global_step\":7}\n{\"diverged\":1,"
                                       "\"global_step\":9}\n"));
    _read_back(p);
    unlink(p);
}
END_TEST

START_TEST(rank0_only_and_no_file)
{
    char p[512];
    FILE *f = stdout;
    _path(p, sizeof p);
    ck_assert_int_eq(ttrain_metrics_open(p, 1, &f), 0);
    ck_assert_ptr_null(f);
    ck_assert_int_eq(access(p, F_OK), -1); /* rank 1 creates nothing */
    f = stdout;
    ck_assert_int_eq(ttrain_metrics_open("", 0, &f), 0);
    ck_assert_ptr_null(f);
    /* Every record without a file does nothing (and does not crash). */
    ttrain_metrics_step(NULL, &(ttrain_metrics_progress){0});
    ttrain_metrics_eval(NULL, 0, 0, 0, 0, 0, 0);
    ttrain_metrics_target(NULL, 0, 0, 0, 0);
    ttrain_metrics_diverged(NULL, 0);
    ttrain_metrics_close(NULL);
}
END_TEST

START_TEST(unopenable_names_the_file)
{
    FILE *f = stdout;
    ck_assert_int_ne(ttrain_metrics_open("/nonexistent/dir/m.jsonl", 0, &f), 0);
    ck_assert_ptr_null(f);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(),
                                 "--metrics: cannot open "
                                 "/nonexistent/dir/m.jsonl for appending"));
}
END_TEST

/* Writes text to p, mode 0640. */
static void _put(const char *p, const char *text)
{
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(p, 0640), 0);
}

/* 1 when a trim's temporary file (p.trim.*) is left beside p. */
static int _tmp_left(const char *p)
{
    char pat[600];
    glob_t g;
    snprintf(pat, sizeof pat, "%s.trim.*", p);
    int found = glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    return found;
}

START_TEST(trim_drops_past_the_step)
{
    char p[512], t[600], buf[1024];
    struct stat st;
    long dropped = -1;
    _path(p, sizeof p);
    snprintf(t, sizeof t, "%s.tmp", p);
    _put(t, "mine\n"); /* a file of the user's, where a trim once wrote */
    _put(p, "{\"global_step\":1,\"loss\":2.5}\n"
            "{\"note\":\"no step\"}\n"
            "{\"global_step\":3,\"loss\":2.25}\n"
            "{\"global_step\":2, \"top1\":10.0000}\n"
            "{\"diverged\":1,\"global_step\":4}\n");
    ck_assert_msg(!ttrain_metrics_trim(p, 2, &dropped), "%s",
                  torus_error_msg());
    ck_assert_int_eq(dropped, 2);
    _slurp(p, buf, sizeof buf);
    ck_assert_str_eq(buf, "{\"global_step\":1,\"loss\":2.5}\n"
                          "{\"note\":\"no step\"}\n"
                          "{\"global_step\":2, \"top1\":10.0000}\n");
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0640);
    ck_assert(!_tmp_left(p));
    ck_assert_int_eq(access(t, F_OK), 0); /* the user's p.tmp: untouched */
    _slurp(t, buf, sizeof buf);
    ck_assert_str_eq(buf, "mine\n");
    /* Nothing past the step: the same file, not a rewritten one. */
    ino_t ino = st.st_ino;
    ck_assert_int_eq(ttrain_metrics_trim(p, 2, &dropped), 0);
    ck_assert_int_eq(dropped, 0);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_eq(st.st_ino, ino);
    ck_assert(!_tmp_left(p));
    unlink(p);
    unlink(t);
    /* No file yet: nothing to drop, nothing created. */
    ck_assert_int_eq(ttrain_metrics_trim(p, 2, &dropped), 0);
    ck_assert_int_eq(dropped, 0);
    ck_assert_int_eq(access(p, F_OK), -1);
    /* A last line a crash cut (no newline, even one that parses) is
     * dropped, the complete lines before it kept. */
    _put(p, "{\"global_step\":1}\n{\"global_step\":2}\n{\"global_step\":1");
    ck_assert_msg(!ttrain_metrics_trim(p, 5, &dropped), "%s",
                  torus_error_msg());
    ck_assert_int_eq(dropped, 1);
    _slurp(p, buf, sizeof buf);
    ck_assert_str_eq(buf, "{\"global_step\":1}\n{\"global_step\":2}\n");
    unlink(p);
}
END_TEST

/* A metrics file reached through a symlink: its target is trimmed, the
 * link stays a link. */
START_TEST(trim_through_a_symlink)
{
    char p[512], l[600], buf[256];
    struct stat st;
    long dropped = -1;
    _path(p, sizeof p);
    snprintf(l, sizeof l, "%s.link", p);
    unlink(l);
    _put(p, "{\"global_step\":1}\n{\"global_step\":2}\n");
    ck_assert_int_eq(symlink(p, l), 0);
    ck_assert_msg(!ttrain_metrics_trim(l, 1, &dropped), "%s",
                  torus_error_msg());
    ck_assert_int_eq(dropped, 1);
    ck_assert_int_eq(lstat(l, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    _slurp(p, buf, sizeof buf);
    ck_assert_str_eq(buf, "{\"global_step\":1}\n");
    ck_assert(!_tmp_left(p) && !_tmp_left(l));
    unlink(l);
    unlink(p);
}
END_TEST

/* Each damaged file is refused with a message naming p:LINE, left byte
 * for byte, no temporary file left. */
START_TEST(trim_refuses_damage)
{
    static const struct {
        const char *text, *where;
    } bad[] = {
        {"{\"global_step\":1}\n{\"global_step\":2,\n{\"global_step\":3}\n",
         ":2: "},
        {"{\"global_step\":1}\n{\"global_step\":\"9\"}\n", ":2: "},
        {"{\"global_step\":1}\n{\"global_step\":-1}\n", ":2: "},
        {"{\"global_step\":1}\n[9]\n", ":2: "},
        /* a complete (newline-ended) last line that is not JSON */
        {"{\"global_step\":1}\n{\"global_step\":9\n", ":2: "},
    };
    char p[512], buf[1024], want[600];
    _path(p, sizeof p);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long dropped;
        _put(p, bad[i].text);
        ck_assert_int_eq(ttrain_metrics_trim(p, 0, &dropped), TTRAIN_EFORMAT);
        snprintf(want, sizeof want, "--metrics: %s%s", p, bad[i].where);
        ck_assert_msg(strstr(torus_error_msg(), want), "case %zu: %s", i,
                      torus_error_msg());
        _slurp(p, buf, sizeof buf);
        ck_assert_str_eq(buf, bad[i].text);
        ck_assert(!_tmp_left(p));
    }
    unlink(p);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("train_metrics");
    TCase *tc = tcase_create("train_metrics");
    tcase_add_test(tc, records_as_written);
    tcase_add_test(tc, rank0_only_and_no_file);
    tcase_add_test(tc, unopenable_names_the_file);
    tcase_add_test(tc, trim_drops_past_the_step);
    tcase_add_test(tc, trim_refuses_damage);
    tcase_add_test(tc, trim_through_a_symlink);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
