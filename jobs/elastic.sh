# jobs/elastic.sh: what the elastic training jobs share (sourced by
# train-elastic.sbatch and train-imagenet.sbatch; not a job of its own).
#
# Contract: the sourcing script sets ELASTIC_NAME (its name in messages),
# ELASTIC_RUN (the run folder, checkpoints in ELASTIC_RUN/checkpoints,
# metrics in ELASTIC_RUN/metrics.jsonl) and calls, in this order (the
# traps may come anywhere before elastic_train):
#   elastic_fix_batch BATCH     the run's global batch: BATCH at the first
#                               start, the stored one after; a different
#                               BATCH at a later start is refused (exit 2)
#   elastic_note_start          the start line, the restart cap
#   elastic_traps               USR1/TERM: checkpoint and requeue
#   elastic_train CMD...        srun CMD on the job's nodes still up, again
#                               (--resume) after a lost rank, and the
#                               requeue on USR1/TERM; returns torus-train's
#                               status (3 = requeued, the caller exits 0)
# and, for its srun options, elastic_ranks_per_node and elastic_gpu_opts.
# Membership is Slurm's: the allocation at each start (whatever node count
# in --nodes=MIN-MAX it gave) and, after a node is lost, the job's node list
# as slurmctld now has it (a --no-kill job keeps going without the node)
# less the nodes that no longer answer. No state of our own but the run
# folder's global-batch and starts files.
# Every name here starts with elastic_ (_elastic_ for the helpers).
# shellcheck shell=bash

# The GPUs the job asked per node (--gpus-per-node=[TYPE:]N), or nothing
# when it asked none that way.
_elastic_gpus_asked() {
    [ -z "${SLURM_GPUS_PER_NODE:-}" ] || echo "${SLURM_GPUS_PER_NODE##*:}"
}

# The ranks per node, from the allocation: the task count asked per node
# (--ntasks-per-node) if any; else a rank per GPU asked per node
# (--gpus-per-node), or per GPU on the node when the job asked none that
# way (whole nodes bring theirs); else the node's CPUs (the fewest of any
# node) over --cpus-per-task.
elastic_ranks_per_node() {
    local asked
    asked=$(_elastic_gpus_asked)
    if [ -n "${SLURM_NTASKS_PER_NODE:-}" ]; then
        echo "$SLURM_NTASKS_PER_NODE"
    elif [ "${asked:-0}" -gt 0 ] 2>/dev/null; then
        echo "$asked"
    elif [ -z "$asked" ] && [ "${SLURM_GPUS_ON_NODE:-0}" -gt 0 ] 2>/dev/null; then
        echo "$SLURM_GPUS_ON_NODE"
    else
        # SLURM_JOB_CPUS_PER_NODE looks like 8(x3),4.
        local cpus
        cpus=$(tr ',' '\n' <<<"${SLURM_JOB_CPUS_PER_NODE:?}" | sed 's/(.*//' | sort -n | head -1)
        echo $((cpus / ${SLURM_CPUS_PER_TASK:-1} > 0 ? cpus / ${SLURM_CPUS_PER_TASK:-1} : 1))
    fi
}

# srun's GPU option for a step: a GPU per rank where the job asked GPUs
# per node; none where it asked 0 on nodes that have some (--exclusive
# grants a node's GPUs, and a step asking none would see them all);
# nothing otherwise (every rank sees the node's GPUs and torus-train picks
# its local rank's).
elastic_gpu_opts() {
    local asked
    asked=$(_elastic_gpus_asked)
    if [ "${asked:-0}" -gt 0 ] 2>/dev/null; then
        echo "--gpus-per-task=1"
    elif [ "$asked" = 0 ] && [ "${SLURM_GPUS_ON_NODE:-0}" -gt 0 ] 2>/dev/null; then
        echo "--gres=gpu:0"
    fi
}

# The job's nodes that can run a step now, one a line: slurmctld's node
# list of this job (a node marked down has left it) less nodes that are
# down, failed or not responding (a node whose death slurmctld has not
# yet acted on).
elastic_live_nodes() {
    local list
    list=$(scontrol show job "$SLURM_JOB_ID" | sed -n 's/^ *NodeList=\([^ ]*\).*/\1/p')
    [ -n "$list" ] && [ "$list" != "(null)" ] || return 0
    sinfo -h -N -n "$list" -o '%N %t' | awk '$2 !~ /^(down|fail|unk)|\*$/ { print $1 }' | sort -uV
}

