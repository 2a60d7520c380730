/* tools/cli.c: the shared command-line frame of the data programs (see
 * cli.h). One loop, so both programs treat --help, --version and unknown
 * options alike. */
#include <stdio.h>

#include "config.h"
#include "data/tools/cli.h"

int tdata_cli_usage(const char *prog, const char *msg, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s\nTry '%s --help'.\n", prog, msg,
            arg ? ": " : "", arg ? arg : "", prog);
    return 2;
}

int tdata_cli_parse(int argc, char **argv, const char *prog, const char *help,
                    const char *shortopts, const struct option *longopts,
                    const tdata_cli_group *groups, int ngroups, void *ctx)
{
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (c == 'h') {
            fputs(help, stdout);
            return 0;
        }
        if (c == 'V') {
            printf("%s %s\n", prog, PACKAGE_VERSION);
            return 0;
        }
        int rc = -1;
        for (int g = 0; g < ngroups && rc < 0; g++)
            rc = groups[g](c, optarg, ctx);
        if (rc < 0)
            return tdata_cli_usage(prog, "unknown option", NULL);
        if (rc)
            return rc;
    }
    return -1;
}
