/* tools/cli.h: the command-line frame the data programs (torus-pack,
 * torus-data-bench) share: the usage line and the getopt loop with --help
 * and --version. Exit statuses: 0 after --help/--version, 2 on a usage
 * error. Only the programs in tools/ include it. */
#ifndef TORUS_DATA_TOOLS_CLI_H
#define TORUS_DATA_TOOLS_CLI_H

#include <getopt.h>

/* One group of options: handles option c (its argument arg) into ctx.
 * Returns 0, 2 after the usage line, or -1 when c is not in the group. */
typedef int (*tdata_cli_group)(int c, const char *arg, void *ctx);

/* "PROG: MSG[: ARG] (see --help)" on stderr; returns 2. */
int tdata_cli_usage(const char *prog, const char *msg, const char *arg);

/* "PROG: " and the message a common/torus_cli.h helper recorded, on
 * stderr; returns rc. */
int tdata_cli_fail(const char *prog, int rc);

/* getopt_long over argv; -h prints help and -V the version, any other
 * option goes to the groups in turn until one takes it. Returns -1 when
 * every option was taken (optind is at the operands), else the exit
 * status. */
int tdata_cli_parse(int argc, char **argv, const char *prog, const char *help,
                    const char *shortopts, const struct option *longopts,
                    const tdata_cli_group *groups, int ngroups, void *ctx);

#endif
