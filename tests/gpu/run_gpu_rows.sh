#!/bin/bash
# tests/gpu/run_gpu_rows.sh: run-gpu end to end without a GPU: a bundle
# whose checks are scripts printing what the real checks print, with the
# real bin/gpu_count and a stand-in driver (tests/gpu/fakecuda.la as
# libcuda.so.1) that counts one device, or fails as a broken driver does.
# Asserts that
#   - "no GPU" is the driver's word, not /dev/nvidia0's: with no driver
#     library, a cuInit that fails (CUDA_ERROR_NO_DEVICE) or 0 devices,
#     run-gpu prints one line naming why and exits 3, running nothing;
#   - with every check passing it exits 0 and every row is PASS (the peer
#     through a python3 with "torch"), the library lines name the files
#     the check reported loaded, not the search path's, the A/B rows carry
#     img/s, peak memory and the ratio to the all-on row, the first row
#     tunes into the tune cache and the later ones read it;
#   - with no torch with CUDA (this machine's python3) the peer is N/A and
#     the exit status still 0; an oracle that compares nothing is FAIL;
#   - rows are found by name: a SKIP row and an INFO row are FAIL, a row
#     the check did not print is FAIL naming the check's exit status;
#     an A/B row whose counter says its fast path did not run is FAIL;
#   - the budget holds and the reserved rows are not starved: with checks
#     that hang, the run ends within the budget plus a few seconds, the
#     hanging rows say they ran past their limit, and the oracle and the
#     peer rows still PASS;
#   - a bundle that needs a newer glibc than the node's says so, exit 1;
#   - at most 8 files are written, summary.tsv among them, with one line
#     per row; the table is printed last; a bad option exits 2.
set -u
S=${top_srcdir:?run from make check}
BD=${top_builddir:?run from make check}
fail() { echo "FAIL: $*"; exit 1; }
[ -x "$BD/tests/gpu/gpu_count" ] || fail "no $BD/tests/gpu/gpu_count (make check builds it)"
[ -f "$BD/tests/gpu/.libs/fakecuda.so" ] || fail "no $BD/tests/gpu/.libs/fakecuda.so (make check builds it)"
T=$(mktemp -d "${TMPDIR:-/tmp}/run_gpu_rows.XXXXXX")
trap 'rm -rf "$T"' EXIT
G=$T/bundle
mkdir -p "$G/bin" "$G/lib/torus" "$G/share/sample" "$G/share/oracle" "$T/cuda" "$T/drv" "$T/py"
cp "$S/tests/gpu/run-gpu" "$G/run-gpu"
cp "$BD/tests/gpu/gpu_count" "$G/bin/gpu_count"
cp "$BD/tests/gpu/.libs/fakecuda.so" "$T/drv/libcuda.so.1"
echo "libfake_cudart.so.13" >"$G/lib/torus/NEEDED"
: >"$T/cuda/libfake_cudart.so.13"
getconf GNU_LIBC_VERSION | sed 's/^glibc //' >"$G/lib/torus/GLIBC"
prog() { printf '#!/bin/bash\n%s\n' "$2" >"$G/bin/$1"; chmod +x "$G/bin/$1"; }
row() { printf '%-28s %s  %s' "$1" "$2" "$3"; }
# A python3 with "torch": the probes pass, the peer prints its line, the
# oracle-check script runs as it would under python.
printf '#!/bin/bash\ncase ${1:-} in -c) exit 0 ;; -) cat >/dev/null; echo "peer 2000.0 img/s peak 20000 MB torch 9.9" ;; *) exec bash "$@" ;; esac\n' >"$T/py/python3"
chmod +x "$T/py/python3"
CC_ROWS=("layers cuda (FP32)" "layers cuda-fp16" "8-bit input cuda (FP32)" "8-bit input cuda-fp16"
    "loss scale cuda (FP32)" "loss scale cuda-fp16" "step graphs cuda (FP32)" "step graphs cuda-fp16"
    "device step cuda (FP32)" "device vs host cuda (FP32)" "device step cuda-fp16"
    "device vs host cuda-fp16" "tiny-cnn 50 steps FP32")
