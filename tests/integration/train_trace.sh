#!/bin/bash
# train_trace.sh: torus-train --trace on the local Slurm cluster, 2 ranks on
# 2 nodes under `srun --mpi=pmix`, CIFAR-style ResNet-8 with 16 KiB buckets
# (several buckets per step), a checkpoint every 3 of 6 steps:
#   - the timeline is Chrome trace-event JSON whose spans nest on every
#     thread, each rank's 6 steps hold their phases in order, backward its
#     layer groups, every step every bucket's all-reduce (on the
#     communication thread, with algorithm, bytes, wire and the time the
#     bucket plan predicted, the same every step), the
#     checkpoints their write (rank 0) and wait (rank 1), and bucket
#     reductions overlap backward on both ranks (trace_check.py);
#   - the control: with one bucket of every gradient (complete only when
#     backward's last layer is done) the overlap check fails;
#   - torus-plot --trace draws the last 3 steps: 4 lanes, all-reduce time
#     during backward on both ranks, a PNG;
#   - a trace path that cannot be created ends the job at start-up,
#     rank 0 naming it (no hang), and a run without --trace writes no file.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
bin=$top_builddir/trainer/torus-train
plot=$top_srcdir/trainer/torus-plot
check=$top_srcdir/tests/integration/trace_check.py
[ -x /usr/bin/python3 ] || tl_skip "/usr/bin/python3 is not installed"
command -v gnuplot >/dev/null || tl_skip "gnuplot is not installed (Debian: gnuplot-nox)"
command -v jq >/dev/null || tl_skip "jq is not installed (Debian: jq; torus-plot reads the trace with it)"
tl_cluster_up --nodes 2 --leaves 1
t=$TL_BASE/trace
mkdir -p "$t" "$TL_BASE/ompi-shm" "$TL_BASE/ompi-tmp"
# OpenMPI on loopback, its shared memory private to this cluster
# (see comm_cluster.sh).
export OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_btl_vader_backing_directory="$TL_BASE/ompi-shm"
export OMPI_MCA_orte_tmpdir_base="$TL_BASE/ompi-tmp"
run=("$bin" --model cifar-resnet --depth 8 --synthetic --image-size 16
     --dataset-size 512 --epochs 1 --warmup-epochs 0 --batch 32 --threads 1
     --max-steps 6 --bucket-kb 16 --print-every 1)

tl_srun_mpi --mpi=pmix -N2 -n2 "${run[@]}" --trace "$t/trace.json" \
    --checkpoint-dir "$t/ck" --checkpoint-every 3 >"$t/log" 2>&1 ||
    tl_fail "2 ranks with --trace: $(tail -5 "$t/log")"
grep -q '^trace: [0-9]* events of 2 rank(s) in ' "$t/log" ||
    tl_fail "no trace line: $(tail -3 "$t/log")"
buckets=$(sed -n 's/.*gradients in \([0-9]*\) buckets.*/\1/p' "$t/log")
[ "${buckets:-0}" -ge 3 ] || tl_fail "expected several buckets: $(grep buckets "$t/log")"
/usr/bin/python3 "$check" "$t/trace.json" 2 6 "$buckets" 3 >&2 ||
    tl_fail "the trace does not hold what it should"

tl_srun_mpi --mpi=pmix -N2 -n2 "${run[@]}" --max-steps 3 --bucket-kb 1048576 \
    --trace "$t/one.json" >"$t/one.log" 2>&1 || tl_fail "1 bucket: $(tail -5 "$t/one.log")"
grep -q 'gradients in 1 buckets' "$t/one.log" || tl_fail "1 bucket: $(grep buckets "$t/one.log")"
if /usr/bin/python3 "$check" "$t/one.json" 2 3 1 0 >"$t/one.check"; then
    tl_fail "control: one bucket of all gradients passed the overlap check"
fi
grep -q 'no bucket reduction overlaps backward' "$t/one.check" ||
    tl_fail "control: $(cat "$t/one.check")"

bash "$plot" --trace "$t/trace.json" -v -o "$t/trace.png" >"$t/plot" 2>&1 ||
    tl_fail "torus-plot --trace: $(cat "$t/plot")"
cat "$t/plot"
grep -q '^trace: steps 4\.\.6, 4 lanes, [1-9][0-9]* spans' "$t/plot" ||
    tl_fail "torus-plot --trace: not the last 3 steps in 4 lanes"
for r in 0 1; do
    grep -Eq "^rank $r: [1-9][0-9]* all-reduces, [0-9.]+ ms, [0-9]*\.[0-9]*[1-9][0-9]* ms of it during backward" "$t/plot" ||
        tl_fail "torus-plot: rank $r shows no all-reduce during backward"
done
[ "$(head -c 8 "$t/trace.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
    tl_fail "torus-plot --trace: not a PNG"
if bash "$plot" --trace "$t/trace.json" -s 7:9 -o "$t/x.png" 2>"$t/err"; then
    tl_fail "torus-plot --trace drew steps that are not in the trace"
fi
grep -q 'no step 7..9' "$t/err" || tl_fail "torus-plot -s 7:9: $(cat "$t/err")"

# An unwritable path: rank 0 finds it right after the bootstrap (only
# rank 0 writes the trace) and ends the job naming the option and path,
# so rank 1 stops with it (no hang).
rc=0
TL_SRUN_TIMEOUT=120 tl_srun_mpi --mpi=pmix -N2 -n2 "${run[@]}" --max-steps 1 \
    --trace "$t/none/trace.json" >"$t/bad.log" 2>&1 || rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || tl_fail "unwritable --trace: exit $rc (124: hung)"
grep -q "cannot create '$t/none/trace.json'" "$t/bad.log" ||
    tl_fail "unwritable --trace: $(tail -3 "$t/bad.log")"
grep -q "rank 0: --trace: cannot create '$t/none/trace.json'" "$t/bad.log" ||
    tl_fail "unwritable --trace: the job did not end naming rank 0's --trace: $(tail -3 "$t/bad.log")"
(cd "$t" && "${run[@]}" --max-steps 1 >"$t/off.log" 2>&1) ||
    tl_fail "1 process without --trace: $(tail -3 "$t/off.log")"
! grep -q '^trace:' "$t/off.log" || tl_fail "a trace was written without --trace"
echo "PASS: --trace on 2 ranks: spans nest, buckets overlap backward, torus-plot draws them"
