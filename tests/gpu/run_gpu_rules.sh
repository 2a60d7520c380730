#!/bin/bash
# tests/gpu/run_gpu_rules.sh: run-gpu's plan and row rules, without a GPU
# and without running any check: run-gpu is sourced in its library mode
# (RUN_GPU_LIB=1) and its rules are applied to row outputs in
# tests/gpu/fixtures/ (torus-train's A/B output with its fastpath: line,
# cuda_check's rows, torus-data-bench's train row), in the formats the
# programs print. Asserts that
#   - the step limits add up to no more than the default budget (540 s),
#     and, scaled, to no more than a smaller --limit; --limits prints them;
#   - a reserved step (the oracle rows, the PyTorch peer) gets its whole
#     limit even when every step before it ran to its own limit and the
#     run lost time between steps: a starved peer row cannot happen;
#   - an A/B row whose fast-path counter is zero is FAIL (graph replays,
#     BN Ex calls, tuned or cached algorithms), as is a fallback (BN,
#     heuristic algorithms with tuning on), a switched-off path that ran,
#     a row that tuned again after the tune cache was written, a missing
#     counter or fastpath line, a run off the 8-bit input path, a crash;
#     the all-on, cached and switched-off rows PASS with their numbers;
#   - SKIP, INFO, FAIL and missing rows of a check are FAIL, by name.
set -u
S=${top_srcdir:?run from make check}
F=$S/tests/gpu/fixtures
fail() { echo "FAIL: $*"; exit 1; }

# The plan and its budget.
RUN_GPU_LIB=1 . "$S/tests/gpu/run-gpu" || fail "run-gpu does not source in library mode"
[ "$DEFAULT_BUDGET" = 540 ] || fail "the default budget is $DEFAULT_BUDGET s, want 540"
sum=$(_plan_sum)
[ "$sum" -le "$DEFAULT_BUDGET" ] || fail "the step limits add up to $sum s, over the $DEFAULT_BUDGET-s budget"
for b in 540 300 120; do
    tot=$("$S/tests/gpu/run-gpu" --limit $b --limits | awk '$1 == "total" { print $2 }')
    [ -n "$tot" ] && [ "$tot" -le $b ] || fail "--limit $b: the limits add up to '$tot'"
done
"$S/tests/gpu/run-gpu" --limits | grep -q '^peer [0-9]* reserved$' || fail "the peer step is not reserved"
# Order: correctness (the checks, then the oracle), then throughput, the
# peer last of all.
order=" ${STEPS[*]} "
[[ $order =~ \ versions\ cuda_check\ .*\ oracle4\ ab_on\ .*\ decode\ peer\ $ ]] || fail "step order: $order"

# The worst case for the reserved steps: each step before them runs to the
# limit it is given, and 3 s are lost after each (1 s after one not run).
t=0
for k in "${STEPS[@]}"; do
    lim=$(_step_limit "$k" $t)
    if [ -n "${RESERVED[$k]:-}" ] && [ "$lim" != "${LIMIT[$k]}" ]; then
        fail "reserved step $k gets $lim s of its ${LIMIT[$k]} after $t s"
    fi
    if [ "$lim" -ge 5 ]; then t=$((t + lim + 3)); else t=$((t + 1)); fi
done
[ $t -le $((budget + 3)) ] || fail "the simulated run took $t s"
# A budget already spent: a non-reserved step is not run, the peer still is.
T0=$((SECONDS - 530)) scratch=$(mktemp) log=$(mktemp)
trap 'rm -f "$scratch" "$log"' EXIT
_run ab_vec "$log" echo ran
[ "$RC" = 125 ] || fail "a throughput step ran with 10 s left (rc $RC)"
_run peer "$log" echo ran
[ "$RC" = 0 ] && [ "$LAST" = ran ] || fail "the peer did not run with 10 s left (rc $RC)"