# The stand-in torus-train: the counters follow the switches; conv
# algorithms are tuned (and the tune cache written) unless the cache
# exists or TCUDA_TUNE=0. broken: the graph counters stay 0.
train_prog() { # good | broken | hang
    local graphs='g=1; r=18; [ "${TCUDA_GRAPH:-}" = 0 ] && g=0 r=0'
    [ "$1" = broken ] && graphs='g=1; r=0; [ "${TCUDA_GRAPH:-}" = 0 ] && g=0'
    prog torus-train 'case "$*" in
*tiny-cnn*) echo "torus-train: tiny-cnn, backend cuda"; echo "done: global step 50"; exit 0 ;;
esac
'"$([ "$1" = hang ] && echo '[ -z "${TCUDA_GRAPH:-}${TCUDA_FUSE:-}${TCUDA_BN_EX:-}${TCUDA_TUNE:-}${TCUDA_PAD_STEM:-}${TCUDA_VEC:-}" ] && sleep 1000')"'
while [ $# -gt 0 ]; do [ "$1" = --tune-cache ] && cache=$2; shift; done
'"$graphs"'
t=0 c=0 h=0
if [ "${TCUDA_TUNE:-}" = 0 ]; then h=63; elif [ -e "$cache" ]; then c=63; else t=63; : >"$cache"; fi
ips=2500.0; [ -n "${TCUDA_GRAPH:-}${TCUDA_FUSE:-}${TCUDA_BN_EX:-}${TCUDA_TUNE:-}" ] && ips=2000.0
echo "torus-train: 8-bit input batches, normalised and mirrored on the device (the next batch copied during the step)"
echo "epoch 0 step 20/20 | $ips img/s | loss 6.9"
echo "peak device memory 30123 MB in use on GPU 0 (x)"
echo "fastpath: graph_capture=$g graph_replay=$r bn_ex=106 bn_fallback=0 conv_tuned=$t conv_cached=$c conv_heuristic=$h"'
}
make_bundle() { # good | broken | hang
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
    prog cuda_check '[ "${1:-}" = --versions ] && { echo "driver CUDA 13.0; cudart 13.0 /x/libcudart.so.13"; echo "loaded: /loaded/libcudart.so.13.0.48"; echo "loaded: /loaded/libcudnn.so.9.19.0"; exit 0; }
'"$([ "$1" = hang ] && echo 'sleep 1000')"'
echo case lines
'"$cc"'exit '"$([ "$1" = broken ] && echo 1 || echo 0)"
    prog optim_check "echo '$(row "LARS/SGD kernel vs host" PASS x)'; echo '$(row "fp16 working copy rounding" PASS x)'; echo '$(row "device step vs eager kernels" PASS x)'"
    prog gpu_smoke "for r in device 'wire fp16 pack/unpack' 'wire bf16 pack/unpack' 'wire fp32 pack/unpack' 'cuBLAS SGEMM' 'cuDNN conv fwd' 'NCCL fp16 premul-sum x3'; do printf '%-28s %-6s %s\n' \"\$r\" PASS ok; done"
    prog test_comm_gpu "echo '100%: Checks: 3, Failures: 0, Errors: 0'"
    prog comm_nccl_check "echo 'one process: every algorithm ran as NCCL collectives on 1-rank communicators'; echo PASS"
    train_prog "$1"
    prog torus-data-bench 'case "$*" in *"-m train"*) printf "train %s 1234.5 99 1300\n" 16 ;; *) echo "not the train mode: $*"; exit 1 ;; esac'
    printf '#!/bin/bash\necho "ROW logits PASS 1e-6 1e-4"; echo "ROW grads PASS 2e-6 1e-4"\n' >"$G/share/oracle/oracle-check"
    chmod +x "$G/share/oracle/oracle-check"
}
# run-gpu with the stand-in driver ($3...: env settings), path $2 first.
run_gpu() { # out-dir limit [VAR=value...]
    local name=$1 lim=$2
    shift 2
    env PATH="$T/py:$PATH" LD_LIBRARY_PATH="$T/cuda:$T/drv" FAKE_CUDA_COUNT=1 "$@" \
        "$G/run-gpu" --out "$T/$name" --limit "$lim" >"$T/$name.txt" 2>&1
    echo $? >"$T/$name.rc"
}
field() { awk -F'\t' -v r="$2" '$1 == r { print $'"$3"' }' "$T/$1/summary.tsv"; }

"$G/run-gpu" --bogus >/dev/null 2>&1
[ $? = 2 ] || fail "run-gpu --bogus: want exit 2"
make_bundle good

