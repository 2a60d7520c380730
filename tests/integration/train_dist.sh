#!/bin/bash
# train_dist.sh: data-parallel torus-train equals one process. Under
# `mpirun -np 2` a BN-free tiny model (tiny-cnn) at global batch 32 (16
# per rank) gives, step for step, the losses of a single process at batch
# 32, and after 8 steps the same weights and momentum (rank 0's
# checkpoint) within fp32 summation-order rounding (--wire fp32; the fp16
# wire's bound is checked on the cluster, train_cluster.sh). Both all-reduce
# paths the trainer offers (hybrid, the default, and torus2d) are run;
# the hybrid run uses 1 KiB buckets, so several buckets reduce while
# backward goes on.
# A single process at batch 16 (what a rank would do without the
# gradient sum) must NOT match: that keeps the comparison honest.
set -u
: "${top_builddir:?run through make check}"
bin=$top_builddir/trainer/torus-train
if ! "$bin" --version | grep -Eq 'backends: ([a-z0-9-]+, )*dnnl'; then # configure requires it
    echo "FAIL: torus-train lists no dnnl backend: $("$bin" --version)"
    exit 1
fi
if ! command -v mpirun >/dev/null; then
    echo "SKIP: mpirun not found (install openmpi-bin)"
    exit 77
fi
if ! command -v h5diff >/dev/null; then
    echo "SKIP: h5diff not found (install hdf5-tools)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
losses() { sed 's/.*"loss":\([^,]*\),.*/\1/' "$1"; }

mpi2() {
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none \
        timeout 60 mpirun --oversubscribe --bind-to none \
        --mca mpi_yield_when_idle 1 --mca btl self,vader,tcp -np 2 "$@"
}

# A high learning rate so 8 steps move the weights well past rounding.
run=("$bin" --model tiny-cnn --synthetic --image-size 12 --dataset-size 256
     --epochs 1 --warmup-epochs 0 --lr 2 --print-every 1 --threads 1
     --max-steps 8 --wire fp32)

# The reference: one process at the global batch.
"${run[@]}" --batch 32 --metrics "$tmp/one.jsonl" --checkpoint-dir "$tmp/one" \
    >"$tmp/log" 2>&1 || fail "1 rank: $(tail -3 "$tmp/log")"

# Within rounding: losses to 1e-6 relative, weights and momentum to 1e-5.
same() { # NAME DIR JSONL
    [ "$(wc -l <"$3")" -eq 8 ] || { fail "$1: expected 8 metric lines"; return; }
    paste <(losses "$tmp/one.jsonl") <(losses "$3") | awk -v n="$1" '
        { d = $1 - $2; if (d < 0) d = -d
          if (d > 1e-6 * ($1 < 0 ? -$1 : $1)) {
              printf "FAIL: %s: step %d loss %s vs %s\n", n, NR, $1, $2; bad = 1 } }
        END { exit bad }' || fails=$((fails + 1))
    for g in /params /momentum; do
        h5diff -d 1e-5 "$tmp/one/ckpt-8.h5" "$2/ckpt-8.h5" $g $g >"$tmp/diff" 2>&1 ||
            fail "$1: $g differ from 1 rank: $(head -5 "$tmp/diff")"
    done
}

# The gradients live in memory the node's ranks share and are summed in
# place (torus2d rows on the node); TCOMM_SHM=0 takes the packed path.
for algo in hybrid torus2d torus2d-noshm; do
    kb=0 shm=1
    [ $algo = hybrid ] && kb=1
    [ $algo = torus2d-noshm ] && shm=0
    mpi2 -x TCOMM_SHM=$shm "${run[@]}" --batch 32 --algo ${algo%-noshm} --bucket-kb $kb \
        --metrics "$tmp/$algo.jsonl" --checkpoint-dir "$tmp/$algo" >"$tmp/log" 2>&1 ||
        fail "2 ranks ($algo): $(tail -5 "$tmp/log")"
    grep -q "2 ranks" "$tmp/log" || fail "2 ranks ($algo): did not run as 2 ranks"
    if [ $shm = 1 ] && ! grep -q "buckets of node-shared memory" "$tmp/log"; then
        fail "2 ranks ($algo): gradients not in shared memory: $(grep buckets "$tmp/log")"
    elif [ $shm = 0 ] && grep -q "node-shared" "$tmp/log"; then
        fail "2 ranks ($algo): TCOMM_SHM=0 still shared the gradients"
    fi
    if [ $kb = 1 ] && ! grep -Eq "in ([2-9]|[1-9][0-9]+) buckets" "$tmp/log"; then
        fail "2 ranks ($algo): expected several 1 KiB buckets: $(grep buckets "$tmp/log")"
    fi
    same "2 ranks, $algo" "$tmp/$algo" "$tmp/$algo.jsonl"
done

# Negative control: a lone rank's batch of 16 is not the global batch.
"${run[@]}" --batch 16 --dataset-size 128 --checkpoint-dir "$tmp/half" \
    >"$tmp/log" 2>&1 || fail "batch 16: $(tail -3 "$tmp/log")"
if h5diff -d 1e-5 "$tmp/one/ckpt-8.h5" "$tmp/half/ckpt-8.h5" /params /params >/dev/null 2>&1; then
    fail "control: batch 16 alone matched batch 32 (the check cannot fail)"
fi

# Divergence with 2 ranks: tcomm counts inf/nan after the sum, so both
# ranks skip the same step and stop together, naming it (exit 1, no hang).
mpi2 "${run[@]}" --batch 32 --lr 1e30 --max-nonfinite 1 >"$tmp/log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "2 ranks diverging: exit $rc, expected a failure (124: hung)"
grep -q 'global step 2: [0-9]* inf/nan values in the summed gradients; update skipped' "$tmp/log" ||
    fail "2 ranks diverging: no skipped step: $(tail -5 "$tmp/log")"
grep -q 'training diverged: global step 3' "$tmp/log" ||
    fail "2 ranks diverging: no 'diverged' error: $(tail -5 "$tmp/log")"

[ $fails -eq 0 ] && echo "PASS: 2 ranks = 1 rank (hybrid, torus2d)"
exit $((fails > 0))