# The newest checkpoint's global step in DIR (nothing when there is none).
elastic_newest_step() {
    find "$1" -maxdepth 1 -name 'ckpt-*.h5' -printf '%f\n' 2>/dev/null |
        sed -n 's/^ckpt-\([0-9][0-9]*\)-.*\.h5$/\1/p' | sort -n | tail -1
}

elastic_fix_batch() {
    local want=$1 file=$ELASTIC_RUN/global-batch
    if [ -f "$file" ]; then
        local had
        had=$(cat "$file")
        if [ -n "$want" ] && [ "$want" != "$had" ]; then
            echo "$ELASTIC_NAME: this run's global batch is $had, fixed at its first start ($file), and a restart may not change it to $want: submit the new batch with a new run folder" >&2
            exit 2
        fi
        ELASTIC_BATCH=$had
    else
        [ -n "$want" ] || { echo "$ELASTIC_NAME: no global batch for the first start" >&2; exit 2; }
        echo "$want" >"$file.tmp" && mv "$file.tmp" "$file"
        ELASTIC_BATCH=$want
    fi
}

# The start line, and the stop of a job requeued again and again without
# progress: every start notes the newest checkpoint's global step in
# RUN/starts; TORUS_MAX_IDLE_RESTARTS starts in a row of this job from the
# same step end it instead of looping forever.
elastic_note_start() {
    ELASTIC_START=$((${SLURM_RESTART_COUNT:-0} + 1))
    local at idle max=${TORUS_MAX_IDLE_RESTARTS:-3}
    at=$(elastic_newest_step "$ELASTIC_RUN/checkpoints")
    echo "== $ELASTIC_NAME: start $ELASTIC_START of job $SLURM_JOB_ID (SLURM_RESTART_COUNT ${SLURM_RESTART_COUNT:-0}) on $SLURM_JOB_NUM_NODES nodes ($SLURM_JOB_NODELIST), global batch $ELASTIC_BATCH, $([ -n "$at" ] && echo "resuming at global step $at" || echo "a fresh run"); run folder $ELASTIC_RUN"
    [[ $max =~ ^[0-9]+$ ]] || { echo "$ELASTIC_NAME: TORUS_MAX_IDLE_RESTARTS must be a whole number (got '$max')" >&2; exit 2; }
    echo "$SLURM_JOB_ID ${at:-none}" >>"$ELASTIC_RUN/starts"
    idle=$(awk -v j="$SLURM_JOB_ID" -v s="${at:-none}" '$1 == j { n = $2 == s ? n + 1 : 0 } END { print n - 1 }' "$ELASTIC_RUN/starts")
    if [ "$idle" -gt "$max" ]; then
        echo "$ELASTIC_NAME: job $SLURM_JOB_ID restarted $idle times in a row from the same checkpoint (global step ${at:-none}, $ELASTIC_RUN/starts) without progress: stopping (TORUS_MAX_IDLE_RESTARTS=$max)" >&2
        exit 1
    fi
}

# USR1 (the time limit's --signal, send_user_signal preemption) and TERM
# (preemption without it) alike: the job is to be requeued
# (ELASTIC_SIGNALED stays set: elastic_train looks at it before it
# launches a step and when a step ends, so a signal that comes between
# steps is not forgotten); during a step it goes on to the step (srun
# forwards USR1 to every task, and torus-train answers with a checkpoint
# and status 3).
_elastic_on_signal() {
    ELASTIC_SIGNALED=1
    if [ -z "${_elastic_pid:-}" ]; then
        echo "== $1 while no training step runs: requeueing"
        return
    fi
    echo "== $1: asking torus-train for a checkpoint, then requeueing"
    kill -USR1 "$_elastic_pid" 2>/dev/null || true
}

elastic_traps() {
    _elastic_pid='' ELASTIC_SIGNALED=0
    trap '_elastic_on_signal USR1' USR1
    trap '_elastic_on_signal TERM' TERM
}

