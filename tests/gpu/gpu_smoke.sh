#!/bin/bash
# gpu_smoke.sh: run the GPU smoke check if it was built. Without CUDA, or on a
# machine with no GPU, this test reports SKIP with the reason.
set -u
bin="$top_builddir/tests/gpu/gpu_smoke"
if [ ! -x "$bin" ]; then
    echo "SKIP: built without CUDA (configure found no toolkit), so there is no GPU check to run"
    exit 77
fi
exec "$bin"
