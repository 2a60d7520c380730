#!/bin/bash
# train_stall.sh: a lost or stalled rank ends the whole step under every
# launcher, on the local Slurm cluster (2 nodes). torus-train runs 2 ranks
# (one per node, --comm-timeout 3) under
#   srun       plain `srun --mpi=pmix`, which waits for every task,
#   srun-K0    `srun -K0` (--kill-on-bad-exit=0 said outright),
#   mpirun     OpenMPI's mpirun on this host,
#   sbatch     a batch job whose script runs its own plain srun (the job
#              is watched with squeue: `sbatch --wait` polls at 2, 10
#              and 42 s, which would time its polling, not the job);
# and once more under plain srun while rank 0 writes a checkpoint (it
# sleeps 30 s before the write at step 3, TTRAIN_TEST_SLEEP: rank 1 waits
# in rounds with rank 0's heartbeat thread, which must notice it);
# once training is under way, rank 1 gets SIGSTOP (a hung node: it never
# exits by itself) or SIGKILL (a lost node). Each time the launcher (for
# sbatch: the job) must end non-zero within the comm timeout + 15 s of the
# signal, and after SIGSTOP rank 0 must name rank 1. The seconds from the
# signal to the end are printed per launcher and signal ("ended in").
set -u
. "$top_srcdir/tests/cluster/testlib.sh"
bin=$top_builddir/trainer/torus-train
TIMEOUT=3
LIMIT=$((TIMEOUT + 15))
tl_cluster_up --nodes 2
command -v mpirun >/dev/null || tl_skip "mpirun not found (install openmpi-bin)"
w=$TL_BASE/stall
mkdir -p "$w" "$TL_BASE/ompi-shm" "$TL_BASE/ompi-tmp"
export OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_btl_vader_backing_directory="$TL_BASE/ompi-shm"
export OMPI_MCA_orte_tmpdir_base="$TL_BASE/ompi-tmp"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
train=("$bin" --model tiny-cnn --synthetic --image-size 12 --dataset-size 4096
       --batch 32 --epochs 100000 --warmup-epochs 0 --threads 1 --print-every 1
       --comm-timeout "$TIMEOUT")
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
LPID= STOPPED= JOB=
# Whatever happens, no stopped or running rank of ours outlives the test.
_reap() {
    [ -n "$STOPPED" ] && kill -KILL "$STOPPED" 2>/dev/null
    [ -n "$LPID" ] && kill -KILL "$LPID" 2>/dev/null
    [ -n "$JOB" ] && scancel "$JOB" 2>/dev/null
    STOPPED= LPID= JOB=
}
trap 'rc=$?; _reap; (exit $rc); tl_cluster_down' EXIT

# The pid of rank 1 of the run tagged TAG (its environment says both).
_rank1() {
    local p env
    for p in $(pgrep -x torus-train); do
        env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) || continue
        grep -qx "TORUS_STALL_TAG=$1" <<<"$env" &&
            grep -Eqx '(PMIX_RANK|OMPI_COMM_WORLD_RANK|SLURM_PROCID)=1' <<<"$env" &&
            { echo "$p"; return 0; }
    done
    return 1
}

# Whether process PID is still there (not a zombie) 3 s after its job ended.
_alive() {
    local i
    for i in $(seq 30); do
        [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null || return 1
        sleep 0.1
    done
    return 0
}

# Whether the launcher (or the batch job) still runs.
_running() {
    if [ -n "$JOB" ]; then
        squeue -h -j "$JOB" -o %T 2>/dev/null | grep -Eq 'PENDING|CONFIGURING|RUNNING'
    else
        kill -0 "$LPID" 2>/dev/null
    fi
}

# _case LAUNCHER SIG: start, wait for step 3 in the log, signal rank 1,
# time the end.
_case() {
    local how=$1 sig=$2 tag="$1-$2-$$" log=$w/$1-$2.log pid= t0 dt rc i
    export TORUS_STALL_TAG=$tag
    case $how in
    srun) srun --mpi=pmix -N2 -n2 "${train[@]}" >"$log" 2>&1 & ;;
    srun-K0) srun --mpi=pmix -K0 -N2 -n2 "${train[@]}" >"$log" 2>&1 & ;;
    srun-write) TTRAIN_TEST_SLEEP=ckpt:0:3:30 srun --mpi=pmix -N2 -n2 "${train[@]}" \
        --checkpoint-dir "$w/ck" --checkpoint-every 3 >"$log" 2>&1 & ;;
    mpirun) mpirun -np 2 -x TORUS_STALL_TAG --oversubscribe --bind-to none \
        --mca btl self,vader,tcp "${train[@]}" >"$log" 2>&1 & ;;
    sbatch)
        printf '#!/bin/bash\nsrun --mpi=pmix "$@"\n' >"$w/job.sh"
        JOB=$(sbatch --parsable -J torus-stall -N2 -n2 -o "$log" "$w/job.sh" "${train[@]}") ||
            { fail "sbatch: $JOB"; JOB=; return; } ;;
    esac
    [ -n "$JOB" ] || LPID=$!
    for i in $(seq 300); do
        grep -q '^epoch 0 step 3/' "$log" 2>/dev/null && pid=$(_rank1 "$tag") && break
        _running || break
        sleep 0.1
    done
    if [ -z "$pid" ]; then
        fail "$how $sig: training did not start: $(tail -3 "$log")"
        _reap
        return
    fi
    STOPPED=$pid
    t0=$(date +%s.%N)
    kill -"$sig" "$pid"
    for i in $(seq $(((LIMIT + 30) * 10))); do
        _running || break
        sleep 0.1
    done
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if _running; then
        fail "$how $sig: the step is still alive $dt s after the signal (hangs)"
        _reap
        return
    fi
    if [ -n "$JOB" ]; then # the batch script's status: its srun's
        rc=$(scontrol show job "$JOB" | sed -n 's/.* ExitCode=\([0-9]*\):.*/\1/p')
    else
        wait "$LPID"
        rc=$?
    fi
    LPID= JOB=
    _alive "$pid" && fail "$how $sig: rank 1 outlived the step: $(grep State "/proc/$pid/status")"
    STOPPED=
    printf 'ended in %5.1f s: %-8s SIG%s (exit %d)\n' "$dt" "$how" "$sig" "$rc"
    [ "$rc" != 0 ] && awk -v d="$dt" -v l="$LIMIT" 'BEGIN { exit !(d <= l) }' ||
        grep -E 'tcomm|torus-train:|srun:|slurmstepd|error' "$log" | head -8
    [ "$rc" != 0 ] || fail "$how $sig: exit 0 without rank 1"
    awk -v d="$dt" -v l="$LIMIT" 'BEGIN { exit !(d <= l) }' ||
        fail "$how $sig: took $dt s, more than the comm timeout + 15 s ($LIMIT s)"
    [ "$sig" = STOP ] && ! grep -q 'rank 1 is lost' "$log" &&
        fail "$how $sig: no rank named rank 1: $(grep -E 'tcomm|torus-train:' "$log" | head -3)"
    return 0
}

for how in srun srun-K0 mpirun sbatch; do
    for sig in STOP KILL; do
        _case "$how" "$sig"
    done
done
_case srun-write STOP
[ $fails -eq 0 ] && echo "PASS: a stalled or lost rank ends the step under every launcher"
exit $((fails > 0))
