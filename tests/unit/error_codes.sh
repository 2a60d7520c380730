#!/bin/bash
# tests/unit/error_codes.sh: the one error style (docs/ARCHITECTURE.md,
# "Errors"), checked on the source tree; include_layers.sh's sibling.
# 1. Every TORUS_FAIL carries its module's code (common/torus_error.h: a
#    code from the module's enum; the checkpoint module's are negative,
#    TTRAIN_CKPT_EBAD/_ECONFIG, which its callers tell apart), so no
#    `TORUS_FAIL(-1, ...)` (nor TORUS_FAIL_USAGE) enters the tree. The table `left` may list files
#    allowed a count of bare -1 sites while they are converted (none today).
# 2. Library code does not print. Library code is every source under
#    common/, topology/, data/, trainer/ and plugins/ (the SPANK plugin
#    reports through Slurm's slurm_error/slurm_info) that no program
#    (bin_PROGRAMS, sbin_PROGRAMS, noinst_PROGRAMS: the build-time
#    spank-torus-doc) lists in its own PROG_SOURCES in
#    Makefile.am or a local.mk; a program's sources are its boundary and
#    print its output and errors. In library code there is no printf,
#    perror, puts or putchar, and no fprintf, fputs, fputc or fwrite to
#    stderr or stdout (the program's streams, not the library's), also
#    not as a fallback (`fprintf(log ? log : stderr, ...)`): errors
#    travel up as codes with their message (TORUS_FAIL, TORUS_FAIL_USAGE)
#    and warnings go to the program's reporter (common/torus_report.h).
#    Writing to a FILE * that the caller passes (a program's --help text,
#    torus-sweep's task lines) is the program's output, not a print. The
#    table `prints` lists the library files allowed a count of prints,
#    each with its reason: the reporter's own sink and the last word of a
#    process that the library ends itself. A file in a program's and a
#    library's sources both fails the check (a library file cannot leave
#    the check by being listed in a program too).
# 3. torus_error_msg() is the one accessor of the message in C: the old
#    names (tcomm_error, tdata_errmsg, teng_net_error) are gone and do not
#    come back. libtorusdata's exported tdata_api_errmsg() stays: that
#    library exports only tdata_api_* symbols, for the Python layer.
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
re='TORUS_FAIL(_USAGE)?\( *-1\b'
# shellcheck disable=SC2046 # file names have no spaces
_count left 'TORUS_FAIL(-1, ...)' "give each its module's code" \
    $(find common topology data trainer plugins tests -name '*.[ch]' -o -name '*.cu' | sort)

# _sources KIND: the sources that Makefile.am and the local.mk fragments
# it includes list, one path a line: KIND "program" those of the installed programs
# (bin_PROGRAMS, sbin_PROGRAMS, noinst_PROGRAMS: PROG_SOURCES), "library" those of every
# library (*_la_SOURCES); continued lines joined, $(VAR)s expanded.
_sources() {
    # shellcheck disable=SC2046 # file names have no spaces
    cat Makefile.am $(sed -n 's/^include //p' Makefile.am) |
        awk -v kind="$1" '
        /\\$/ { sub(/\\$/, ""); buf = buf $0 " "; next }
        {
            line = buf $0; buf = ""
            if (!match(line, /^[A-Za-z0-9_]+[ \t]*\+?=/)) next
            name = line; sub(/[ \t]*\+?=.*/, "", name)
            val = line; sub(/^[^=]*=/, "", val)
            vars[name] = vars[name] " " val
        }
        function expand(s,   out, n, i, w) {
            n = split(s, w, /[ \t]+/)
            for (i = 1; i <= n; i++)
                if (w[i] ~ /^\$\(.*\)$/)
                    out = out " " expand(vars[substr(w[i], 3, length(w[i]) - 3)])
                else if (w[i] != "")
                    out = out " " w[i]
            return out
        }
        END {
            if (kind == "program") {
                n = split(vars["bin_PROGRAMS"] " " vars["sbin_PROGRAMS"] " " \
                    vars["noinst_PROGRAMS"], p, /[ \t]+/)
                for (i = 1; i <= n; i++) {
                    if (p[i] == "") continue
                    c = p[i]; gsub(/[^A-Za-z0-9_@]/, "_", c)
                    list = list " " vars[c "_SOURCES"]
                }
            } else
                for (v in vars) if (v ~ /_la_SOURCES$/) list = list " " vars[v]
            m = split(expand(list), s, /[ \t]+/)
            for (j = 1; j <= m; j++) if (s[j] != "") print s[j]
        }' | sort -u
}
programs=$(_sources program)
if ! echo "$programs" | grep -qx trainer/torus-train.c; then
    fail "found no torus-train.c among the programs' sources in the local.mk files: $programs"
fi
both=$(comm -12 <(echo "$programs") <(_sources library))
[ -z "$both" ] || fail "in a program's and a library's sources both: $both"

# FILE COUNT: library files that print, and why. Exact counts: a print
# removed lowers its file's count.
declare -A prints=(
    # The reporter's own stderr sink, the default where a program sets none.
    [common/torus_report.c]=2
    # The last word of a process that the library ends itself: the job
    # (tcomm_abort, the start-up watchdog, the stall guard, the fault
    # handler) or torus-sweep's forked child that cannot exec its task
    # (it _exits). No caller is left to report it.
    [trainer/comm/bootstrap/init.c]=1
    [trainer/comm/bootstrap/watchdog.c]=2
    [trainer/comm/transport/guard.c]=1
    [trainer/comm/transport/shm_win.c]=1
    [trainer/sweep/run.c]=1
    # The plugin's boundary in the user's task (slurm_spank_task_init runs
    # in the task, as the user): the task's stderr is the one way to tell
    # the user what the nodes logged through slurm_info.
    [plugins/remote.c]=4
)
re='v?fprintf\([^,;]*std(err|out)|(^|[^A-Za-z0-9_])v?printf\(|perror\(|(^|[^A-Za-z0-9_])(puts|putchar)\(|f(put[sc]|write)\([^;]*std(err|out)'
# shellcheck disable=SC2046
_count prints prints "library code returns errors (TORUS_FAIL) and reports warnings through common/torus_report.h" \
    $(find common topology data trainer plugins -name '*.[ch]' -o -name '*.cu' | sort |
        grep -vxF "$programs")

gone=$(find common topology data trainer plugins tests -name '*.[ch]' -o -name '*.cu' |
    xargs grep -lwE 'tcomm_error|tdata_errmsg|teng_net_error' || true)
[ -z "$gone" ] || fail "tcomm_error, tdata_errmsg and teng_net_error are gone; use torus_error_msg() (common/torus_error.h) in: $gone"
echo "error_codes: no tcomm_error, tdata_errmsg, teng_net_error"
