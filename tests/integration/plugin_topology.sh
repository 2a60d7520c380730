#!/bin/bash
# plugin_topology.sh: spank_torus.so with the topology forms Slurm 22.05
# cannot run itself (topology/block, topology.yaml, topology/torus3d), on the
# local 22.05 cluster (4 nodes, TopologyPlugin=topology/tree). 22.05's
# slurmctld refuses BlockName= lines in topology.conf (fatal "unrecognized
# key"), so each form comes through the plugstack argument topology_file=.
# Every task's TORUS_* must equal `torus-layout --json` for the same file.
# Then GPUs per node and rails (nics=) per task.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
. "$top_srcdir/tests/integration/plugin_lib.sh"
pl_up --nodes 4 --leaves 2
t=$PL_TMP
etc="$TL_BASE/etc"

# Rewrite the plugin's plugstack.conf line (read again by every step).
pl_args() { sed -i "s|\(spank_torus.so\).*|\1 default=auto $*|" "$etc/plugstack.conf"; }
check() { # NAME SOURCE FILE: srun's layout equals torus-layout's for FILE
    pl_dump "$t/$1" -N4 --ntasks-per-node=2
    "$PL_TOOL" --topology "$3" --nodes 'n[1-4]' --tasks-per-node 2 --json >"$t/$1.json" ||
        tl_fail "torus-layout --topology $3 failed"
    pl_match "$t/$1" "$t/$1.json"
    grep -q " $2 1\$" "$t/$1" || tl_fail "$1: source is not $2: $(head -1 "$t/$1")"
}

# Blocks that interleave the leaves of topology.conf: the layout must follow
# the file, not the tree (rows inside b1 = n1,n3).
printf 'BlockName=b1 Nodes=n[1,3]\nBlockName=b2 Nodes=n[2,4]\nBlockSizes=2\n' >"$etc/torus-blocks.conf"
pl_args topology_file="$etc/torus-blocks.conf"
check block topology/block "$etc/torus-blocks.conf"
awk '$2 == "n1" {print $4}' "$t/block" | sort -u | tr '\n' ' ' | grep -q '^0,0 0,1 $' ||
    tl_fail "block: n1 does not hold the start of row 0: $(cat "$t/block")"
grep -q '^4 n3 2x4 0,[23] ' "$t/block" || tl_fail "block: n3 is not in row 0 beside n1: $(cat "$t/block")"

# topology.yaml: the partition (debug) names none, so cluster_default wins.
cat >"$etc/torus-topo.yaml" <<'YAML'
- topology: fat
  tree:
    switches:
      - switch: s1
        nodes: n[1-2]
      - switch: s2
        nodes: n[3-4]
- topology: nvl
  cluster_default: true
  block:
    block_sizes: [2]
    blocks:
      - block: b1
        nodes: n[1,4]
      - block: b2
        nodes: n[2-3]
YAML
pl_args topology_file="$etc/torus-topo.yaml"
check yaml topology/block "$etc/torus-topo.yaml"
# PartitionName=debug Topology=fat picks the tree instead. 22.05's slurm.conf
# parser refuses Topology= (srun fails), so this goes through torus-layout
# and a copy of slurm.conf: the same library call the plugin makes.
sed 's/^PartitionName=debug /&Topology=fat /' "$etc/slurm.conf" >"$t/slurm-25.conf"
SLURM_CONF="$t/slurm-25.conf" "$PL_TOOL" --topology "$etc/torus-topo.yaml" --partition debug \
    --nodes 'n[1-4]' --tasks-per-node 2 --json >"$t/yaml-fat.json" || tl_fail "torus-layout --partition failed"
grep -q '"source":"topology/tree","groups":\[\["n1","n2"\],\["n3","n4"\]\]' "$t/yaml-fat.json" ||
    tl_fail "Topology=fat: not the tree: $(cut -c1-120 "$t/yaml-fat.json")"

# torus3d addresses of a 2x2x1 box: rows along x, columns around y.
printf 't0:0:0:0.n1\nt0:1:0:0.n2\nt0:0:1:0.n3\nt0:1:1:0.n4\n' >"$etc/torus3d.addr"
pl_args topology_file="$etc/torus3d.addr"
check torus3d topology/torus3d "$etc/torus3d.addr"

# A broken file fails the step on every node, naming the file and line.
printf 'BlockName=b1 Nodes=n[1-4]\nBlockSizes=2,3\n' >"$etc/bad.conf"
pl_args topology_file="$etc/bad.conf"
rc=0
srun -N2 -n2 true 2>"$t/bad.err" || rc=$?
[ $rc != 0 ] || tl_fail "a bad topology_file did not fail the step"
grep -q 'bad.conf:2: BlockSizes: 3 is not a power-of-two multiple of 2' "$t/bad.err" ||
    tl_fail "bad topology_file message: $(cat "$t/bad.err")"
