/* common/torus_cli.h: the command-line conventions every torus program
 * keeps (tests/unit/cli_conventions.sh runs each program to check them):
 * --help prints the help and --version the version, both on stdout with
 * exit status 0; a bad option or option value prints one line on stderr
 * that names the program and the option, and exits TORUS_CLI_USAGE.
 * Layer 0: includes nothing of torus. */
#ifndef TORUS_COMMON_CLI_H
#define TORUS_COMMON_CLI_H

/* Exit status of a usage error. */
#define TORUS_CLI_USAGE 2

/* After getopt_long returned '?' (unknown option) or ':' (missing value),
 * with opterr = 0 and ':' first in its short options: prints
 * "PROG: unknown option 'OPT' (see --help)" or "PROG: option 'OPT' needs
 * a value (see --help)", OPT as the user typed it. Returns
 * TORUS_CLI_USAGE. */
int torus_cli_bad_option(const char *prog, int ch, char *const *argv);

/* A whole decimal integer of arg within [lo, hi] into *out; else prints
 * "PROG: OPT: 'ARG' is not an integer in LO..HI (see --help)" and
 * returns TORUS_CLI_USAGE. */
int torus_cli_long(const char *prog, const char *opt, const char *arg, long lo,
                   long hi, long *out);

#endif
