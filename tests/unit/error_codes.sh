#!/bin/bash
# tests/unit/error_codes.sh: the one error style (docs/ARCHITECTURE.md,
# "Errors"), checked on the source tree; include_layers.sh's sibling.
# 1. Every TORUS_FAIL carries its module's code (common/torus_error.h: a
#    code from the module's enum; the checkpoint module's are negative,
#    TTRAIN_CKPT_EBAD/_ECONFIG, which its callers tell apart), so no
#    `TORUS_FAIL(-1, ...)` enters the tree. The table `left` may list files
#    allowed a count of bare -1 sites while they are converted (none today).
# 2. Library code does not print: outside the programs' main files, no
#    fprintf(stderr, printf, perror, puts or fputs/fputc to stderr; errors
#    travel up as codes and warnings go to the program's reporter
#    (common/torus_report.h). The table `prints` lists the files allowed a
#    count of such sites, each with its reason.
# 3. tcomm_error() is gone (torus_error_msg() is the one accessor) and
#    does not come back.
# usage: error_codes.sh [SRCDIR]   (default: $top_srcdir, else the tree
# this script is in)
set -euo pipefail
SRC=${1:-${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}
fail() { echo "error_codes: $*" >&2; exit 1; }

# _count TABLE WHAT HOW FILES...: in each file, the sites that match the
# extended regex $re (newlines joined: clang-format may break a call after
# its parenthesis) must be exactly TABLE[file] (0 when absent): more is a
# new one, fewer a count to lower (a table only shrinks). WHAT names the
# sites, HOW says what to do instead.
_count() {
    local -n tab=$1
    local what=$2 how=$3 f n allowed bad=0 total=0
    shift 3
    [ $# -ge 50 ] || fail "found too few sources under $SRC"
    for f; do
        n=$(tr '\n' ' ' <"$f" | { grep -Eo "$re" || true; } | wc -l)
        total=$((total + n))
        allowed=${tab[$f]:-0}
        if [ "$n" -gt "$allowed" ]; then
            echo "error_codes: $f: $n $what where at most $allowed may be; $how" >&2
            grep -nE "$re|[a-zA-Z_]\\( *\$" "$f" | head -5 >&2
            bad=1
        elif [ "$n" -lt "$allowed" ]; then
            echo "error_codes: $f: $n $what, the table allows $allowed; lower its count" >&2
            bad=1
        fi
    done
    [ $bad = 0 ] || exit 1
    echo "error_codes: $# files: no $what beyond the table ($total left)"
}

cd "$SRC"
# FILE COUNT: the sites left, each a -1 that its callers tell apart.
declare -A left=()
re='TORUS_FAIL\( *-1\b'
# shellcheck disable=SC2046 # file names have no spaces
_count left 'TORUS_FAIL(-1, ...)' "give each its module's code" \
    $(find common topology data trainer plugins tests -name '*.[ch]' -o -name '*.cu' | sort)

# FILE COUNT: library files that still print, and why.
declare -A prints=(
    # Exact counts: a print removed lowers its file's count.
    # The reporter's own stderr sink, the default where a program sets none.
    [common/torus_report.c]=2
    # The last word of a job that the library ends itself (tcomm_abort,
    # the start-up watchdog, the stall guard, the fault handler): no
    # caller is left to report it.
    [trainer/comm/bootstrap/init.c]=1
    [trainer/comm/bootstrap/watchdog.c]=2
    [trainer/comm/transport/guard.c]=1
    [trainer/comm/transport/shm_win.c]=1
    # The command-line parsers of the programs, which name the option in
    # the usage error where they read it: the program's boundary in all
    # but file name (common/torus_cli.c serves every tool).
    [common/torus_cli.c]=4
    [data/tools/cli.c]=2
    [trainer/train/options.c]=38
    # The programs' output on stdout: torus-bench's tables and
    # torus-sweep's task lines (printf; their errors are returned), and
    # the line of torus-sweep's forked child that cannot exec its task.
    [trainer/bench/model.c]=16
    [trainer/bench/resnet50.c]=7
    [trainer/bench/sweep.c]=14
    [trainer/sweep/run.c]=6
)
re='fprintf\( *stderr|(^|[^A-Za-z0-9_])v?printf\(|perror\(|(^|[^A-Za-z0-9_])puts\(|fput[sc]\([^;]*stderr'
# shellcheck disable=SC2046
_count prints prints "library code returns errors (TORUS_FAIL) and reports warnings through common/torus_report.h" \
    $(find common topology data trainer -name '*.[ch]' -o -name '*.cu' | sort |
        xargs grep -L '^int main(')

gone=$(find common topology data trainer plugins tests -name '*.[ch]' -o -name '*.cu' |
    xargs grep -lw 'tcomm_error' || true)
[ -z "$gone" ] || fail "tcomm_error is gone; use torus_error_msg() (common/torus_error.h) in: $gone"
echo "error_codes: no tcomm_error"
