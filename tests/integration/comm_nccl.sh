#!/bin/bash
# comm_nccl.sh: the NCCL transport on a GPU (device memory), as one process
# and under mpirun with one rank per visible GPU. SKIP without a device:
# the transport is still compiled and linked by the build on every machine
# with CUDA and NCCL.
set -u
. "$top_srcdir/tests/integration/comm_lib.sh"
BIN="$top_builddir/tests/integration/comm_nccl_check"
[ -x "$BIN" ] || cm_skip "built without NCCL"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU ||
    cm_skip "no CUDA device on this machine"
"$BIN"
rc=$?
[ $rc = 77 ] && cm_skip "no CUDA device"
[ $rc = 0 ] || cm_fail "single-process NCCL check (exit $rc)"
ngpu=$(nvidia-smi -L | grep -c GPU)
if [ "$ngpu" -ge 2 ]; then
    cm_mpirun "$ngpu" "$BIN" || cm_fail "NCCL check under mpirun -np $ngpu"
fi
echo "PASS"