# 1 MB of nested flow sequences in topology.yaml (under topology_max): the
# plugin in every slurmstepd refuses it at the depth bound before libyaml
# builds it (libyaml alone took more than 5 minutes), and the step fails
# in seconds, naming the file.
{ head -c 524288 /dev/zero | tr '\0' '['; head -c 524288 /dev/zero | tr '\0' ']'; } >"$etc/deep.yaml"
pl_args topology_file="$etc/deep.yaml"
rc=0
t0=$(date +%s%N)
timeout 120 srun -N2 -n2 true 2>"$t/deep.err" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc != 0 ] && [ $rc != 124 ] || tl_fail "deep topology.yaml: srun exit $rc after $ms ms"
grep -q 'deep.yaml:1: collections nested deeper than 64 levels; refused' "$t/deep.err" ||
    tl_fail "deep topology.yaml message: $(cut -c1-300 "$t/deep.err")"
[ $ms -lt 15000 ] || tl_fail "deep topology.yaml: the step took $ms ms to fail"
echo "plugin_topology: 1 MB of nesting in topology.yaml fails the step in $ms ms (slurmstepd)"
# GPUs and rails. This cluster has no GPUs (no gres), so the step carries
# what Slurm's gpu gres would set (SLURM_GPUS_ON_NODE, CUDA_VISIBLE_DEVICES):
# auto makes a row of each node's GPUs, each task gets its own GPU, and
# with nics= each column its own rail (NCCL_IB_HCA, UCX_NET_DEVICES).
pl_args nics=mlx5_0,mlx5_1
SLURM_GPUS_ON_NODE=2 CUDA_VISIBLE_DEVICES=0,1 srun -N4 --ntasks-per-node=2 sh -c \
    'echo $SLURM_PROCID $SLURM_LOCALID $TORUS_DIMS $TORUS_COORD $TORUS_GPUS_PER_NODE $TORUS_LOCAL_GPU $TORUS_NIC $NCCL_IB_HCA $UCX_NET_DEVICES' \
    2>"$t/gpu.err" | sort -n >"$t/gpu" || tl_fail "GPU step failed: $(cat "$t/gpu.err")"
[ "$(wc -l <"$t/gpu")" = 8 ] || tl_fail "GPU step: $(cat "$t/gpu" "$t/gpu.err")"
while read -r id local dims coord gpn gpu nic hca ucx; do
    col=${coord#*,}
    [ "$dims" = 4x2 ] && [ "$gpn" = 2 ] && [ "$gpu" = "$local" ] && [ "$col" = "$local" ] &&
        [ "$nic" = "mlx5_$col" ] && [ "$hca" = "=mlx5_$col" ] && [ "$ucx" = "mlx5_$col:1" ] ||
        tl_fail "GPU task $id: $dims $coord gpus=$gpn gpu=$gpu nic=$nic hca=$hca ucx=$ucx"
done <"$t/gpu"
# Slurm bound one GPU to each task: its index is 0; a user's NCCL_IB_HCA stays.
SLURM_GPUS_ON_NODE=2 CUDA_VISIBLE_DEVICES=1 NCCL_IB_HCA=mine srun -N1 --ntasks-per-node=2 sh -c \
    'echo $TORUS_LOCAL_GPU $NCCL_IB_HCA' >"$t/gpu1" 2>"$t/gpu1.err"
[ "$(sort -u "$t/gpu1")" = "0 mine" ] || tl_fail "bound GPU: $(cat "$t/gpu1" "$t/gpu1.err")"
# More tasks than GPUs: no TORUS_LOCAL_GPU, and the first task says why.
SLURM_GPUS_ON_NODE=1 srun -N1 --ntasks-per-node=2 sh -c 'echo "[${TORUS_LOCAL_GPU-unset}]"' \
    >"$t/gpu2" 2>"$t/gpu2.err"
[ "$(sort -u "$t/gpu2")" = "[unset]" ] && grep -q '2 tasks per node but 1 GPU' "$t/gpu2.err" ||
    tl_fail "too few GPUs: $(cat "$t/gpu2" "$t/gpu2.err")"

echo "plugin_topology: block, yaml (cluster_default; Topology= by torus-layout), torus3d, a bad file and a deep yaml as torus-layout says; GPUs and rails per task"