# No GPU: the driver's answer, whatever /dev holds.
no_gpu() { # name want-regex [VAR=value...]
    local name=$1 re=$2
    shift 2
    run_gpu "$name" 540 "$@"
    [ "$(cat "$T/$name.rc")" = 3 ] && [ "$(wc -l <"$T/$name.txt")" = 1 ] &&
        grep -Eq "^run-gpu: no GPU: $re: nothing was checked$" "$T/$name.txt" && [ ! -e "$T/$name" ] ||
        fail "$name: exit $(cat "$T/$name.rc"), want 3 and one line /$re/: $(cat "$T/$name.txt")"
}
no_gpu init 'the NVIDIA driver \(.*libcuda\.so\.1\) cannot be initialised: cuInit: CUDA_ERROR_NO_DEVICE \(100\): no CUDA-capable device is detected' FAKE_CUDA_INIT=100
no_gpu zero 'the NVIDIA driver \(.*libcuda\.so\.1\) counts 0 devices' FAKE_CUDA_COUNT=0
mv "$T/drv/libcuda.so.1" "$T/drv/hidden"
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    no_gpu nodrv 'the NVIDIA driver library libcuda\.so\.1 cannot be loaded .*'
fi
mv "$T/drv/hidden" "$T/drv/libcuda.so.1"

echo 9.99 >"$G/lib/torus/GLIBC"
run_gpu old 540
[ "$(cat "$T/old.rc")" = 1 ] && grep -q 'needs glibc 9.99 or newer; this node has glibc 2\.' "$T/old.txt" ||
    fail "a bundle for a newer glibc: exit $(cat "$T/old.rc"): $(cat "$T/old.txt")"
getconf GNU_LIBC_VERSION | sed 's/^glibc //' >"$G/lib/torus/GLIBC"

run_gpu good 540
[ "$(cat "$T/good.rc")" = 0 ] || fail "all-pass run exited $(cat "$T/good.rc"): $(cat "$T/good.txt")"
[ -f "$T/good/summary.tsv" ] || fail "no summary.tsv"
n=$(ls "$T/good" | wc -l)
[ "$n" -le 8 ] || fail "$n files in the output folder: $(ls "$T/good")"
rows=$(($(wc -l <"$T/good/summary.tsv") - 1))
[ "$rows" -ge 40 ] || fail "only $rows rows: $(cat "$T/good/summary.tsv")"
bad=$(awk -F'\t' 'NR > 1 && $2 != "PASS"' "$T/good/summary.tsv")
[ -z "$bad" ] || fail "rows not PASS in the all-pass run: $bad"
field good "resnet50 fp16 b256 all fast paths on" 3 | grep -q '^2500.0 img/s, peak device memory 30123 MB; .*conv_tuned=63 conv_cached=0' ||
    fail "the all-on row: $(field good "resnet50 fp16 b256 all fast paths on" 3)"
for sw in TCUDA_GRAPH TCUDA_FUSE TCUDA_BN_EX TCUDA_TUNE TCUDA_PAD_STEM TCUDA_VEC; do
    d=$(field good "resnet50 fp16 b256 $sw=0" 3)
    grep -q 'x of all-on; .* img/s, peak device memory 30123 MB' <<<"$d" || fail "the $sw=0 row: $d"
done
field good "resnet50 fp16 b256 TCUDA_GRAPH=0" 3 | grep -q '^0.80x of all-on; .*conv_cached=63' || fail "the cache is not reused: $(field good "resnet50 fp16 b256 TCUDA_GRAPH=0" 3)"
field good "peer torchvision resnet50 AMP" 3 | grep -q '2000.0 img/s .*torus/PyTorch 1.25' || fail "the peer row: $(field good "peer torchvision resnet50 AMP" 3)"
field good "decode train 16 cores" 2 >/dev/null
grep -qP '^decode train \d+ cores\tPASS\t1234.5 img/s' "$T/good/summary.tsv" || fail "the decode row: $(grep '^decode' "$T/good/summary.tsv")"
tail -n 1 "$T/good.txt" | grep -q "^run-gpu: $rows passed, 0 failed, 0 n/a" || fail "the last line: $(tail -n 1 "$T/good.txt")"
tail -n $((rows + 2)) "$T/good.txt" | head -n 1 | grep -q '^row  *result  *detail' || fail "the table is not printed last: $(tail -n $((rows + 2)) "$T/good.txt")"
grep -q '^run-gpu: 1 GPU(s): .*/drv/libcuda.so.1$' "$T/good.txt" || fail "the device line: $(head -n 3 "$T/good.txt")"
grep -q '^run-gpu: loaded /loaded/libcudnn.so.9.19.0$' "$T/good.txt" || fail "the loaded libraries are not printed: $(head -n 5 "$T/good.txt")"
! grep -q "^run-gpu: .*$T/cuda/libfake_cudart" "$T/good.txt" || fail "a library line names the search path's file"

