/* tools/cli.c: the shared command-line frame of the data programs (see
 * cli.h). One loop, so both programs treat --help, --version and unknown
 * options alike, the way common/torus_cli.h says every program does. */
#include <stdio.h>
#include <string.h>

#include "common/torus_cli.h"
#include "common/torus_error.h"
#include "config.h"
#include "data/tools/cli.h"

int tdata_cli_usage(const char *prog, const char *msg, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s (see --help)\n", prog, msg, arg ? ": " : "",
            arg ? arg : "");
    return TORUS_CLI_USAGE;
}

int tdata_cli_fail(const char *prog, int rc)
{
    fprintf(stderr, "%s: %s\n", prog, torus_error_msg());
    return rc;
}

int tdata_cli_parse(int argc, char **argv, const char *prog, const char *help,
                    const char *shortopts, const struct option *longopts,
                    const tdata_cli_group *groups, int ngroups, void *ctx)
{
    /* getopt's own messages name the program by its path; ours by its
     * name, and the option as typed. */
    char so[64];
    snprintf(so, sizeof so, ":%s", shortopts);
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, so, longopts, NULL)) != -1) {
        if (c == '?' || c == ':')
            return tdata_cli_fail(prog, torus_cli_bad_option(c, argv));
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
            return tdata_cli_fail(prog, torus_cli_bad_option('?', argv));
        if (rc)
            return rc;
    }
    return -1;
}
