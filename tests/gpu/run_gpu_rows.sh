#!/bin/bash
# tests/gpu/run_gpu_rows.sh: run-gpu's own logic, without a GPU: a mount
# namespace gives it a /dev/nvidia0 (an empty file on a tmpfs /dev) and a
# bundle whose programs are scripts printing what the real checks print.
# Asserts that
#   - with every check passing (the peer N/A: no torch with CUDA here) it
#     exits 0 and every row is PASS or N/A;
#   - rows are found by name: a SKIP row and an INFO row are FAIL, a row
#     the check did not print is FAIL naming the check's exit status, the
#     other rows of that check still PASS;
#   - the budget holds: a check that hangs is stopped at the budget's end
#     (FAIL, "ran past its time limit"), every later row is FAIL "not
#     run", and run-gpu ends within the budget plus a few seconds;
#   - a bundle that needs a newer glibc than the node's says so, exit 1;
#   - at most 8 files are written, summary.tsv among them, with one line
#     per row; the table is printed last; a bad option exits 2.
# Needs root (a mount namespace).
set -u
S=${top_srcdir:?run from make check}
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for unshare -m"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: no unshare (util-linux)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/run_gpu_rows.XXXXXX")
trap 'rm -rf "$T"' EXIT
G=$T/bundle
mkdir -p "$G/bin" "$G/lib/torus" "$G/share/sample" "$G/share/oracle" "$T/cuda"
cp "$S/tests/gpu/run-gpu" "$G/run-gpu"
echo "libfake_cudart.so.13" >"$G/lib/torus/NEEDED"
: >"$T/cuda/libfake_cudart.so.13"
prog() { printf '#!/bin/bash\n%s\n' "$2" >"$G/bin/$1"; chmod +x "$G/bin/$1"; }
row() { printf '%-28s %s  %s' "$1" "$2" "$3"; }
CC_ROWS=("layers cuda (FP32)" "layers cuda-fp16" "8-bit input cuda (FP32)" "8-bit input cuda-fp16"
    "loss scale cuda (FP32)" "loss scale cuda-fp16" "step graphs cuda (FP32)" "step graphs cuda-fp16"
    "device step cuda (FP32)" "device vs host cuda (FP32)" "device step cuda-fp16"
    "device vs host cuda-fp16" "tiny-cnn 50 steps FP32")
make_bundle() { # good | broken: the checks of the second run fail
    local cc="" r res
    for r in "${CC_ROWS[@]}"; do
        res=PASS
        if [ "$1" = broken ]; then
            [ "$r" = "loss scale cuda-fp16" ] && res=SKIP
            [ "$r" = "step graphs cuda-fp16" ] && res=INFO
            [ "$r" = "device vs host cuda-fp16" ] && continue
        fi
        cc+="echo '$(row "$r" $res "max diff 1e-7")'"$'\n'
    done
    prog cuda_check '[ "${1:-}" = --versions ] && { echo "driver CUDA 13.0; cudart 13.0 /x/libcudart.so.13"; exit 0; }
echo case lines
'"$cc"'exit '"$([ "$1" = broken ] && echo 1 || echo 0)"
    prog optim_check "echo '$(row "LARS/SGD kernel vs host" PASS x)'; echo '$(row "fp16 working copy rounding" PASS x)'; echo '$(row "device step vs eager kernels" PASS x)'"
    prog gpu_smoke "for r in device 'wire fp16 pack/unpack' 'wire bf16 pack/unpack' 'wire fp32 pack/unpack' 'cuBLAS SGEMM' 'cuDNN conv fwd' 'NCCL fp16 premul-sum x3'; do printf '%-28s %-6s %s\n' \"\$r\" PASS ok; done"
    prog test_comm_gpu "echo '100%: Checks: 3, Failures: 0, Errors: 0'"
    prog comm_nccl_check "echo 'one process: every algorithm ran as NCCL collectives on 1-rank communicators'; echo PASS"
    prog torus-train 'case "$*" in
*tiny-cnn*) echo "torus-train: tiny-cnn, backend cuda"; echo "done: global step 50" ;;
*) echo "torus-train: 8-bit input batches, normalised and mirrored on the device (the next batch copied during the step)"
   echo "epoch 0 step 30/30 | 2345.6 img/s | loss 6.9"; echo "peak device memory 30123 MB in use on GPU 0 (x)" ;;
esac'
    if [ "$1" = broken ]; then
        prog torus-data-bench 'sleep 60'
    else
        prog torus-data-bench 'printf "decode %s 1234.5 99 1300\n" 16'
    fi
    prog oracle-check ''
    mv "$G/bin/oracle-check" "$G/share/oracle/oracle-check"
    printf '#!/bin/bash\necho "ROW logits PASS 1e-6 1e-4"; echo "ROW grads PASS 2e-6 1e-4"\n' >"$G/share/oracle/oracle-check"
}
run_ns() { # out-dir limit -> $T/<out>.txt, $T/<out>.rc
    local name=$1 lim=$2
    unshare -m bash -c '
        mount -t tmpfs none /dev && : >/dev/nvidia0 && : >/dev/null && chmod 666 /dev/null || exit 99
        LD_LIBRARY_PATH=$3 "$1/run-gpu" --out "$2" --limit "$4"
        echo $? >"$2.rc"' bash "$G" "$T/$name" "$T/cuda" "$lim" >"$T/$name.txt" 2>&1
    [ -f "$T/$name.rc" ] || fail "run-gpu did not run in the namespace: $(cat "$T/$name.txt")"
}
field() { awk -F'\t' -v r="$2" '$1 == r { print $'"$3"' }' "$T/$1/summary.tsv"; }

