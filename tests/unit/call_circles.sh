#!/bin/bash
# tests/unit/call_circles.sh: no two source files of one folder call each
# other (docs/ARCHITECTURE.md, "Layers"): a file may call down into
# another, never back. For every library's objects in the build tree
# (libtool's .libs/*.o, one group per folder and library, as they are
# linked together) it reads with nm which global symbols each object
# defines and which it uses, and fails on two objects each of which uses
# a symbol the other defines, naming both files and one symbol each way.
# Circles of three or more files are not looked for. nm and awk over the
# objects that make check has built; a second or two.
#
# usage: call_circles.sh [BUILDDIR]   (default: $top_builddir, else .)
set -u

# Known circles, two source paths a line, the first before the second in
# sort order, each with the reason it is still there; remove a line when
# its circle goes (an entry that no longer matches is an error). None
# today: keep it so.
ALLOWED=''

BUILD=${1:-${top_builddir:-.}}
cd "$BUILD" || exit 99
command -v nm >/dev/null || {
    echo "SKIP: no nm on PATH to read the objects' symbols"
    exit 77
}
libdirs=$(find common topology data trainer plugins -type d -name .libs \
    2>/dev/null | sort)
[ -n "$libdirs" ] || {
    echo "call_circles: no library objects under $BUILD (build first)" >&2
    exit 99
}

# "A B SYM_AB SYM_BA" for every pair of one group that call each other,
# and "seen FILE" for every file whose object was read.
found=$(for d in $libdirs; do
    for lib in $(ls "$d" | sed -n 's/^\(.*_la\)-.*\.o$/\1/p' | sort -u); do
        objs=$(ls "$d/$lib"-*.o)
        [ "$(echo "$objs" | wc -l)" -ge 2 ] || continue
        { nm -A -g --defined-only $objs | sed 's/^/D /'
          nm -A -u $objs | sed 's/^/U /'; } |
            awk -v dir="${d%/.libs}" -v lib="$lib" '
            function src(o) { sub(/^.*\//, "", o); sub("^" lib "-", "", o);
                              sub(/\.o:.*$/, ".c", o); return dir "/" o }
            { seen[src($2)] = 1 }
            $1 == "D" && NF == 4 { def[$4] = src($2) }
            $1 == "U" { use[src($2), $NF] = 1; users[$NF] = users[$NF] " " src($2) }
            END {
                for (f in seen)
                    print "seen", f
                for (s in users) {
                    if (!(s in def)) continue
                    n = split(users[s], u, " ")
                    for (i = 1; i <= n; i++)
                        if (u[i] != def[s] && !((u[i], def[s]) in edge))
                            edge[u[i], def[s]] = s
                }
                for (k in edge) {
                    split(k, ab, SUBSEP)
                    if (ab[1] < ab[2] && ((ab[2], ab[1]) in edge))
                        print ab[1], ab[2], edge[k], edge[ab[2], ab[1]]
                }
            }'
    done
done | sort)
pairs=$(grep -v '^seen ' <<<"$found")

fail=0
while read -r a b s back; do
    [ -n "$a" ] || continue
    if grep -qx "$a $b" <<<"$ALLOWED"; then
        continue
    fi
    echo "call_circles: $a and $b call each other ($a uses $s, $b uses" \
        "$back): move what both need into a file below both" >&2
    fail=1
done <<<"$pairs"
while read -r a b; do
    [ -n "$a" ] || continue
    grep -q "^$a $b " <<<"$pairs" && continue
    # Not built here (a build without CUDA has no cuda backend): no verdict.
    grep -qx "seen $a" <<<"$found" && grep -qx "seen $b" <<<"$found" || continue
    echo "call_circles: '$a $b' is in ALLOWED but they no longer call" \
        "each other: remove the line" >&2
    fail=1
done <<<"$ALLOWED"
[ $fail = 0 ] && echo "call_circles: no two files of one folder call each" \
    "other ($(grep -c . <<<"$ALLOWED") known circles allowed)"
exit $fail
