#!/bin/bash
# plugin_build.sh: spank_torus.so is built the way a site admin expects:
# hardened (stack protector, FORTIFY, full RELRO, BIND_NOW) and exporting only
# the symbols Slurm's plugin loader looks up.
set -euo pipefail
so="$top_builddir/plugins/.libs/spank_torus.so"
[ -f "$so" ] || { echo "FAIL: $so not built" >&2; exit 1; }

bad=$(nm -D --defined-only "$so" | awk '{print $NF}' |
    grep -vE '^(slurm_spank_|plugin_|spank_)' | grep -vE '^(_init|_fini)$' || true)
[ -z "$bad" ] || { echo "FAIL: plugin exports symbols outside slurm_spank_*/plugin_*/spank_*:" >&2; echo "$bad" >&2; exit 1; }
nm -D --defined-only "$so" | grep -q ' slurm_spank_init$' || { echo "FAIL: slurm_spank_init not exported" >&2; exit 1; }
for s in plugin_name plugin_type plugin_version; do
    nm -D --defined-only "$so" | grep -q " $s\$" || { echo "FAIL: $s not exported" >&2; exit 1; }
done
readelf -lW "$so" | grep -q GNU_RELRO || { echo "FAIL: no RELRO segment" >&2; exit 1; }
readelf -dW "$so" | grep -Eq 'BIND_NOW|FLAGS.*NOW' || { echo "FAIL: not linked with -z now" >&2; exit 1; }
readelf -lW "$so" | grep GNU_STACK | grep -qv 'RWE' || { echo "FAIL: executable stack" >&2; exit 1; }
# libslurm's internal slurm_conf global is read in one place only
# (plugins/slurm_conf.c, documented in spank_torus(8)); no other object of the
# plugin or the layout library may reference it.
users=$(for o in "$top_builddir"/plugins/.libs/*.o "$top_builddir"/topology/.libs/*.o; do
    nm "$o" 2>/dev/null | awk -v o="${o##*/}" '$NF == "slurm_conf" {print o}'
done | sort -u)
[ "$users" = "spank_torus_la-slurm_conf.o" ] ||
    { echo "FAIL: objects referencing slurm_conf: ${users:-none} (expected spank_torus_la-slurm_conf.o only)" >&2; exit 1; }
echo "PASS: $(nm -D --defined-only "$so" | wc -l) exported symbols, all slurm_spank_*/plugin_*/spank_*; RELRO+NOW"
