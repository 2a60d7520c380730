#!/bin/bash
# gpu_smoke.sh: run the GPU smoke check if it was built. Without CUDA, or on a
# machine with no GPU, this test reports SKIP with the reason.
set -u
bin="$top_builddir/tests/gpu/gpu_smoke"
if [ ! -x "$bin" ]; then
    msg="SKIP: built without CUDA (configure found no toolkit), so there is no GPU check to run"
    echo "$msg"
    { echo "${0##*/}: $msg" >&9; } 2>/dev/null || true
    exit 77
fi
out=$("$bin")
rc=$?
echo "$out"
# Show the reason on the terminal too when the device is missing.
[ $rc != 77 ] || { echo "${0##*/}: $out" >&9; } 2>/dev/null || true
exit $rc
