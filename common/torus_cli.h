/* common/torus_cli.h: the command-line conventions every torus program
 * keeps (tests/unit/cli_conventions.sh runs each program to check them):
 * --help prints the help and --version the version, both on stdout with
 * exit status 0; a bad option or option value prints one line on stderr
 * that names the program and the option, and exits TORUS_CLI_USAGE.
 * The helpers here print nothing: they record the message (torus_error.h,
 * without a source location) and return TORUS_CLI_USAGE; the program
 * prints "PROG: MSG".
 * Layer 0: includes nothing of torus. */
#ifndef TORUS_COMMON_CLI_H
#define TORUS_COMMON_CLI_H

/* Exit status of a usage error. */
#define TORUS_CLI_USAGE 2

/* After getopt_long returned '?' (unknown option) or ':' (missing value),
 * with opterr = 0 and ':' first in its short options: records
 * "unknown option 'OPT' (see --help)", "option 'OPT' needs a value (see
 * --help)" or "option 'OPT' takes no value (see --help)", OPT as the user
 * typed it. Returns TORUS_CLI_USAGE. */
int torus_cli_bad_option(int ch, char *const *argv);

/* A whole decimal integer of arg within [lo, hi] into *out; else records
 * "OPT: 'ARG' is not an integer in LO..HI (see --help)" and returns
 * TORUS_CLI_USAGE. */
int torus_cli_long(const char *opt, const char *arg, long lo, long hi,
                   long *out);

#endif