# One step on NODES (a Slurm host list) of N nodes; its status in
# _elastic_rc. The step runs in the background so that a trap runs as soon
# as a signal arrives (bash runs traps only between commands). srun
# --no-kill: a node lost does not end the step from Slurm's side, the
# surviving ranks see their peer go and end with the peer-lost status.
# The job-wide node variables are the allocation's at the start; the
# step's are set to what it runs on.
_elastic_step() {
    local nodes=$1 n=$2 rpn=$3
    shift 3
    SLURM_JOB_NUM_NODES=$n SLURM_NNODES=$n SLURM_JOB_NODELIST=$nodes SLURM_NODELIST=$nodes \
        srun --no-kill -N "$n" -w "$nodes" --ntasks-per-node="$rpn" "$@" &
    _elastic_pid=$!
    wait "$_elastic_pid"
    _elastic_rc=$?
    while [ $_elastic_rc -gt 128 ] && kill -0 "$_elastic_pid" 2>/dev/null; do
        wait "$_elastic_pid"
        _elastic_rc=$?
    done
    _elastic_pid=
}

# The requeue of a job signalled while no step ran: what is on disk is
# all there is to keep.
_elastic_requeue_signalled() {
    echo "== requeueing job $SLURM_JOB_ID after the signal (the next start takes the nodes Slurm gives within the job's range)"
    scontrol requeue "$SLURM_JOB_ID"
}

elastic_train() {
    local rpn relaunch=0 max=${TORUS_MAX_RELAUNCHES:-3} why="" nodes n at
    [[ $max =~ ^[0-9]+$ ]] || { echo "$ELASTIC_NAME: TORUS_MAX_RELAUNCHES must be a whole number (got '$max')" >&2; exit 2; }
    rpn=$(elastic_ranks_per_node)
    while :; do
        nodes=$(elastic_live_nodes | paste -sd,)
        n=$(tr ',' '\n' <<<"$nodes" | grep -c .)
        [ "$n" -gt 0 ] || { echo "$ELASTIC_NAME: no node of job $SLURM_JOB_ID is up" >&2; return 1; }
        at=$(elastic_newest_step "$ELASTIC_RUN/checkpoints")
        # The steps past the checkpoint it resumes from are trained again:
        # torus-train --resume drops their metrics lines itself. Without a
        # checkpoint every step is trained again: a fresh file.
        [ -n "$at" ] || rm -f "$ELASTIC_RUN/metrics.jsonl"
        # A signal while no step ran (staging, the work above, or between
        # a lost step and its relaunch): requeue instead of launching.
        [ "$ELASTIC_SIGNALED" = 1 ] && { _elastic_requeue_signalled; return 3; }
        echo "== $ELASTIC_NAME: start $ELASTIC_START, step $((relaunch + 1)): $n nodes ($nodes) x $rpn ranks = $((n * rpn)) ranks, global batch $ELASTIC_BATCH, $([ -n "$at" ] && echo "resuming at global step $at" || echo "from the beginning")${why:+ ($why)}"
        _elastic_step "$nodes" "$n" "$rpn" "$@"
        case $_elastic_rc in
        4 | 5)
            # 5: a rank was lost mid-run; 4: the start-up never finished
            # (a node that died at the start, or a rank whose MPI crashed
            # while starting). Either way the nodes still up can go on.
            local what="a rank was lost (exit status 5)"
            [ "$_elastic_rc" = 5 ] || what="the start-up did not finish (exit status 4)"
            # Signalled while this step died: requeue, do not relaunch.
            [ "$ELASTIC_SIGNALED" = 1 ] && { echo "== $ELASTIC_NAME: $what"; _elastic_requeue_signalled; return 3; }
            relaunch=$((relaunch + 1))
            if [ $relaunch -gt "$max" ]; then
                echo "$ELASTIC_NAME: $what for the $relaunch. time in this start; stopping after TORUS_MAX_RELAUNCHES=$max relaunches" >&2
                return "$_elastic_rc"
            fi
            why="relaunch $relaunch of $max: $what on $n nodes"
            echo "== $ELASTIC_NAME: $what at $(date -u +%H:%M:%S.%N | cut -c1-12) UTC; relaunching on the nodes still up"
            ;;
        3)
            echo "== checkpointed; requeueing job $SLURM_JOB_ID (the next start takes the nodes Slurm gives within the job's range)"
            scontrol requeue "$SLURM_JOB_ID"
            return 3
            ;;
        *) return $_elastic_rc ;;
        esac
    done
}
