/* common/torus_cli.c: the usage errors of torus_cli.h. */
#include "common/torus_cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int torus_cli_bad_option(const char *prog, int ch, char *const *argv)
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
        fprintf(stderr, "%s: option '%s' needs a value (see --help)\n", prog,
                name);
    else if (!strncmp(arg, "--", 2) && optopt)
        fprintf(stderr, "%s: option '%s' takes no value (see --help)\n", prog,
                name);
    else
        fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, name);
    return TORUS_CLI_USAGE;
}

int torus_cli_long(const char *prog, const char *opt, const char *arg, long lo,
                   long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || errno || v < lo || v > hi) {
        fprintf(stderr,
                "%s: %s: '%s' is not an integer in %ld..%ld (see --help)\n",
                prog, opt, arg, lo, hi);
        return TORUS_CLI_USAGE;
    }
    *out = v;
    return 0;
}