"$G/run-gpu" --bogus >/dev/null 2>&1
[ $? = 2 ] || fail "run-gpu --bogus: want exit 2"

make_bundle good
echo 9.99 >"$G/lib/torus/GLIBC"
run_ns old 120
[ "$(cat "$T/old.rc")" = 1 ] && grep -q 'needs glibc 9.99 or newer; this node has glibc 2\.' "$T/old.txt" ||
    fail "a bundle for a newer glibc: exit $(cat "$T/old.rc"): $(cat "$T/old.txt")"
getconf GNU_LIBC_VERSION | sed 's/^glibc //' >"$G/lib/torus/GLIBC"
run_ns good 120
[ "$(cat "$T/good.rc")" = 0 ] || fail "all-pass run exited $(cat "$T/good.rc"): $(cat "$T/good.txt")"
[ -f "$T/good/summary.tsv" ] || fail "no summary.tsv"
n=$(ls "$T/good" | wc -l)
[ "$n" -le 8 ] || fail "$n files in the output folder: $(ls "$T/good")"
rows=$(($(wc -l <"$T/good/summary.tsv") - 1))
[ "$rows" -ge 30 ] || fail "only $rows rows: $(cat "$T/good/summary.tsv")"
bad=$(awk -F'\t' 'NR > 1 && $2 != "PASS" && $2 != "N/A"' "$T/good/summary.tsv")
[ -z "$bad" ] || fail "rows not PASS in the all-pass run: $bad"
[ "$(field good "layers cuda (FP32)" 2)" = PASS ] || fail "layers cuda (FP32) not PASS"
[ "$(field good "resnet50 fp16 b256 graphs off, fusion off" 2)" = PASS ] || fail "the ResNet-50 rows"
tail -n 1 "$T/good.txt" | grep -q "^run-gpu: $rows passed\|^run-gpu: [0-9]* passed, 0 failed" || fail "the last line: $(tail -n 1 "$T/good.txt")"
tail -n $((rows + 2)) "$T/good.txt" | head -n 1 | grep -q '^row  *result  *detail' || fail "the table is not printed last: $(tail -n $((rows + 2)) "$T/good.txt")"
grep -q 'run-gpu: libfake_cudart.so.13 -> .*/cuda/libfake_cudart.so.13' "$T/good.txt" || fail "the library found is not printed"
# A node whose torch sees no GPU compares nothing: the oracle rows fail.
printf '#!/bin/bash\necho "oracle-check: N/A: this PyTorch sees no CUDA device"; exit 3\n' >"$G/share/oracle/oracle-check"
run_ns notorch 120
[ "$(cat "$T/notorch.rc")" = 1 ] || fail "oracle N/A: exit $(cat "$T/notorch.rc"), want 1"
field notorch "oracle cuda resnet50" 2 | grep -qx FAIL && field notorch "oracle cuda resnet50" 3 | grep -q 'sees no CUDA device' ||
    fail "oracle N/A is not a FAIL row: $(grep '^oracle' "$T/notorch/summary.tsv")"

make_bundle broken
t0=$SECONDS
run_ns broken 25
took=$((SECONDS - t0))
[ "$(cat "$T/broken.rc")" = 1 ] || fail "broken run exited $(cat "$T/broken.rc"), want 1: $(cat "$T/broken.txt")"
[ "$took" -le 45 ] || fail "a 25-s budget took $took s"
[ "$(field broken "layers cuda (FP32)" 2)" = PASS ] || fail "a passing row of a failing check is not PASS"
field broken "loss scale cuda-fp16" 2 | grep -qx FAIL && field broken "loss scale cuda-fp16" 3 | grep -q 'SKIP counts as a failure' ||
    fail "a SKIP row is not FAIL: $(field broken "loss scale cuda-fp16" 3)"
field broken "step graphs cuda-fp16" 2 | grep -qx FAIL || fail "an INFO row is not FAIL"
field broken "device vs host cuda-fp16" 3 | grep -q 'cuda_check: exit 1, no result line' ||
    fail "a missing row: $(field broken "device vs host cuda-fp16" 2) $(field broken "device vs host cuda-fp16" 3)"
grep -P '^decode \d+ cores\tFAIL\t.*ran past its time limit' "$T/broken/summary.tsv" >/dev/null ||
    fail "the hanging check: $(grep '^decode' "$T/broken/summary.tsv")"
grep -q 'not run: the 25-s budget was spent' "$T/broken/summary.tsv" || fail "rows after the budget: $(tail -n 3 "$T/broken/summary.tsv")"
[ "$(ls "$T/broken" | wc -l)" -le 8 ] || fail "more than 8 files: $(ls "$T/broken")"
echo "PASS: run-gpu: $rows rows all pass; oracle N/A fails; SKIP, INFO and a missing row fail by name; a 25-s budget ends in $took s; <= 8 files"
