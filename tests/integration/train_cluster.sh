#!/bin/bash
# train_cluster.sh: torus-train launched the way the issue and the jobs do,
# `srun --mpi=pmix --torus=auto torus-train ...`, on the local Slurm
# cluster (2 nodes, the torus plugin installed):
#   1. 2 ranks on 2 nodes, BN-free tiny-cnn at global batch 32: after 8
#      steps rank 0's checkpoint holds the weights and momentum of one
#      process at batch 32 (within fp32 summation-order rounding), and the
#      losses agree step by step. (--wire fp32: the sums are exact up to
#      fp32 summation order.)
#   1b. 2 ranks on one node in one row (--torus=1x2) with the default fp16
#      wire, one step: each
#      element of the summed gradient (the momentum after one step from zero,
#      divided by the LR, weight decay 0) is within what rounding the sum to
#      fp16 allows, |g2 - g1| <= 2^-11 |g1| + 2^-25 (half an ulp; 2^-25 is
#      half the smallest fp16 subnormal). The ranks' gradients lie in
#      node-shared memory and are summed in fp32 where they lie, then rounded
#      once. The same check with the bound ten times tighter must fail, and
#      an fp32-wire run must pass it: the bound is tight and fp16 is used.
#   2. 4 ranks on 2 nodes (a 2x2 torus), CIFAR-style ResNet with BN on
#      Fashion-MNIST: the distributed evaluation counts every test image
#      once (10000), and equals what one process gets from the checkpoint
#      written at the same step (--eval-only): the BN statistics that the
#      ranks averaged before evaluating are the ones saved, and the split
#      counts were summed. The statistics moved off their initial 0/1.
#      --eval-only on the 4 ranks under the default --bucket-kb auto
#      evaluates and chooses no bucket size (nothing to reduce).
#      torus-train itself checks at every evaluation and checkpoint that
#      all ranks hold bitwise the same weights and statistics.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
bin=$top_builddir/trainer/torus-train
pack=$top_builddir/data/torus-pack
plugin=$top_builddir/plugins/.libs/spank_torus.so
FM=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
"$bin" --version | grep -Eq 'backends: ([a-z0-9-]+, )*dnnl' || # configure requires it
    tl_fail "torus-train lists no dnnl backend: $("$bin" --version)"
command -v h5diff >/dev/null || tl_skip "h5diff not found (install hdf5-tools)"
[ -f "$FM/train-images-idx3-ubyte.gz" ] ||
    tl_skip "Fashion-MNIST not found in $FM (Debian package dataset-fashion-mnist)"
[ -f "$plugin" ] || tl_fail "$plugin is not built"
tl_cluster_up --nodes 2 --leaves 1 --plugin "$plugin"
t=$TL_BASE/train
mkdir -p "$t" "$TL_BASE/ompi-shm" "$TL_BASE/ompi-tmp"
# Keep OpenMPI on loopback and its shared memory private to this cluster
# (see comm_cluster.sh).
export OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_btl_vader_backing_directory="$TL_BASE/ompi-shm"
export OMPI_MCA_orte_tmpdir_base="$TL_BASE/ompi-tmp"
run_srun() { tl_srun_mpi --mpi=pmix --torus=auto "$@"; }
losses() { sed 's/.*"loss":\([^,]*\),.*/\1/' "$1"; }
ck() { ls "$1"/ckpt-"$2"-*.h5 2>/dev/null | head -1; } # DIR STEP: the file

# ---- 1. 2 ranks == 1 process (tiny-cnn, synthetic) ----
tiny=("$bin" --model tiny-cnn --synthetic --image-size 12 --dataset-size 256
      --epochs 1 --warmup-epochs 0 --lr 2 --print-every 1 --threads 1
      --max-steps 8 --batch 32)
"${tiny[@]}" --metrics "$t/one.jsonl" --checkpoint-dir "$t/one" >"$t/one.log" 2>&1 ||
    tl_fail "1 process: $(tail -3 "$t/one.log")"
run_srun -N2 -n2 "${tiny[@]}" --wire fp32 --metrics "$t/two.jsonl" --checkpoint-dir "$t/two" \
    >"$t/two.log" 2>&1 || tl_fail "2 ranks under srun: $(tail -5 "$t/two.log")"
grep '2 ranks on 2 nodes, grid' "$t/two.log" | grep -vq 'one row per node' ||
    tl_fail "2 ranks did not run on 2 nodes with the plugin's layout: $(grep ranks "$t/two.log")"