# The A/B rules on recorded outputs: verdict FILE OFF TUNED_BEFORE
verdict() {
    LAST=$(cat "$F/$1") RC=${4:-0}
    _ab_verdict "$2" "$3"
}
want() { # result detail-regex FILE OFF TUNED_BEFORE [RC]
    local res=$1 re=$2
    shift 2
    verdict "$@"
    [ "$V_RES" = "$res" ] && grep -qE -- "$re" <<<"$V_DETAIL" ||
        fail "$1 (off '${2}', tuned before $3): $V_RES '$V_DETAIL', want $res /$re/"
}
want PASS '^2544\.8 img/s, peak device memory 31542 MB; graph_capture=1 graph_replay=18 bn_ex=106' ab_on_tuned.txt "" 0
[ "$V_IPS" = 2544.8 ] || fail "img/s of the all-on row: '$V_IPS'"
want PASS 'conv_cached=63' ab_on_cached.txt "" 1
want FAIL 'conv_tuned=63: the tune cache was not reused' ab_on_tuned.txt "" 1
want PASS 'graph_capture=0' ab_graph_off.txt TCUDA_GRAPH 1
want FAIL 'graph_capture=0; graph_replay=0' ab_graph_off.txt "" 1
want FAIL 'TCUDA_GRAPH=0 but graphs ran' ab_on_cached.txt TCUDA_GRAPH 1
want FAIL '^2544\.8 img/s, but graph_replay=0 \(fastpath:' ab_replay_zero.txt "" 0
want FAIL 'bn_ex=0' ab_bn_ex_zero.txt "" 0
want FAIL 'bn_ex=0' ab_bn_ex_zero.txt TCUDA_GRAPH 0
want PASS 'bn_ex=0' ab_bn_ex_zero.txt TCUDA_BN_EX 0
want FAIL 'bn_fallback=32 \(cuDNN declined' ab_bn_fallback.txt "" 0
want PASS 'conv_heuristic=63' ab_tune_off.txt TCUDA_TUNE 1
want FAIL 'conv_tuned=0 conv_cached=0' ab_tune_off.txt "" 0
want FAIL 'TCUDA_TUNE=0 but algorithms were tuned or cached' ab_on_cached.txt TCUDA_TUNE 1
want FAIL 'conv_heuristic=3 \(tuning fell back\)' ab_tune_fellback.txt "" 0
want FAIL 'printed no fastpath: line' ab_no_fastpath.txt "" 0
want FAIL 'has no conv_cached' ab_counter_missing.txt "" 0
want FAIL 'not through the 8-bit device input path' ab_not_u8.txt "" 0
want FAIL 'CUDNN_STATUS_EXECUTION_FAILED .*exit 1, no result line' ab_crashed.txt "" 0 1
want FAIL 'ran past its time limit' ab_on_tuned.txt "" 0 124
for s in ab_on_tuned.txt ab_graph_off.txt ab_tune_off.txt; do
    [ -n "$(_counter graph_replay "$(grep '^fastpath' "$F/$s")")" ] || fail "_counter on $s"
done
[ -z "$(_counter graph_replay "fastpath: graph_capture=1 graph_replay=x bn_ex=1")" ] ||
    fail "a counter that is not a number was read"

# A check's rows by name: SKIP, INFO, FAIL and a missing row are FAIL.
NAMES=() RESULTS=() DETAILS=()
LAST=$(cat "$F/cuda_check.txt") RC=1
_rows_from cuda_check "layers cuda (FP32)" "loss scale cuda-fp16" "step graphs cuda-fp16" \
    "device step cuda-fp16" "device vs host cuda-fp16"
r="${RESULTS[*]}"
[ "$r" = "PASS FAIL FAIL FAIL FAIL" ] || fail "cuda_check rows: $r"
grep -q 'SKIP counts as a failure here: no fp16' <<<"${DETAILS[1]}" || fail "SKIP row: ${DETAILS[1]}"
grep -q 'INFO counts as a failure here' <<<"${DETAILS[2]}" || fail "INFO row: ${DETAILS[2]}"
[ "${DETAILS[4]}" = "cuda_check: exit 1, no result line" ] || fail "missing row: ${DETAILS[4]}"

# The decode row reads the train-mode rate.
rate=$(awk '$1 == "train" && $3 ~ /^[0-9.]+$/ { r = $3 } END { print r }' "$F/decode_train.txt")
[ "$rate" = 5123.4 ] || fail "decode train rate '$rate'"
grep -q 'torus-data-bench" -m train' "$S/tests/gpu/run-gpu" || fail "the decode row does not run the train mode"
echo "PASS: run-gpu rules: limits $sum s <= $DEFAULT_BUDGET s (and scaled), reserved steps never starved, A/B counter rules and check rows on $(ls "$F" | wc -l) recorded outputs"
