#!/bin/bash
# tests/bench/python/hook_netns.sh: the DDP hooks' sync time per ResNet-50
# step on the emulated cluster, by hand (root; not in make check):
#   bash tests/bench/python/hook_netns.sh [--runs N] [--steps S] [--model M]
#        [--variants V,...] [--torus SPEC] BUILDDIR [RATE]
# 4 nodes x 2 ranks, every node in its own network namespace with its link
# shaped by tbf to RATE (default 1gbit), the torus plugin giving the grid
# (srun --mpi=pmix --torus=SPEC); gloo between the nodes' veth addresses.
# Per step: DDP's default all-reduce, DDP's fp16_compress_hook,
# torus_allreduce_hook (fp16) and hierarchical_hook (fp16). hook_bench.py
# says how the sync time is taken (a synchronised step minus a no_sync one,
# slowest rank). N runs (default 3), each a fresh srun with the variants in
# a rotated order, S timed steps each (default 3, after 1 untimed); the
# table gives, per variant, the median over all steps of all runs. On 2
# loaded cores one step of the 4 variants took 64 s (a 1-step run), so the
# default run should take about 15 minutes.
# --model resnet18 --steps 2 --runs 1: a quick check that it runs.
# --variants: a subset, e.g. ddp,torus2d,torus2d2 (torus2d2: the torus hook
# on two lanes; hook_bench.py lists them).
# --torus: the plugin's grid (default auto: 2x4 here, a row per leaf
# switch, 2 nodes; 4x2 puts a row on each node, whose steps the torus hook
# then takes through shared memory).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
runs=3 steps=3 model=resnet50 variants=ddp,fp16,torus2d,hierarchical torus=auto
while [ $# -gt 0 ]; do
    case $1 in
    --runs) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; runs=$2; shift 2 ;;
    --steps) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; steps=$2; shift 2 ;;
    --model) [[ ${2:-} =~ ^[a-z0-9_]+$ ]] || usage; model=$2; shift 2 ;;
    --variants) [[ ${2:-} =~ ^[a-z0-9-]+(,[a-z0-9-]+)*$ ]] || usage; variants=$2; shift 2 ;;
    --torus) [[ ${2:-} =~ ^(auto|[1-9][0-9]*x[1-9][0-9]*)$ ]] || usage; torus=$2; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "hook_netns.sh: unknown option '$1'" >&2; usage ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || usage
build=$(cd "$1" && pwd) || exit 2
rate=${2:-1gbit}
PY=/usr/bin/python3
plugin=$build/plugins/.libs/spank_torus.so
[ -f "$plugin" ] && [ -e "$build/data/.libs/libtorusdata.so.1" ] && [ -e "$build/trainer/comm/.libs/libtoruscomm.so.1" ] ||
    { echo "hook_netns.sh: no spank_torus.so / libtorusdata under $build (build first)" >&2; exit 2; }
"$PY" -c 'import torch, torchvision' 2>/dev/null ||
    { echo "hook_netns.sh: $PY has no torch/torchvision (python3-torch python3-torchvision)" >&2; exit 2; }
base=/tmp/torus-pyhook-cluster
trap '"$top/tests/cluster/down" --base "$base" --quiet' EXIT
"$top/tests/cluster/down" --base "$base" --quiet 2>/dev/null
"$top/tests/cluster/up" --base "$base" --nodes 4 --leaves 2 --netns --rate "$rate" \
    --plugin "$plugin" --quiet || exit 1
. "$base/env"
master=$(srun -N1 -n1 -w n1 ip -o -4 addr show scope global | awk '{ sub("/.*", "", $4); print $4 }' | head -1)
[ -n "$master" ] || { echo "hook_netns.sh: no address on n1" >&2; exit 1; }
export PYTHONPATH=$top/python TORUS_LIBDIR=$build/data/.libs:$build/trainer/comm/.libs OMP_NUM_THREADS=1 MASTER_ADDR=$master
echo "== $(date -u +%FT%TZ) 4 nodes x 2 ranks, netns, tbf $rate per node link, $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# torch $("$PY" -c 'import torch; print(torch.__version__)'), $model, $runs runs x $steps steps, --torus=$torus"
# Each rank sends gloo over its node's link: the interface holding its
# address (named per node).
rank_cmd='export GLOO_SOCKET_IFNAME=$(ip -o -4 addr show scope global | awk "{ print \$2 }" | head -1); exec "$@"'
: >"$base/rows.txt"
for r in $(seq "$runs"); do
    out=$(MASTER_PORT=$((29500 + r)) timeout 1800 srun --mpi=pmix --torus="$torus" -N4 -n8 \
        bash -c "$rank_cmd" rank "$PY" "$here/hook_bench.py" --model "$model" \
        --steps "$steps" --variants "$variants" --first $((r - 1)) 2>&1)
    rc=$?
    [ $rc = 0 ] || { printf '%s\n' "$out"; echo "hook_netns.sh: run $r: exit $rc" >&2; exit 1; }
    [ "$r" = 1 ] && grep '^#' <<<"$out"
    grep '^row ' <<<"$out" | tee -a "$base/rows.txt" | sed "s/^/run $r: /"
done
echo "== median over $runs runs x $steps steps (ms per step; sync = synchronised - no_sync step, slowest rank; cpu = its CPU time, all ranks)"
printf '%-13s %9s %11s %9s %9s %9s\n' variant sync synced no_sync hook cpu
for v in ${variants//,/ }; do
    med() { awk -v v=$v -v f="$1" '$2 == v && $f != "-" { print $f }' "$base/rows.txt" | sort -g |
            awk '{ x[NR] = $1 } END { if (NR) print x[int((NR + 1) / 2)]; else print "-" }'; }
    printf '%-13s %9s %11s %9s %9s %9s\n' $v "$(med 4)" "$(med 5)" "$(med 6)" "$(med 7)" "$(med 8)"
done
