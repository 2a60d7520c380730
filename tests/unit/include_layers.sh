#!/bin/bash
# tests/unit/include_layers.sh: the include graph of torus's own files obeys
# the folder layers (docs/ARCHITECTURE.md). It reads every #include "..." of
# the project's C, header and CUDA files and fails on
#   (a) a cycle among files (A includes B includes ... includes A), and
#   (b) an include from a lower layer into a higher one (LAYERS below),
# and on a file in a folder that LAYERS does not name, so that a new folder
# gets a place in the table before it gets code. Plain bash, grep and tsort;
# it runs in well under a second.
#
# usage: include_layers.sh [SRCDIR]   (default: $top_srcdir, else the
# checkout this script lies in)
set -u

# The layers, lowest first, one per line; a file may include files of its
# own layer and of the layers above it in this list, never below. Entries
# on one line share a layer. An entry is
#   dir/        the files directly in dir (not its subfolders),
#   dir/**      dir and every folder below it,
#   dir/name    the files in dir whose name starts with name.
# The most specific entry wins (the longest). To add a folder, add a line
# (or an entry to a line) where it belongs.
LAYERS='
common/
topology/
data/format/
data/image/
data/pack/ data/read/
data/ data/tools/ data/api/
trainer/comm/tcomm
trainer/comm/core/
trainer/comm/transport/ trainer/comm/transport/nccl
trainer/comm/algo/ trainer/comm/algo/nccl_
trainer/comm/fusion/
trainer/comm/bootstrap/
trainer/comm/api/
trainer/engine/
trainer/backends/dnnl/ trainer/backends/cuda/
trainer/backends/
trainer/models/
trainer/optim/
trainer/train/
trainer/bench/
trainer/sweep/
trainer/
plugins/
tests/**
'

# Entries that must not include each other either, one group per line:
# siblings of one layer that both build on what lies below them, and the
# optimizer and the compute backends (the optimizer reaches a backend only
# through the engine; the rules both need are the engine's step_math.h);
# and libtcomm's two sets of algorithms, each over its own transport (the
# host ones over MPI and shared memory, transport.h; the nccl_ ones over
# the NCCL transport, nccl_transport.h; docs/ARCHITECTURE.md, "Algorithms
# and transports"), so that a file's name keeps saying what it runs on.
APART='
data/pack/ data/read/
trainer/comm/algo/ trainer/comm/algo/nccl_
trainer/comm/algo/ trainer/comm/transport/nccl
trainer/comm/algo/nccl_ trainer/comm/transport/
trainer/backends/dnnl/ trainer/backends/cuda/
trainer/optim/ trainer/backends/dnnl/
trainer/optim/ trainer/backends/cuda/
'

# Known upward includes, each with the reason it is still there; remove a
# line when its include goes (an entry that no longer matches is an error).
ALLOWED='
'

SRC=${1:-${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}
cd "$SRC" || exit 99
TOPS="common topology data trainer plugins tests"

fail=0
_err()
{
    echo "include_layers: $*" >&2
    fail=1
}

# The layer number and the matching entry of path $1 (into LAYER and ENTRY);
# LAYER is empty when no entry matches.
_layer_of()
{
    local p=$1 dir=${1%/*} n=0 best=0 line e
    LAYER= ENTRY=
    while read -r line; do
        [ -n "$line" ] || continue
        n=$((n + 1))
        for e in $line; do
            case $e in
            */\*\*) [[ $dir/ == "${e%\*\*}"* ]] || continue ;;
            */) [ "$dir/" = "$e" ] || continue ;;
            *) [[ $p == "$e"* ]] || continue ;;
            esac
            if [ ${#e} -gt "$best" ]; then
                best=${#e} LAYER=$n ENTRY=$e
            fi
        done
    done <<<"$LAYERS"
}

# Every project file and its layer.
declare -A layer entry
files=$(find $TOPS -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) \
    2>/dev/null | sort)
[ -n "$files" ] || {
    echo "include_layers: no sources under $SRC" >&2
    exit 99
}
for f in $files; do
    _layer_of "$f"
    if [ -z "$LAYER" ]; then
        _err "$f: folder ${f%/*}/ is in no layer: add it to LAYERS in" \
            "tests/unit/include_layers.sh"
        continue
    fi
    layer[$f]=$LAYER entry[$f]=$ENTRY
done

# The edges: "file included" for each #include "..." that names a project
# file (from the top of the tree, or next to the includer); others
# (config.h, system headers) are not ours.
edges=$(grep -HE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $files |
    while IFS= read -r line; do
        f=${line%%:*}
        inc=${line#*\"}
        inc=${inc%%\"*}
        if [ -f "$inc" ]; then
            echo "$f $inc"
        elif [ -f "${f%/*}/$inc" ]; then
            echo "$f ${f%/*}/$inc"
        fi
    done)

# (b) no include from a lower layer into a higher one.
declare -A used
while read -r f to; do
    [ -n "$f" ] || continue
    [ -n "${layer[$f]:-}" ] && [ -n "${layer[$to]:-}" ] || continue
    [ "${layer[$to]}" -gt "${layer[$f]}" ] || continue
    if grep -qx "$f $to" <<<"$ALLOWED"; then
        used["$f $to"]=1
        continue
    fi
    _err "$f (layer ${entry[$f]}) includes $to from a higher layer" \
        "(${entry[$to]})"
done <<<"$edges"
while read -r a; do
    [ -n "$a" ] && [ -z "${used[$a]:-}" ] &&
        _err "ALLOWED lists '$a', which is no upward include any more: remove it"
done <<<"$ALLOWED"

# (c) siblings stay apart.
while read -r f to; do
    [ -n "$f" ] && [ -n "${entry[$f]:-}" ] && [ -n "${entry[$to]:-}" ] || continue
    [ "${entry[$f]}" != "${entry[$to]}" ] || continue
    while read -r group; do
        [[ " $group " == *" ${entry[$f]} "* && " $group " == *" ${entry[$to]} "* ]] &&
            _err "$f (${entry[$f]}) includes $to (${entry[$to]}): these folders" \
                "are kept apart (APART)"
    done <<<"$APART"
done <<<"$edges"

# (a) no cycle: tsort names the files of any loop it finds.
loops=$( (
    echo "$edges"
    for f in $files; do echo "$f $f"; done
) | tsort 2>&1 >/dev/null)
if [ -n "$loops" ]; then
    _err "include cycle:"
    echo "$loops" | sed 's/^/    /' >&2
fi

n=$(echo "$edges" | grep -c .)
if [ "$fail" = 0 ]; then
    echo "include_layers: $(echo "$files" | wc -l) files, $n includes: no" \
        "cycle, no upward include"
fi
exit $fail
