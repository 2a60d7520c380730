#!/bin/bash
# tests/unit/func_length.sh: no function of trainer/, data/, topology/ or
# plugins/ is longer than 60 lines (one screen),
# beyond the named ones in the table `long`, each with its reason;
# error_codes.sh's sibling.
# A function's length is the lines between its opening and its closing
# brace. Functions are found as clang-format lays them out in this tree: a
# line in column 0 that names the function and opens its parameter list,
# then its "{" alone in column 0, up to the next "}" in column 0.
# Prints every function over the limit; fails on one that the table does
# not name, and on a named one that is no longer over it (a table only
# shrinks).
# usage: func_length.sh [SRCDIR]   (default: $top_srcdir, else the tree
# this script is in)
set -euo pipefail
SRC=${1:-${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}
MAX=60
cd "$SRC"

# FILE:NAME: the functions allowed over MAX lines, and why.
# None today (torus-train's --help text, once one 95-line fprintf, is four
# functions, one a section).
declare -A long=()

# shellcheck disable=SC2046 # file names have no spaces
lengths=$(awk '
    FNR == 1 { name = ""; open = 0 }
    /^[A-Za-z_][^;=]*\(/ && !open {
        s = $0; sub(/\(.*/, "", s); n = split(s, w, /[ *]+/)
        name = w[n]; at = FNR
    }
    /^\{/ && name != "" { open = FNR; next }
    /^\}/ && open {
        print FILENAME ":" name " " FNR - open - 1 " " at
        open = 0; name = ""
    }' $(find trainer data topology plugins -name '*.c' -o -name '*.cu' | sort))
count=$(echo "$lengths" | wc -l)
[ "$count" -ge 1000 ] || { echo "func_length: found only $count functions under $SRC" >&2; exit 1; }

bad=0
declare -A over=()
while read -r fn len line; do
    [ "$len" -gt "$MAX" ] || continue
    over[$fn]=1
    echo "func_length: ${fn%%:*}:$line ${fn#*:}: $len lines"
    if [ -z "${long[$fn]:-}" ]; then
        echo "func_length: ${fn#*:} (${fn%%:*}) is $len lines, more than $MAX: split it" >&2
        bad=1
    fi
done <<<"$lengths"
for fn in "${!long[@]}"; do
    if [ -z "${over[$fn]:-}" ]; then
        echo "func_length: $fn is no longer over $MAX lines (or is gone): remove it from the table" >&2
        bad=1
    fi
done
[ $bad = 0 ] || exit 1
echo "func_length: $count functions, ${#over[@]} over $MAX lines, all named"
