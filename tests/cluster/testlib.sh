# tests/cluster/testlib.sh: helpers for integration tests that need the local
# Slurm cluster. Sourced by tests/integration/*.sh; every name starts with tl_.
#
# tl_cluster_up ARGS...   start a private cluster (ARGS go to tests/cluster/up),
#                         source its env, and make sure it is torn down when the
#                         test exits, whatever happens.
# tl_fail MSG             print "FAIL: MSG" and exit 1.
# tl_skip MSG             print "SKIP: MSG" and exit 77 (the automake skip code).
# tl_wait_gone JOB SECS   wait until JOB has left the queue; tl_fail if not.
# tl_requeued_wait JOB    wait until a requeued batch job is pending on
#                         Slurm's hold after a requeue (Reason=BeginTime).
# tl_requeued_release JOB release that hold once the first run's step
#                         daemons are gone.
# tl_srun_mpi ARGS...     srun ARGS (timeout 300 s), its output on stdout; once
#                         more, logged as RETRY on stderr, only when a rank
#                         printed tcomm's "OpenMPI crashed inside MPI_Init".
# tl_mpi_crashed FILE     FILE holds that line (a batch job's output: a test
#                         resubmits such a job, logged as RETRY).

tl_fail() {
    echo "FAIL: $*" >&2
    exit 1
}

tl_skip() {
    echo "SKIP: $*"
    exit 77
}

# OpenMPI 4.1.4's TCP start-up can crash inside MPI_Init on a loaded host
# (a NULL handler in its event loop; tcomm says so on that rank, see
# trainer/comm/bootstrap/init.c). That is the MPI library, not torus: it
# alone earns a retry (two at most), and every retry is logged.
# TL_SRUN_TIMEOUT: the seconds each try may take (300).
# tl_mpi_crashed FILE: FILE (a job's output) holds that line of tcomm's.
tl_mpi_crashed() { grep -q 'OpenMPI crashed inside MPI_Init' "$1" 2>/dev/null; }

tl_srun_mpi() {
    local out rc try
    for try in 1 2 3; do
        out=$(timeout "${TL_SRUN_TIMEOUT:-300}" srun "$@" 2>&1)
        rc=$?
        [ $rc != 0 ] && [ $try -lt 3 ] && grep -q 'OpenMPI crashed inside MPI_Init' <<<"$out" || break
        echo "RETRY: srun $*: try $try exit $rc, OpenMPI crashed inside MPI_Init:" >&2
        grep -E 'tcomm:|srun: error' <<<"$out" | head -5 | sed 's/^/    /' >&2
    done
    printf '%s\n' "$out"
    return $rc
}

tl_wait_gone() {
    local i
    for ((i = 0; i < $2 * 5; i++)); do
        [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
        sleep 0.2
    done
    tl_fail "job $1 still queued after $2 s: $(squeue -h -j "$1")"
}

# Slurm 22.05 holds a requeued batch job for about 2 minutes (BeginTime);
# once it is pending again, a test releases it at once, as an admin would...
tl_requeued_wait() {
    local i
    for ((i = 0; i < 300; i++)); do
        scontrol show job "$1" | grep -q 'JobState=PENDING.*Reason=BeginTime' && return 0
        sleep 0.2
    done
}

# ...but only once the first run's step daemons are gone: the restart
# reuses the step ids, and a step daemon of the first run still holding
# its PMIx socket (spool/nX/stepd.slurm.pmix.JOB.STEP) fails the restart's
# step with "Address already in use" (Slurm's hold is what avoids it).
# And not within 2 s of the requeue: slurmd compares credentials with the
# job's revocation time in whole seconds, so a start in the second of the
# requeue is killed ("Job credential revoked").
tl_requeued_release() {
    local i
    for ((i = 0; i < 300; i++)); do
        pgrep -f "^slurmstepd: \[$1\." >/dev/null || break
        sleep 0.2
    done
    sleep 2
    scontrol update JobId="$1" StartTime=now
}

tl_require_cluster() {
    [ "$(id -u)" = 0 ] || tl_skip "the local Slurm cluster needs root (slurmd, namespaces)"
    local t
    for t in slurmctld slurmd munged srun unshare nsenter; do
        command -v "$t" >/dev/null || tl_skip "'$t' is not installed (run tools/install-deps)"
    done
}

tl_cluster_up() {
    tl_require_cluster
    # One test cluster at a time on this machine: `make -j` runs tests in
    # parallel, and two clusters on 2 cores only slow each other down (and
    # share /dev/shm, where PMIx servers of concurrent steps have collided).
    # The lock is released when the test exits.
    exec 8>"${TMPDIR:-/tmp}/torus-cluster-tests.lock"
    flock -w 900 8 || tl_fail "waited 15 minutes for another cluster test to finish"
    TL_BASE=$(mktemp -d "${TMPDIR:-/tmp}/torus-test.XXXXXX")
    trap 'tl_cluster_down' EXIT
    # 8>&-: the daemons must not inherit (and so hold) the lock.
    "$top_srcdir/tests/cluster/up" --base "$TL_BASE" --quiet "$@" 8>&- ||
        tl_fail "tests/cluster/up $* did not bring the cluster up"
    . "$TL_BASE/env"
}

tl_cluster_down() {
    local rc=$?
    if [ -n "${TL_BASE:-}" ]; then
        "$top_srcdir/tests/cluster/down" --base "$TL_BASE" --quiet
        if [ $rc != 0 ] && [ $rc != 77 ]; then
            echo "--- slurmctld log tail ($TL_BASE/log)" >&2
            tail -n 20 "$TL_BASE/log/slurmctld.log" >&2 2>/dev/null
        else
            rm -rf "$TL_BASE"
        fi
    fi
    exit $rc
}
