#!/bin/bash
# data_fuzz.sh: the libFuzzer target for libtdata's readers of user files
# (tests/fuzz/fuzz_data.c: index, shards rewritten from the fuzzer's bytes,
# JPEG, PNG, IDX) runs in CI for a fixed, short time (DATA_FUZZ_SECONDS,
# default 20) from the seeds kept in tests/fuzz/corpus-data, and must end
# without a crash, a sanitizer report or a leak. It builds the target with
# clang -fsanitize=fuzzer,address,undefined into a private directory.
set -euo pipefail
: "${top_builddir:?run from make check}" "${top_srcdir:?}"
var() { sed -n "s/^$1 = //p" "$top_builddir/Makefile"; }
FCC=${FUZZ_CC:-clang}
SECONDS_=${DATA_FUZZ_SECONDS:-20}
T=$(mktemp -d "$top_builddir/data_fuzz.XXXXXX")
trap 'rm -rf "$T"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){return 0;}' > "$T/probe.c"
$FCC -fsanitize=fuzzer,address,undefined "$T/probe.c" -o "$T/probe" 2> /dev/null || {
    echo "SKIP: $FCC cannot build libFuzzer targets (-fsanitize=fuzzer; Debian package clang)"; exit 77; }
cd "$top_srcdir"
CFLAGS="-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
 -D_GNU_SOURCE -DHAVE_CONFIG_H -I$top_srcdir -I$top_builddir $(var HDF5_CFLAGS) \
 $(var TURBOJPEG_CFLAGS) $(var JPEG_CFLAGS) $(var PNG_CFLAGS) $(var ZLIB_CFLAGS)"
srcs=$(ls common/torus_error.c common/torus_report.c data/format/*.c data/image/*.c data/pack/*.c \
    tests/fuzz/fuzz_data.c tests/fuzz/fuzz_shard.c)
printf '%s\n' $srcs | xargs -P 2 -I{} sh -c \
    'exec $3 $4 -c "$2" -o "$1/$(echo "$2" | tr / _).o"' _ "$T" {} "$FCC" "$CFLAGS" \
    || { echo "FAIL: compiling the fuzz target"; exit 1; }
$FCC -fsanitize=fuzzer,address,undefined "$T"/*.o $(var HDF5_LIBS) $(var TURBOJPEG_LIBS) \
    $(var JPEG_LIBS) $(var PNG_LIBS) $(var ZLIB_LIBS) -lpthread -lm -o "$T/fuzz_data" \
    || { echo "FAIL: linking the fuzz target"; exit 1; }
mkdir -p "$T/work"
export TMPDIR=$T
set +e
"$T/fuzz_data" -max_total_time="$SECONDS_" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$T/" "$T/work" "$top_srcdir/tests/fuzz/corpus-data" > "$T/log" 2>&1
rc=$?
set -e
if [ $rc -ne 0 ] || grep -q -e 'Sanitizer' -e 'runtime error:' "$T/log"; then
    echo "FAIL: fuzz_data exit $rc"; grep -m20 -e ERROR -e 'runtime error' -e SUMMARY -e '#[0-9]' "$T/log"
    crash=$(ls "$T"/crash-* "$T"/leak-* "$T"/timeout-* 2> /dev/null | head -1 || true)
    [ -z "$crash" ] || echo "input: $(od -An -tx1 "$crash" | head -5)"
    exit 1
fi
echo "ok: fuzz_data ran ${SECONDS_}s without a crash: $(grep -m1 'stat::number_of_executed_units' "$T/log")"
