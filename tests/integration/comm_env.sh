#!/bin/bash
# comm_env.sh: the TORUS_* env contract as the trainer's comm layer reads
# it. Per-rank TORUS_* values (set by a wrapper, as the SPANK plugin would)
# drive the grid; bad values and inconsistent grids fail at start-up with a
# message naming the variable or the ranks; a process that was meant to be
# one of several but has no PMIx server stops with launch instructions.
set -u
. "$top_srcdir/tests/integration/comm_lib.sh"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/comm_env.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# A wrapper that gives rank r of P=R*C its TORUS_* like the plugin does
# (row-major here; column of rank r is r % C).
cat > "$TMP/wrap" <<'W'
#!/bin/bash
r=$OMPI_COMM_WORLD_RANK
export TORUS_VERSION=1 TORUS_DIMS=${R}x${C} TORUS_COORD=$((r / C)),$((r % C))
export TORUS_GROUP=$((r / C)) TORUS_NGROUPS=$R TORUS_NODE_INDEX=$((r / C)) TORUS_SOURCE=test
[ -n "${BAD_RANK:-}" ] && [ "$r" = "$BAD_RANK" ] && export $BAD_VAR
exec "$@"
W
chmod +x "$TMP/wrap"

out=$(R=2 C=3 cm_mpirun 6 "$TMP/wrap" "$CM_CHECK" --sizes 1,999 --algos torus2d,hier-rs 2>&1) ||
    { echo "$out"; cm_fail "a valid TORUS_* layout failed"; }
echo "$out" | grep -q 'grid=2x3 groups=2 (size 3) .*source=test' ||
    { echo "$out"; cm_fail "TORUS_* layout not used"; }

expect_fail() { # pattern, then [VAR=value ...] command (may be a function)
    local pat=$1
    shift
    local out
    out=$(while [[ $1 == [A-Z_]*=* ]]; do export "$1"; shift; done; "$@" 2>&1) &&
        { echo "$out"; cm_fail "'$*' succeeded with a bad layout"; }
    echo "$out" | grep -q -- "$pat" || { echo "$out"; cm_fail "no '$pat' in the error"; }
    echo "ok: fails with: $(echo "$out" | grep -m1 -- "$pat")"
}

# Bad values in one process, before any MPI: the message names the variable.
export TORUS_VERSION=1 TORUS_NGROUPS=1 TORUS_GROUP=0 TORUS_COORD=0,0
expect_fail "TORUS_DIMS='1by1'" env TORUS_DIMS=1by1 "$CM_CHECK"
expect_fail "TORUS_COORD='0,1' lies outside" env TORUS_DIMS=1x1 TORUS_COORD=0,1 "$CM_CHECK"
# An unknown version is ignored (the contract says so), with a warning.
out=$(env TORUS_DIMS=2x2 TORUS_VERSION=7 "$CM_CHECK" --sizes 5 2>&1) ||
    { echo "$out"; cm_fail "an unknown TORUS_VERSION must be ignored, not fatal"; }
echo "$out" | grep -q 'TORUS_VERSION=7 ignored' || { echo "$out"; cm_fail "no warning"; }
echo "ok: unknown version ignored: $(echo "$out" | grep -m1 warning)"
expect_fail "TORUS_COORD is not set" env -u TORUS_COORD TORUS_DIMS=1x1 "$CM_CHECK"
unset TORUS_VERSION TORUS_NGROUPS TORUS_GROUP TORUS_COORD
# Across ranks: a grid that does not match the job, and a duplicate.
expect_fail "does not match the 4 ranks" R=2 C=3 BAD_RANK= cm_mpirun 4 "$TMP/wrap" "$CM_CHECK"
expect_fail "both claim grid coordinate 0,1" R=2 C=2 BAD_RANK=2 BAD_VAR=TORUS_COORD=0,1 \
    cm_mpirun 4 "$TMP/wrap" "$CM_CHECK"
expect_fail "TORUS_GROUP='5'" R=2 C=2 BAD_RANK=3 BAD_VAR=TORUS_GROUP=5 \
    cm_mpirun 4 "$TMP/wrap" "$CM_CHECK"
# Options checked too.
expect_fail "grid 3x3 does not match 4 ranks" cm_mpirun 4 "$CM_CHECK" --grid 3x3
# Meant to be distributed, but no PMIx server (srun without --mpi=pmix).
expect_fail "Launch it with 'srun --mpi=pmix" env SLURM_NTASKS=4 "$CM_CHECK"
expect_fail "Launch it with" env TORUS_VERSION=1 TORUS_DIMS=2x2 TORUS_COORD=0,0 \
    TORUS_GROUP=0 TORUS_NGROUPS=1 "$CM_CHECK"
echo "PASS"
