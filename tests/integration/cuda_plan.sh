#!/bin/bash
# tests/integration/cuda_plan.sh: `torus-train --dry-run` with a cuda
# backend prints the cuda backend's plan with no GPU, no driver and no
# module loaded (the host-C decisions of trainer/backends/cuda/cuda_fuse.c,
# built into torus-train): the totals for ResNet-50 and ResNet-18 in
# cuda-fp16 (every BN through cuDNN's Ex calls, no separate activation
# pass; the stem's input padded to 4 channels), one line per BN and
# convolution, the switches TCUDA_BN_EX=0, TCUDA_FUSE=0 and
# TCUDA_PAD_STEM=0 as the plan counts them, FP32 "cuda" on the legacy
# calls and unpadded, convolution algorithms tuned (TCUDA_TUNE=0:
# heuristic), and nothing for dnnl.
set -u
B=${top_builddir:?run from make check}
fail() { echo "FAIL: $*"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cuda_plan.XXXXXX")
trap 'rm -rf "$T"' EXIT

# plan MODEL BACKEND [VAR=VALUE...]: the dry run's output in $T/out, with
# no module in the folders searched (nothing may need one).
plan() {
    local m=$1 b=$2
    shift 2
    env -u TCUDA_BN_EX -u TCUDA_FUSE -u TCUDA_PAD_STEM -u TCUDA_TUNE "$@" TORUS_BACKEND_PATH="$T/none" \
        "$B/trainer/torus-train" --synthetic --model "$m" --backend "$b" \
        --dry-run >"$T/out" 2>&1 || fail "--dry-run --model $m --backend $b $*: $(cat "$T/out")"
}
want() { # the total line's text
    grep -q "^cuda plan .*$1" "$T/out" || fail "$2: no '$1' in: $(grep '^cuda plan' "$T/out")"
}

plan resnet50 cuda-fp16
want 'BN fused 53/53, separate activation passes 0;' "ResNet-50 cuda-fp16"
want 'conv algorithms tuned 53/53' "ResNet-50 cuda-fp16"
[ "$(grep -c ' bn    Ex spatial-persistent, ops ' "$T/out")" = 53 ] || fail "ResNet-50: not 53 Ex BN lines"
[ "$(grep -c ' ops BN_ADD_ACTIVATION' "$T/out")" = 16 ] || fail "ResNet-50: not 16 BN_ADD_ACTIVATION"
[ "$(grep -c ' ops BN_ACTIVATION$' "$T/out")" = 33 ] || fail "ResNet-50: not 33 BN_ACTIVATION"
[ "$(grep -c ' conv  algorithms tuned' "$T/out")" = 53 ] || fail "ResNet-50: not 53 conv lines"
grep -q '^  conv1  *conv  algorithms tuned; input padded from 3 to 4 channels' "$T/out" ||
    fail "ResNet-50: the stem is not padded"
want 'stem input channels 4$' "ResNet-50 cuda-fp16"
grep -q '^  layer1.0.add  *add   runs in layer1.0.bn3' "$T/out" || fail "ResNet-50: layer1.0.add not in bn3's call"
echo "ResNet-50 cuda-fp16: $(grep '^cuda plan *BN' "$T/out")"

plan resnet18 cuda-fp16
want 'BN fused 20/20, separate activation passes 0;' "ResNet-18 cuda-fp16"
plan resnet50 cuda-fp16 TCUDA_BN_EX=0
want 'BN fused 16/53, separate activation passes 33;' "ResNet-50 TCUDA_BN_EX=0"
grep -q 'TCUDA_BN_EX=0 TCUDA_FUSE=1' "$T/out" || fail "the switches not shown"
plan resnet50 cuda-fp16 TCUDA_TUNE=0
want 'conv algorithms heuristic 53/53' "ResNet-50 TCUDA_TUNE=0"
plan resnet50 cuda-fp16 TCUDA_PAD_STEM=0
want 'BN fused 53/53, .*stem input channels 3$' "ResNet-50 TCUDA_PAD_STEM=0"
plan resnet50 cuda-fp16 TCUDA_BN_EX=0 TCUDA_FUSE=0
want 'BN fused 0/53, separate activation passes 33;' "ResNet-50 TCUDA_BN_EX=0 TCUDA_FUSE=0"
plan resnet50 cuda
want 'BN fused 0/53, separate activation passes 33;.*stem input channels 3$' "ResNet-50 cuda (fp32)"
plan resnet50 dnnl
grep -q '^cuda plan' "$T/out" && fail "a cuda plan for --backend dnnl"
echo PASS