# No torch with CUDA (this machine's python3): the peer is N/A and the
# exit status 0; an oracle that compares nothing is FAIL.
mv "$T/py/python3" "$T/py/hidden"
run_gpu notorch 540
field notorch "peer torchvision resnet50 AMP" 2 | grep -qx 'N/A' || fail "the peer without torch: $(grep '^peer' "$T/notorch/summary.tsv")"
[ "$(cat "$T/notorch.rc")" = 0 ] || fail "every row PASS but the peer N/A: exit $(cat "$T/notorch.rc"), want 0: $(cat "$T/notorch.txt")"
printf '#!/bin/bash\necho "oracle-check: N/A: this PyTorch sees no CUDA device"; exit 3\n' >"$G/share/oracle/oracle-check"
run_gpu noracle 540
mv "$T/py/hidden" "$T/py/python3"
[ "$(cat "$T/noracle.rc")" = 1 ] || fail "oracle N/A: exit $(cat "$T/noracle.rc"), want 1"
field noracle "oracle cuda resnet50" 2 | grep -qx FAIL && field noracle "oracle cuda resnet50" 3 | grep -q 'sees no CUDA device' ||
    fail "oracle N/A is not a FAIL row: $(grep '^oracle' "$T/noracle/summary.tsv")"

make_bundle broken
run_gpu broken 540
[ "$(cat "$T/broken.rc")" = 1 ] || fail "broken run exited $(cat "$T/broken.rc"), want 1: $(cat "$T/broken.txt")"
[ "$(field broken "layers cuda (FP32)" 2)" = PASS ] || fail "a passing row of a failing check is not PASS"
field broken "loss scale cuda-fp16" 2 | grep -qx FAIL && field broken "loss scale cuda-fp16" 3 | grep -q 'SKIP counts as a failure' ||
    fail "a SKIP row is not FAIL: $(field broken "loss scale cuda-fp16" 3)"
field broken "step graphs cuda-fp16" 2 | grep -qx FAIL || fail "an INFO row is not FAIL"
field broken "device vs host cuda-fp16" 3 | grep -q 'cuda_check: exit 1, no result line' ||
    fail "a missing row: $(field broken "device vs host cuda-fp16" 2) $(field broken "device vs host cuda-fp16" 3)"
field broken "resnet50 fp16 b256 all fast paths on" 2 | grep -qx FAIL && field broken "resnet50 fp16 b256 all fast paths on" 3 | grep -q 'but graph_replay=0' ||
    fail "a zero counter is not FAIL: $(field broken "resnet50 fp16 b256 all fast paths on" 3)"
[ "$(field broken "resnet50 fp16 b256 TCUDA_GRAPH=0" 2)" = PASS ] || fail "the graphs-off row of the broken run"

# Hanging checks under a 150-s budget: cuda_check and the all-on row run
# to their limits; the reserved rows still run.
make_bundle hang
t0=$SECONDS
run_gpu hang 150
took=$((SECONDS - t0))
[ "$(cat "$T/hang.rc")" = 1 ] || fail "the hanging run exited $(cat "$T/hang.rc"), want 1: $(cat "$T/hang.txt")"
[ "$took" -le 160 ] || fail "a 150-s budget took $took s"
field hang "layers cuda (FP32)" 3 | grep -q 'ran past its time limit' || fail "the hanging check: $(field hang "layers cuda (FP32)" 3)"
field hang "resnet50 fp16 b256 all fast paths on" 3 | grep -q 'ran past its time limit' || fail "the hanging A/B row: $(field hang "resnet50 fp16 b256 all fast paths on" 3)"
for r in "oracle cuda resnet50 logits" "oracle cuda-fp16 cifar-resnet8 grads" "peer torchvision resnet50 AMP"; do
    [ "$(field hang "$r" 2)" = PASS ] || fail "reserved row '$r' starved: $(field hang "$r" 2) $(field hang "$r" 3)"
done
[ "$(ls "$T/hang" | wc -l)" -le 8 ] || fail "more than 8 files: $(ls "$T/hang")"
echo "PASS: run-gpu: no GPU (3 driver cases) exits 3 in one line; $rows rows all pass; peer N/A keeps exit 0; SKIP, INFO, a missing row and a zero counter fail; a 150-s budget with hanging checks ends in $took s with the oracle and peer rows run; <= 8 files"
