#!/bin/bash
# torus_layout_plugstack.sh: `torus-layout --check-plugstack LINE` accepts
# and refuses plugstack.conf lines exactly as spank_torus.so does (it calls
# the same parser, topology/plugstack.c), with the plugin's message; and
# --topology-max bounds the topology.conf the tool reads, as topology_max=
# bounds the plugin's. No cluster needed.
set -euo pipefail
tool="$top_builddir/topology/torus-layout"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A whole line, optional: accepted, settings printed, no note.
out=$("$tool" --check-plugstack 'optional /usr/lib/slurm/spank_torus.so default=auto topology=addr topology_max=8M leaf_bw_gbs=25 verbose' 2>"$tmp/err") ||
    fail "a valid optional line was refused: $(cat "$tmp/err")"
[ "$out" = "plugstack ok: default=auto topology=addr topology_max=8388608 verbose" ] ||
    fail "settings: $out"
[ ! -s "$tmp/err" ] || fail "optional line printed: $(cat "$tmp/err")"
# required: accepted, with the roll-out note.
"$tool" --check-plugstack 'required spank_torus.so default=4x2' >/dev/null 2>"$tmp/err" ||
    fail "a valid required line was refused"
grep -q "note: 'required' fails every srun" "$tmp/err" || fail "no note for required: $(cat "$tmp/err")"
# Only the arguments, and an empty argument list (the plugin's defaults).
[ "$("$tool" --check-plugstack 'topology=none')" = \
  "plugstack ok: default=off topology=none topology_max=4194304" ] || fail "arguments only"
"$tool" --check-plugstack 'optional spank_torus.so' >/dev/null || fail "no arguments"
# topology_file= and nics= are echoed back.
[ "$("$tool" --check-plugstack 'topology_file=/etc/slurm/torus.yaml nics=mlx5_0,mlx5_1')" = \
  "plugstack ok: default=off topology=tree topology_max=4194304 topology_file=/etc/slurm/torus.yaml nics=mlx5_0,mlx5_1" ] ||
    fail "topology_file/nics not echoed"

# Refused lines: exit 1 and the plugin's own message.
refuse() {
    local rc=0
    "$tool" --check-plugstack "$1" >/dev/null 2>"$tmp/err" || rc=$?
    [ $rc = 1 ] || fail "'$1' exited $rc, expected 1"
    grep -q -- "$2" "$tmp/err" || fail "'$1': no '$2' in: $(cat "$tmp/err")"
}
refuse 'optional spank_torus.so defualt=auto' "torus-layout: plugstack.conf: unknown argument 'defualt'"
refuse 'required spank_torus.so default=4y2' 'plugstack.conf: default='
refuse 'optional spank_torus.so topology=fat' 'plugstack.conf: topology=fat: expected tree, addr or none'
refuse 'optional spank_torus.so topology_max=1G' 'plugstack.conf: topology_max=1G'
refuse 'optional spank_torus.so leaf_bw_gbs=fast' 'plugstack.conf'
refuse 'optional spank_torus.so verbose=1' "unknown argument 'verbose'"
refuse 'optional' 'no plugin path'
refuse 'topology_file=torus.yaml' 'expected an absolute path'
refuse 'nics=mlx5_0,,mlx5_1' 'nics=mlx5_0,,mlx5_1: expected 1 to 16 NIC names'

# --topology-max: the tool refuses what the plugin would.
{ echo 'SwitchName=s1 Nodes=n[1-2]'; head -c 70000 /dev/zero | tr '\0' '#'; echo; } >"$tmp/topology.conf"
rc=0
"$tool" --nodes 'n[1-2]' --topology "$tmp/topology.conf" >/dev/null 2>"$tmp/err" || rc=$?
[ $rc = 0 ] || fail "a 70 KB topology.conf was refused under the 4M default"
rc=0
"$tool" --nodes 'n[1-2]' --topology "$tmp/topology.conf" --topology-max 64K >/dev/null 2>"$tmp/err" || rc=$?
[ $rc = 1 ] && grep -q 'larger than 65536 (the topology.conf limit)' "$tmp/err" ||
    fail "--topology-max 64K: rc=$rc $(cat "$tmp/err")"
rc=0
"$tool" --nodes n1 --topology-max 100G 2>"$tmp/err" || rc=$?
[ $rc = 2 ] || fail "--topology-max 100G exited $rc"
echo "PASS: torus-layout --check-plugstack and --topology-max"
