# plugin_lib.sh: helpers shared by the spank_torus.so cluster tests
# (plugin_*.sh). Sourced after tests/cluster/testlib.sh; names start with pl_.
#
# pl_up ARGS...            start a cluster with the freshly built plugin
# pl_dump FILE SRUN_ARGS.. run `srun SRUN_ARGS` printing each task's
#                          "procid host TORUS_*..." line, sorted, into FILE
#                          (srun's stderr goes to FILE.err)
# pl_layout FILE ARGS...   torus-layout --json with this cluster's topology.conf
# pl_match DUMP JSON       every task's TORUS_* equals the layout
PL_TOOL="$top_builddir/topology/torus-layout"
PL_CHECK="$top_srcdir/tests/integration/torus_check.py"
PL_SO="$top_builddir/plugins/.libs/spank_torus.so"
PL_PRINT='echo $SLURM_PROCID $(hostname) $TORUS_DIMS $TORUS_COORD $TORUS_GROUP $TORUS_NGROUPS $TORUS_NODE_INDEX $TORUS_SOURCE $TORUS_VERSION'

# A dead node must fail a test, not hang it: every Slurm client the tests
# call goes through timeout (jobs here take seconds).
srun() { timeout 120 env srun "$@"; }
sbatch() { timeout 240 env sbatch "$@"; }
salloc() { timeout 120 env salloc "$@"; }

pl_up() {
    [ -f "$PL_SO" ] || tl_fail "$PL_SO is not built"
    command -v python3 >/dev/null || tl_skip "python3 is not installed (tools/install-deps)"
    tl_cluster_up --plugin "$PL_SO" --cpus 8 "$@"
    # These tests are about the environment, not MPI: no PMIx server per
    # step, so clusters of other tests running at the same time (same node
    # names, same job ids) share nothing with ours.
    export SLURM_MPI_TYPE=none
    PL_TMP="$TL_BASE/pl"
    mkdir -p "$PL_TMP"
}

pl_dump() {
    local out=$1
    shift
    srun "$@" sh -c "$PL_PRINT" 2>"$out.err" | sort -n >"$out" ||
        tl_fail "srun $* failed: $(cat "$out.err")"
}

pl_layout() {
    local out=$1
    shift
    "$PL_TOOL" --topology "$TL_BASE/etc/topology.conf" --json "$@" >"$out" ||
        tl_fail "torus-layout $* failed"
}

pl_match() {
    python3 "$PL_CHECK" env "$2" "$1" || { echo "--- tasks:" >&2; cat "$1" >&2; exit 1; }
}
