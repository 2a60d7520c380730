#!/bin/bash
# tests/unit/error_codes.sh: every TORUS_FAIL carries its module's code
# (common/torus_error.h: a code from the module's enum; the checkpoint
# module's are negative, TTRAIN_CKPT_EBAD/_ECONFIG, which its callers tell
# apart), so no `TORUS_FAIL(-1, ...)` enters the tree. The table below may
# list files allowed a count of bare -1 sites while they are converted
# (none today). include_layers.sh's sibling: it reads the source tree
# only.
# usage: error_codes.sh [SRCDIR]   (default: $top_srcdir, else the tree
# this script is in)
set -euo pipefail
SRC=${1:-${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}
fail() { echo "error_codes: $*" >&2; exit 1; }

# FILE COUNT: the sites left, each a -1 that its callers tell apart.
declare -A left=()

cd "$SRC"
files=$(find common topology data trainer plugins tests -name '*.[ch]' -o -name '*.cu' | sort)
[ "$(echo "$files" | wc -l)" -ge 50 ] || fail "found too few sources under $SRC"
bad=0 total=0
for f in $files; do
    # The code may sit on the next line (clang-format breaks long calls).
    n=$(tr '\n' ' ' <"$f" | { grep -o 'TORUS_FAIL( *-1\b' || true; } | wc -l)
    total=$((total + n))
    allowed=${left[$f]:-0}
    if [ "$n" -gt "$allowed" ]; then
        echo "error_codes: $f: $n TORUS_FAIL(-1, ...) where at most $allowed may be; give each its module's code" >&2
        grep -n 'TORUS_FAIL( *-1\b\|TORUS_FAIL( *$' "$f" | head -5 >&2
        bad=1
    fi
done
[ $bad = 0 ] || exit 1
echo "error_codes: $(echo "$files" | wc -l) files: no TORUS_FAIL(-1 beyond the table ($total left)"
