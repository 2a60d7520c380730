#!/bin/bash
# tests/unit/update_seam.sh: host or device is decided once, at open, and
# the hot path only dispatches (docs/ARCHITECTURE.md, "The update seam").
# It fails when
#   (a) torus-train.c asks which step runs (ds.on), or calls past the
#       seam what the seam's implementations call (the device step, the
#       optimizer's update, the exchange's wait and inf/nan count);
#   (b) a table is picked anywhere but in its open: trainer/train/update.c
#       (ttrain_update_open) and trainer/train/exchange.c
#       (ttrain_exchange_open);
#   (c) one of exchange.c's public functions (ttrain_exchange_*) reads an
#       implementation's own field (fusion, g, gx) instead of going
#       through its table;
#   (d) the dnnl backend's object uses a symbol that
#       engine/host_kernels.c's object defines (its update calls back up;
#       from the objects in the build tree, with nm, when built).
# Plain grep, awk and nm; well under a second.
#
# usage: update_seam.sh [SRCDIR [BUILDDIR]]   (defaults: $top_srcdir or the
# checkout this script lies in; $top_builddir or .)
set -u

SRC=${1:-${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}
BUILD=${2:-${top_builddir:-.}}
BUILD=$(cd "$BUILD" && pwd) || exit 99
cd "$SRC" || exit 99
fail=0
_err()
{
    echo "update_seam: $*" >&2
    fail=1
}

# "FILE:LINE: FUNCTION: TEXT" for every line inside a function body (a
# definition starts at column 0, its body runs from "{" to "}" there).
_bodies()
{
    awk '/^[A-Za-z_].*[A-Za-z_0-9]+\(/ && !/;[[:space:]]*$/ {
             s = $0; sub(/\(.*/, "", s); sub(/.*[ *]/, "", s); fn = s }
         /^\{/ { inb = 1; next }
         /^\}/ { inb = 0; next }
         inb { print FILENAME ":" FNR ": " fn ": " $0 }' "$@"
}

# (a) torus-train.c dispatches only.
TT=trainer/torus-train.c
for pat in 'ds\.on' 'ttrain_dstep_' 'topt_sgd_dstep' 'topt_sgd_step' \
    'ttrain_exchange_wait(' 'ttrain_exchange_nonfinite(' \
    'ttrain_sg_set_update('; do
    hits=$(grep -n "$pat" "$TT" | grep -v -E '^[0-9]+:[[:space:]]*(/\*|\*)')
    [ -z "$hits" ] || _err "$TT calls past the update seam ($pat): $hits"
done

# (b) each table is picked in its open only.
for f in trainer/train/update.c:ttrain_update_open \
    trainer/train/exchange.c:ttrain_exchange_open; do
    file=${f%%:*} open=${f#*:}
    picks=$(_bodies "$file" | grep -E -- '->ops = ')
    [ -n "$picks" ] || _err "$file: no table picked in $open"
    others=$(grep -v ": $open: " <<<"$picks")
    [ -z "$picks" ] || [ -z "$others" ] ||
        _err "$file: a table picked outside $open: $others"
done

# (c) exchange.c's interface goes through its table.
fields=$(_bodies trainer/train/exchange.c |
    grep -E '^[^:]*:[0-9]+: ttrain_exchange_[a-z_]+: ' |
    grep -E -- '->(fusion|g|gx)\b' | grep -v ': ttrain_exchange_open: ')
[ -z "$fields" ] ||
    _err "exchange.c's public functions read implementation fields: $fields"

# (d) the dnnl backend's update calls nothing in engine/host_kernels.c.
obj=$BUILD/trainer/backends/dnnl/.libs/libtorustrain_la-dnnl_backend.o
hk=$BUILD/trainer/engine/.libs/libtorustrain_la-host_kernels.o
if [ -f "$obj" ] && [ -f "$hk" ] && command -v nm >/dev/null; then
    up=$(comm -12 <(nm -u "$obj" | awk '{print $NF}' | sort -u) \
        <(nm -g --defined-only "$hk" | awk '{print $NF}' | sort -u))
    [ -z "$up" ] ||
        _err "dnnl_backend.c calls back up into engine/host_kernels.c: $up"
    checked_nm=1
else
    echo "update_seam: no dnnl backend object built: (d) not checked"
fi

# The checks above must see something, or they pass on nothing.
[ "$(_bodies trainer/train/exchange.c |
    grep -c -E '^[^:]*:[0-9]+: ttrain_exchange_[a-z_]+: ')" -gt 20 ] ||
    _err "read no public function bodies in exchange.c"

[ $fail -eq 0 ] && echo "PASS: host or device decided once (update and exchange tables)${checked_nm:+; the dnnl update calls no host kernel}"
exit $fail
