/* common/torus_cli.c: the usage errors of torus_cli.h, recorded for the
 * program to print. */
#include "common/torus_cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"

int torus_cli_bad_option(int ch, char *const *argv)
{
    const char *arg = argv[optind - 1];
    char name[64];
    if (!strncmp(arg, "--", 2)) {
        /* A long option, without its "=VALUE". */
        size_t n = strcspn(arg, "=");
        snprintf(name, sizeof name, "%.*s", (int)(n < 60 ? n : 60), arg);
    } else if (optopt > 0 && optopt < 128) {
        snprintf(name, sizeof name, "-%c", optopt);
    } else {
        snprintf(name, sizeof name, "%.60s", arg);
    }
    if (ch == ':')
        return TORUS_FAIL_USAGE(TORUS_CLI_USAGE,
                                "option '%s' needs a value (see --help)", name);
    if (!strncmp(arg, "--", 2) && optopt)
        return TORUS_FAIL_USAGE(
            TORUS_CLI_USAGE, "option '%s' takes no value (see --help)", name);
    return TORUS_FAIL_USAGE(TORUS_CLI_USAGE, "unknown option '%s' (see --help)",
                            name);
}

int torus_cli_long(const char *opt, const char *arg, long lo, long hi,
                   long *out)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || errno || v < lo || v > hi)
        return TORUS_FAIL_USAGE(
            TORUS_CLI_USAGE,
            "%s: '%s' is not an integer in %ld..%ld (see --help)", opt, arg, lo,
            hi);
    *out = v;
    return 0;
}
