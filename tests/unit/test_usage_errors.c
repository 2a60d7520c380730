/* test_usage_errors.c: usage errors in library code are returned, not
 * printed (docs/ARCHITECTURE.md, "Errors"): TORUS_FAIL_USAGE records the
 * message without a source location; the command-line helpers of
 * common/torus_cli.h and torus-train's option parser
 * (trainer/train/options.c) return their code with the message that the
 * program prints, write nothing to stdout or stderr themselves, and hand
 * --help and --version back to the program. error_codes.sh checks the
 * source for prints; this checks what the calls do. */
#include <check.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_cli.h"
#include "common/torus_error.h"
#include "trainer/train/ttrain_options.h"

static int _saved[2] = {-1, -1};
static FILE *_cap;

/* Sends fds 1 and 2 to a temporary file until _quiet_end. */
static void _quiet_begin(void)
{
    fflush(stdout);
    fflush(stderr);
    _cap = tmpfile();
    ck_assert_ptr_nonnull(_cap);
    for (int fd = 1; fd <= 2; fd++) {
        _saved[fd - 1] = dup(fd);
        ck_assert_int_ge(_saved[fd - 1], 0);
        ck_assert_int_eq(dup2(fileno(_cap), fd), fd);
    }
}

/* Restores fds 1 and 2; returns the bytes written to them meanwhile. */
static long _quiet_end(void)
{
    fflush(stdout);
    fflush(stderr);
    for (int fd = 1; fd <= 2; fd++) {
        dup2(_saved[fd - 1], fd);
        close(_saved[fd - 1]);
    }
    long n = lseek(fileno(_cap), 0, SEEK_END);
    fclose(_cap);
    return n;
}

START_TEST(usage_message_has_no_location)
{
    ck_assert_int_eq(TORUS_FAIL_USAGE(7, "--x: '%s' is bad", "y"), 7);
    ck_assert_str_eq(torus_error_msg(), "--x: 'y' is bad");
    /* A plain TORUS_FAIL still names where it was raised. */
    ck_assert_int_eq(TORUS_FAIL(7, "broken"), 7);
    ck_assert_msg(strstr(torus_error_msg(), "broken (test_usage_errors.c:"),
                  "%s", torus_error_msg());
}
END_TEST

/* getopt_long over argv with ':' first and opterr 0, as the programs. */
static int _getopt(int argc, char **argv)
{
    static const struct option lo[] = {{"n", required_argument, 0, 'n'},
                                       {"flag", no_argument, 0, 'f'},
                                       {0, 0, 0, 0}};
    opterr = 0;
    optind = 0; /* glibc: start afresh */
    return getopt_long(argc, argv, ":n:", lo, NULL);
}

START_TEST(cli_helpers_record_and_do_not_print)
{
    long v = 0;
    char *unknown[] = {"prog", "--bogus=3", NULL};
    char *missing[] = {"prog", "--n", NULL};
    char *extra[] = {"prog", "--flag=1", NULL};
    int rc[4];
    char msg[4][256];
    _quiet_begin();
    rc[0] = torus_cli_long("--n", "12x", 1, 5, &v);
    snprintf(msg[0], sizeof msg[0], "%s", torus_error_msg());
    rc[1] = torus_cli_bad_option(_getopt(2, unknown), unknown);
    snprintf(msg[1], sizeof msg[1], "%s", torus_error_msg());
    rc[2] = torus_cli_bad_option(_getopt(2, missing), missing);
    snprintf(msg[2], sizeof msg[2], "%s", torus_error_msg());
    rc[3] = torus_cli_bad_option(_getopt(2, extra), extra);
    snprintf(msg[3], sizeof msg[3], "%s", torus_error_msg());
    long printed = _quiet_end();
    ck_assert_int_eq(printed, 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(rc[i], TORUS_CLI_USAGE);
    ck_assert_str_eq(msg[0],
                     "--n: '12x' is not an integer in 1..5 (see --help)");
    ck_assert_str_eq(msg[1], "unknown option '--bogus' (see --help)");
    ck_assert_str_eq(msg[2], "option '--n' needs a value (see --help)");
    ck_assert_str_eq(msg[3], "option '--flag' takes no value (see --help)");
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(torus_cli_long("--n", "4", 1, 5, &v), 0);
    ck_assert_int_eq(v, 4);
}
END_TEST

/* ttrain_config_parse of argv (NULL-terminated) from the defaults, quiet;
 * *printed: the bytes it wrote to stdout and stderr. */
static int _parse(ttrain_config *c, char **argv, long *printed)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    ttrain_config_defaults(c);
    _quiet_begin();
    int rc = ttrain_config_parse(c, argc, argv);
    *printed = _quiet_end();
    return rc;
}

