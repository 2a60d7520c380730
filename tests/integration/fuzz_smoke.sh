#!/bin/bash
# fuzz_smoke.sh: `make fuzz-smoke` in CI, with a short budget: the topology
# parsers' target (fuzz_parsers), the checkpoint loader's (fuzz_ckpt,
# mutated HDF5 checkpoints through the real HDF5 library) and the JSON
# readers' (fuzz_json: the sweep's results file and metrics) each run
# FUZZ_SMOKE_SECONDS (default 5 here, 30 by hand) from their committed
# seeds and must end without a crash, a sanitizer report or a leak.
# fuzz_data (index, shards, images, IDX, listing, names) runs in
# data_fuzz.sh, which builds it its own way. Needs clang with libFuzzer.
set -euo pipefail
: "${top_builddir:?run from make check}"
FCC=${FUZZ_CC:-clang}
T=$(mktemp -d "$top_builddir/fuzz_smoke.XXXXXX")
trap 'rm -rf "$T"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){return 0;}' > "$T/probe.c"
$FCC -fsanitize=fuzzer,address,undefined "$T/probe.c" -o "$T/probe" 2> /dev/null || {
    echo "SKIP: $FCC cannot build libFuzzer targets (-fsanitize=fuzzer; Debian package clang)"; exit 77; }
rc=0
make -C "$top_builddir" --no-print-directory fuzz-smoke FUZZ_SMOKE_TARGETS="parsers ckpt json" \
    FUZZ_SMOKE_SECONDS="${FUZZ_SMOKE_SECONDS:-5}" FUZZ_SMOKE_DIR="$T" > "$T/log" 2>&1 || rc=$?
if [ $rc -ne 0 ] || grep -q -e 'Sanitizer' -e 'runtime error:' "$T/log"; then
    echo "FAIL: make fuzz-smoke exit $rc"
    grep -m20 -e ERROR -e 'runtime error' -e SUMMARY -e '#[0-9]' -e 'error:' -e 'FAIL' "$T/log" || tail -20 "$T/log"
    exit 1
fi
grep 'fuzz-smoke:' "$T/log"