[ "$(wc -l <"$t/two.jsonl")" -eq 8 ] || tl_fail "2 ranks: expected 8 metric lines"
paste <(losses "$t/one.jsonl") <(losses "$t/two.jsonl") | awk '
    { d = $1 - $2; if (d < 0) d = -d
      if (d > 1e-6 * ($1 < 0 ? -$1 : $1)) {
          printf "FAIL: step %d loss %s (1 process) vs %s (2 ranks)\n", NR, $1, $2; bad = 1 } }
    END { exit bad }' >&2 || tl_fail "losses differ"
for g in /params /momentum; do
    h5diff -d 1e-5 "$(ck "$t/one" 8)" "$(ck "$t/two" 8)" $g $g >"$t/diff" 2>&1 ||
        tl_fail "2 ranks: $g differ from 1 process: $(head -5 "$t/diff")"
done
echo "PASS: srun -N2 -n2: 8 steps of 2 ranks == 1 process (losses and weights)"

# ---- 1b. fp16 wire: 2 ranks == 1 process within fp16 rounding ----
one_step=("$bin" --model tiny-cnn --synthetic --image-size 12 --dataset-size 256
          --epochs 1 --warmup-epochs 0 --lr 2 --print-every 1 --threads 1
          --max-steps 1 --batch 32 --weight-decay 0)
"${one_step[@]}" --metrics "$t/w1.jsonl" --checkpoint-dir "$t/w1" >"$t/w1.log" 2>&1 ||
    tl_fail "1 process, 1 step: $(tail -3 "$t/w1.log")"
lr=$(sed 's/.*"lr":\([^,]*\),.*/\1/' "$t/w1.jsonl")
for w in fp16 fp32; do
    # One row on the node: the row sums in place and rounds once. (Across
    # nodes, or down a column, a rank's own share is cast before the sum
    # too, and the error is bounded by the shares, not by the sum.) torus2d
    # named: hybrid would take fp32 on one node (below).
    tl_srun_mpi --mpi=pmix --torus=1x2 -N1 -n2 "${one_step[@]}" --wire $w \
        --algo torus2d --checkpoint-dir "$t/w2$w" >"$t/w2$w.log" 2>&1 ||
        tl_fail "2 ranks, --wire $w: $(tail -5 "$t/w2$w.log")"
    grep -q "grid 1x2 .*node-shared memory, all-reduce torus2d, $w wire" "$t/w2$w.log" ||
        tl_fail "2 ranks, --wire $w: not in place over a $w wire: $(grep ranks "$t/w2$w.log")"
done
# hybrid on one node: the fp16 wire's casts buy nothing in shared memory,
# so the cost model runs every bucket on fp32, and says so.
tl_srun_mpi --mpi=pmix --torus=1x2 -N1 -n2 "${one_step[@]}" --wire fp16 \
    --checkpoint-dir "$t/w2hy" >"$t/w2hy.log" 2>&1 ||
    tl_fail "2 ranks, hybrid: $(tail -5 "$t/w2hy.log")"
grep -Eq -- '--wire fp16: ([0-9]+) of \1 buckets on fp32, 0 on fp16' "$t/w2hy.log" ||
    tl_fail "hybrid on one node: not every bucket on fp32: $(grep -e '--wire' "$t/w2hy.log")"
# Largest |g2 - g1| / (2^-11 |g1| + 2^-25) over every element of /momentum.
_vals() { # FILE DATASET TAG: one value per line, all digits of a float
    h5dump -y -w 0 -m '%.9g' -o "$t/vals.$3" -d "$2" "$1" >/dev/null &&
        tr ',' '\n' <"$t/vals.$3" | tr -d ' ' | grep -v '^$'
}
wire_ratio() { # CKPT_A CKPT_B
    for d in $(h5ls "$1/momentum" | awk '{print $1}'); do
        paste <(_vals "$1" "/momentum/$d" a) <(_vals "$2" "/momentum/$d" b)
    done | awk -v lr="$lr" '
        function abs(x) { return x < 0 ? -x : x }
        { g1 = $1 / lr; g2 = $2 / lr; r = abs(g2 - g1) / (abs(g1) / 2048 + 2^-25)
          if (r > m) m = r; n++ }
        END { if (n < 1000) { print "few"; exit 1 } printf "%.4f\n", m }'
}
r16=$(wire_ratio "$(ck "$t/w1" 1)" "$(ck "$t/w2fp16" 1)") || tl_fail "cannot compare the fp16 run: $r16"
r32=$(wire_ratio "$(ck "$t/w1" 1)" "$(ck "$t/w2fp32" 1)") || tl_fail "cannot compare the fp32 run: $r32"
rhy=$(wire_ratio "$(ck "$t/w1" 1)" "$(ck "$t/w2hy" 1)") || tl_fail "cannot compare the hybrid run: $rhy"
awk -v r="$rhy" 'BEGIN { exit !(r * 10 <= 1) }' ||
    tl_fail "hybrid fp16 on one node: error $rhy x the fp16 bound; expected fp32 exactness"
