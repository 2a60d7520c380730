#!/bin/bash
# tests/bench/train/wire.sh: fp16 against fp32 gradient reduction in
# torus-train, both in one run of one script (run by hand, as root):
#   acc    the local demo's job, jobs/train-fmnist.sbatch (ResNet-20 on
#          Fashion-MNIST, 4 ranks on 2 nodes, srun --torus=auto, EPOCHS=10),
#          once with --wire fp32 and once with --wire fp16, one after the
#          other on one private 4-node cluster. Prints both last-epoch test
#          top-1 and the gap; the target is fp16 within 0.3 points of fp32.
#   speed  an emulated 4-node cluster (tests/cluster/up --netns --rate RATE,
#          one network namespace and one tbf-shaped link per node), 4 ranks
#          on 4 nodes, the same model and batch for STEPS steps with each
#          wire, alternating fp32/fp16 ROUNDS times. Prints the median step
#          time and the median "comm %" of the progress lines per wire.
# Usage: tests/bench/train/wire.sh BUILDDIR [WORKDIR]
#        PART=acc|speed|both (both) EPOCHS=10 RATE=1gbit STEPS=60 ROUNDS=2
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
. "$top/tests/bench/train/fmnist_common.sh"
[ "$(id -u)" = 0 ] || { echo "$me: needs root (it starts slurmd and munged)" >&2; exit 2; }
part=${PART:-both}
plugin=$B/plugins/.libs/spank_torus.so
base=
trap '[ -z "$base" ] || "$top/tests/cluster/down" --base "$base" --quiet' EXIT
echo "== $me $(date -u +%FT%TZ), build $B, work $W"

cluster() { # up ARGS...: a fresh private cluster in $base
    [ -z "$base" ] || "$top/tests/cluster/down" --base "$base" --quiet
    base=$(mktemp -d "$W/cluster.XXXXXX")
    "$top/tests/cluster/up" --base "$base" --plugin "$plugin" --quiet "$@"
    . "$base/env"
}

if [ "$part" = acc ] || [ "$part" = both ]; then
    cluster --nodes 4 --leaves 2
    for w in fp32 fp16; do
        out=$W/acc-$w.out
        (cd "$W" && TORUS_BUILD=$B TORUS_DATA=$DATA TORUS_EPOCHS=${EPOCHS:-10} \
            TORUS_TRAIN_ARGS="--wire $w" sbatch --wait --output="$out" \
            "$top/jobs/train-fmnist.sbatch" >/dev/null) || {
            tail -5 "$out"; echo "$me: the $w job failed" >&2; exit 1; }
        grep -q "$w wire" "$out" || { echo "$me: the $w job did not use a $w wire" >&2; exit 1; }
        read -r last best ep < <(fm_top1 "$out")
        echo "acc $w: test top-1 $last% at epoch $ep (best $best%)"
        eval "top_$w=$last"
    done
    awk -v a="$top_fp32" -v b="$top_fp16" 'BEGIN {
        d = a - b; printf "acc gap fp32 - fp16 = %.2f points (target <= 0.3): %s\n",
            d, (d <= 0.3 ? "met" : "NOT met") }'
fi

# med FILE FIELD: the median of one column
med() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

if [ "$part" = speed ] || [ "$part" = both ]; then
    cluster --nodes 4 --leaves 2 --netns --rate "${RATE:-1gbit}"
    # OpenMPI between nodes over the veth subnet; shared memory in a folder
    # of this cluster's own (node names repeat across test clusters).
    subnet=$(srun -N1 -n1 ip -o -4 addr show scope global | awk '{print $4}' | head -1)
    mkdir -p "$base/ompi-shm"
    export OMPI_MCA_btl_tcp_if_include=$subnet OMPI_MCA_btl_vader_backing_directory=$base/ompi-shm
    args=(--data "$DATA" --model cifar-resnet --depth 20 --batch 128 --epochs 2
          --lr 0.2 --warmup-epochs 0 --threads 1 --print-every 5
          --max-steps "${STEPS:-60}")
    : >"$W/speed-fp32.txt"; : >"$W/speed-fp16.txt"
    for r in $(seq "${ROUNDS:-2}"); do
        for w in fp32 fp16; do
            log=$W/speed-$w-$r.log
            timeout 900 srun --mpi=pmix --torus=auto -N4 -n4 "$TRAIN" "${args[@]}" \
                --wire $w >"$log" 2>&1 || { tail -5 "$log"; exit 1; }
            # "| 513.2 img/s | ... | data 0.0% comm 1.4%", past the first line
            grep '^epoch .* img/s' "$log" | tail -n +2 |
                sed 's/.*| \([0-9.]*\) img\/s .*comm \([0-9.]*\)%.*/\1 \2/' >>"$W/speed-$w.txt"
        done
    done
    grep -h 'ranks on' "$W"/speed-fp16-1.log
    for w in fp32 fp16; do
        awk '{ print 128 / $1 * 1000 }' "$W/speed-$w.txt" >"$W/ms-$w"
        awk '{ print $2 }' "$W/speed-$w.txt" >"$W/comm-$w"
        echo "speed $w: median step $(med "$W/ms-$w") ms, median comm $(med "$W/comm-$w")% ($(wc -l <"$W/ms-$w") progress lines)"
    done
fi