START_TEST(train_parse_records_and_does_not_print)
{
    static ttrain_config c;
    long printed;
    char *bad[] = {"torus-train", "--epochs", "x", NULL};
    char *unknown[] = {"torus-train", "--synthetic", "--bogus", NULL};
    char *help[] = {"torus-train", "--help", NULL};
    char *version[] = {"torus-train", "--version", NULL};
    unsetenv("TCOMM_TIMEOUT");
    ck_assert_int_eq(_parse(&c, bad, &printed), TTRAIN_EXIT_USAGE);
    ck_assert_int_eq(printed, 0);
    ck_assert_str_eq(torus_error_msg(), "--epochs: 'x' is not an integer");
    ck_assert_int_eq(_parse(&c, unknown, &printed), TTRAIN_EXIT_USAGE);
    ck_assert_int_eq(printed, 0);
    ck_assert_str_eq(torus_error_msg(),
                     "unknown option '--bogus' (see --help)");
    /* --help and --version are the program's to print. */
    ck_assert_int_eq(_parse(&c, help, &printed), TTRAIN_PARSE_HELP);
    ck_assert_int_eq(printed, 0);
    ck_assert_int_eq(_parse(&c, version, &printed), TTRAIN_PARSE_VERSION);
    ck_assert_int_eq(printed, 0);
}
END_TEST

START_TEST(train_config_file_error_names_file_and_line)
{
    static ttrain_config c;
    char path[] = "/tmp/test_usage_errors.XXXXXX", want[128];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char text[] = "# settings\nepochs = 3\nbogus = 1\n";
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (int)sizeof text - 1);
    close(fd);
    char *argv[] = {"torus-train", "--config", path, "--synthetic", NULL};
    long printed;
    unsetenv("TCOMM_TIMEOUT");
    int rc = _parse(&c, argv, &printed);
    unlink(path);
    ck_assert_int_eq(rc, TTRAIN_EXIT_USAGE);
    ck_assert_int_eq(printed, 0);
    snprintf(want, sizeof want, "%s:3: unknown setting 'bogus' (see --help)",
             path);
    ck_assert_str_eq(torus_error_msg(), want);
}
END_TEST

START_TEST(train_validate_records_and_does_not_print)
{
    static ttrain_config c;
    char *none[] = {"torus-train", NULL};
    char *threads[] = {"torus-train", "--synthetic", "--threads", "0", NULL};
    long printed;
    unsetenv("TCOMM_TIMEOUT");
    ck_assert_int_eq(_parse(&c, none, &printed), 0);
    _quiet_begin();
    int rc = ttrain_config_validate(&c);
    printed = _quiet_end();
    ck_assert_int_eq(rc, TTRAIN_EXIT_USAGE);
    ck_assert_int_eq(printed, 0);
    ck_assert_str_eq(torus_error_msg(),
                     "no training data: give --data PATH or --synthetic");
    ck_assert_int_eq(_parse(&c, threads, &printed), 0);
    _quiet_begin();
    rc = ttrain_config_validate(&c);
    printed = _quiet_end();
    ck_assert_int_eq(rc, TTRAIN_EXIT_USAGE);
    ck_assert_int_eq(printed, 0);
    ck_assert_str_eq(torus_error_msg(), "--threads: 0 is not in 1..1024");
}
END_TEST

/* The help goes to the stream the program passes, and nowhere else. */
START_TEST(train_usage_writes_to_the_given_stream)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    _quiet_begin();
    ttrain_usage(f);
    long printed = _quiet_end();
    ck_assert_int_eq(printed, 0);
    long n = ftell(f);
    ck_assert_int_gt(n, 1000);
    char *text = calloc(1, (size_t)n + 1);
    rewind(f);
    ck_assert_int_eq(fread(text, 1, (size_t)n, f), n);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "OPTIONS\n"));
    ck_assert_ptr_nonnull(strstr(text, "--epochs N"));
    free(text);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("usage_errors");
    TCase *tc = tcase_create("usage_errors");
    tcase_add_test(tc, usage_message_has_no_location);
    tcase_add_test(tc, cli_helpers_record_and_do_not_print);
    tcase_add_test(tc, train_parse_records_and_does_not_print);
    tcase_add_test(tc, train_config_file_error_names_file_and_line);
    tcase_add_test(tc, train_validate_records_and_does_not_print);
    tcase_add_test(tc, train_usage_writes_to_the_given_stream);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