echo "fp16 wire: largest error / fp16 rounding bound = $r16 (fp32 wire: $r32)"
awk -v r="$r16" 'BEGIN { exit !(r <= 1) }' ||
    tl_fail "fp16 wire: summed gradients off by $r16 x the fp16 rounding bound"
awk -v r="$r16" 'BEGIN { exit !(r * 10 > 1) }' ||
    tl_fail "fp16 wire: error $r16 x the bound also passes a bound 10x tighter (fp16 not used?)"
awk -v r="$r32" 'BEGIN { exit !(r * 10 <= 1) }' ||
    tl_fail "fp32 wire: error $r32 x the fp16 bound; expected fp32 exactness"
echo "PASS: srun -N1 -n2 --wire fp16: one step == 1 process within fp16 rounding of the sum"

# ---- 2. distributed evaluation and BN statistics (4 ranks, 2x2) ----
"$pack" -o "$t/fm" "$FM/train-images-idx3-ubyte.gz" >/dev/null
"$pack" -o "$t/fm" -s test "$FM/t10k-images-idx3-ubyte.gz" >/dev/null
res=("$bin" --data "$t/fm" --model cifar-resnet --depth 8 --batch 64
     --epochs 1 --warmup-epochs 0 --lr 0.2 --threads 1 --print-every 10
     --bucket-kb 4096) # a fixed theta: auto follows the links, which vary
run_srun -N2 -n4 "${res[@]}" --max-steps 30 --checkpoint-dir "$t/res" \
    >"$t/res.log" 2>&1 || tl_fail "4 ranks: $(tail -5 "$t/res.log")"
grep -q '4 ranks on 2 nodes, grid 2x2' "$t/res.log" ||
    tl_fail "not a 2x2 grid: $(grep ranks "$t/res.log")"
dist=$(grep '^epoch 0 test:' "$t/res.log") || tl_fail "4 ranks printed no evaluation"
echo "$dist" | grep -q '(10000 images' || tl_fail "evaluation did not count the 10000 test images once: $dist"
[ -n "$(ck "$t/res" 30)" ] || tl_fail "no checkpoint at step 30: $(ls "$t/res")"
"${res[@]}" --checkpoint-dir "$t/res" --eval-only >"$t/eval.log" 2>&1 ||
    tl_fail "--eval-only: $(tail -3 "$t/eval.log")"
one=$(grep 'test: top-1' "$t/eval.log") || tl_fail "--eval-only printed no result"
# On 4 ranks under the default --bucket-kb auto: evaluation reduces no
# gradients, so no bucket size is probed or timed.
run_srun -N2 -n4 "${res[@]:0:${#res[@]}-2}" --checkpoint-dir "$t/res" --eval-only \
    >"$t/eval4.log" 2>&1 || tl_fail "--eval-only on 4 ranks: $(tail -3 "$t/eval4.log")"
grep -q 'test: top-1' "$t/eval4.log" || tl_fail "--eval-only on 4 ranks printed no result"
! grep -q -- '--bucket-kb auto' "$t/eval4.log" ||
    tl_fail "--eval-only on 4 ranks chose a bucket size: $(grep -- '--bucket-kb' "$t/eval4.log")"
echo "4 ranks:   $dist"
echo "1 process: $one"
# Same weights and statistics, other batch splits: the counts may move by
# a rounding tie at most; the loss to fp32 rounding.
num() { echo "$1" | sed -n "s/.*$2 \([0-9.]*\).*/\1/p"; }
awk -v a="$(num "$dist" top-1)" -v b="$(num "$one" top-1)" \
    -v c="$(num "$dist" top-5)" -v d="$(num "$one" top-5)" \
    -v e="$(num "$dist" loss)" -v f="$(num "$one" loss)" 'BEGIN {
    ok = a != "" && e != "" && (a - b) ^ 2 <= 0.02 ^ 2 && (c - d) ^ 2 <= 0.02 ^ 2 &&
         (e - f) ^ 2 <= (1e-3 * f) ^ 2
    exit !ok }' || tl_fail "distributed evaluation differs from one process on the same checkpoint"
# The statistics were trained (running mean off 0, variance off 1).
h5dump -d /bn_stats/0 -d /bn_stats/1 "$(ck "$t/res" 30)" |
    awk '/\(0\):/ { n++; v = $2; sub(/,/, "", v); if ((n == 1 && v == 0) || (n == 2 && v == 1)) bad = 1 }
         END { exit bad || n != 2 }' || tl_fail "BN statistics in the checkpoint look untrained"
echo "PASS: 4 ranks on a 2x2 torus evaluate like one process on the averaged checkpoint"
