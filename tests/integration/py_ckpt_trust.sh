#!/bin/bash
# py_ckpt_trust.sh: checkpoints and state dicts are hostile until checked,
# by one validation shared by torus-train (C) and the Python package.
#   1. The same hostile copies of a real cifar-resnet checkpoint (a BN
#      running variance of -1 or NaN; a tensor stored in an external file,
#      a virtual dataset, an external link to a tensor or to a whole group,
#      a gzip filter, a dataset never written, a 2-D tensor, doubles) are
#      refused, each with the same reason, by torus-train --resume, by
#      torus-torch export (exit 1, no traceback, no .pt written, the
#      secret's bytes nowhere) and by torus.checkpoint.load.
#   2. Names: libtorusdata's checkpoint name through torus._lib is the same
#      for "run/", "run" and "run//" and refuses bad run ids; torus-torch
#      import to a folder with or without a trailing slash, and to a
#      missing one ending in '/', writes ckpt-STEP-RUN.h5 (8 hex digits),
#      as torus.checkpoint.save to a new folder does;
#      a missing parent is named, not a temporary file; torus-train
#      --resume --checkpoint-dir DIR/ resumes from the import (not
#      "starting afresh").
#   3. Hostile state dicts for torus-torch import: a TorchScript archive
#      (refused before torch reads it: its __setstate__ never prints), a
#      stride-0 4M-row fc.weight, a 1-D conv1.weight, a negative running
#      variance, a wrapped dict, an int tensor: exit 1, a message naming
#      the file and tensor, no traceback. A FIFO as export's input is
#      refused at once; a FIFO as its output is replaced, not written to.
#   4. tests/fuzz/fuzz_ckpt_py.py: read_checkpoint over fuzz_ckpt.c's corpus
#      and random inputs for 20 s: only ConvertErrors or checked values.
set -u
. "${top_srcdir:?run through make check}/tests/integration/py_lib.sh"
"$PY" -c 'import h5py, numpy' 2>/dev/null ||
    { echo "SKIP: $PY lacks h5py or numpy (tools/install-deps)"; exit 77; }
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
helper=("$PY" "$top_srcdir/tests/integration/py_ckpt_trust.py")
tt=("$PY" "$top_srcdir/tools/torus-torch")
export TORUS_PYTHONPATH=$top_srcdir/python
train=("$top_builddir/trainer/torus-train" --synthetic --dataset-size 32 --epochs 1
       --batch 8 --threads 1 --warmup-epochs 0 --model cifar-resnet --depth 8
       --image-size 12)
"${train[@]}" --max-steps 2 --checkpoint-dir "$tmp/base" >"$tmp/log" 2>&1 ||
    { echo "FAIL: torus-train: $(tail -3 "$tmp/log")"; exit 1; }
ck=$(ls "$tmp"/base/ckpt-2-*.h5) || { echo "FAIL: no checkpoint of step 2"; exit 1; }
name=$(basename "$ck")

# ---- 1. hostile checkpoints, the same files to C and to Python
mkdir "$tmp/h"
"${helper[@]}" craft "$ck" "$tmp/h" || { echo "FAIL: crafting"; exit 1; }
while IFS='|' read -r case reason; do
    d=$tmp/h/$case
    timeout 60 "${train[@]}" --max-steps 3 --checkpoint-dir "$d" --resume \
        >"$d.c.log" 2>&1 && fail "torus-train --resume loaded $case"
    grep -Fq "$name does not load (" "$d.c.log" && grep -Fq "$reason" "$d.c.log" &&
        echo "ok: torus-train refuses $case: $(grep -F "$reason" "$d.c.log" | head -1)" ||
        fail "torus-train, $case: not '$reason': $(head -2 "$d.c.log")"
    timeout 60 "${tt[@]}" export "$d/$name" "$d.pt" --model cifar-resnet >"$d.py.log" 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -Fq "$reason" "$d.py.log" && ! grep -q Traceback "$d.py.log" ||
        fail "torus-torch export, $case: exit $rc, not '$reason': $(tail -2 "$d.py.log")"
    [ -e "$d.pt" ] && fail "torus-torch export wrote $d.pt from $case"
done <"$tmp/h/cases.txt"
grep -rlF "TORUS-SECRET" "$tmp/h"/*.pt "$tmp/h"/*.log 2>/dev/null &&
    fail "a secret's bytes reached an output"
"${helper[@]}" load "$tmp/h" || fail "torus.checkpoint.load (above)"

# ---- 2. names, folders, and a resume from an import
"${helper[@]}" names || fail "checkpoint names through torus._lib (above)"
"${helper[@]}" save "$ck" "$tmp" || fail "torus.checkpoint.save to a folder (above)"
"${tt[@]}" export "$ck" "$tmp/c.pt" --model cifar-resnet >/dev/null || fail "export"
mkdir "$tmp/slash" "$tmp/noslash"
for out in "$tmp/slash/" "$tmp/noslash" "$tmp/missing/"; do
    "${tt[@]}" import "$tmp/c.pt" "$out" --model cifar-resnet --image-size 12 \
        >"$tmp/log" 2>&1 || fail "import to $out: $(tail -2 "$tmp/log")"
    f=$(ls "$out")
    [[ $f =~ ^ckpt-0-[0-9a-f]{8}\.h5$ ]] && echo "ok: import to $out wrote $f" ||
        fail "import to $out wrote '$f'"
done
for out in "$tmp/no/such/" "$tmp/no/x.h5"; do
    "${tt[@]}" import "$tmp/c.pt" "$out" --model cifar-resnet >"$tmp/log" 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -Fq "$out" "$tmp/log" && ! grep -q "torus-torch-.*tmp\|Traceback" "$tmp/log" &&
        echo "ok: import to $out: $(cat "$tmp/log")" ||
        fail "import to $out: exit $rc: $(tail -2 "$tmp/log")"
done
"${tt[@]}" import "$tmp/c.pt" "$tmp/resume/" --model cifar-resnet --image-size 12 \
    --batch-schedule "0:8 over 32 samples per epoch" >/dev/null || fail "import to resume/"
"${train[@]}" --max-steps 1 --checkpoint-dir "$tmp/resume/" --resume >"$tmp/log" 2>&1 ||
    fail "resume from the import: $(tail -2 "$tmp/log")"
grep -q "resumed from $tmp/resume/ckpt-0-[0-9a-f]*\.h5 " "$tmp/log" &&
    ! grep -q "starting afresh" "$tmp/log" && echo "ok: $(grep 'resumed from' "$tmp/log")" ||
    fail "torus-train did not resume from the import: $(grep torus-train: "$tmp/log" | head -3)"

# ---- 3. hostile state dicts, FIFOs
mkdir "$tmp/p"
"${helper[@]}" pt "$ck" "$tmp/p" || fail "making the state dicts (above)"
while IFS='|' read -r case reason; do
    "${tt[@]}" import "$tmp/p/$case.pt" "$tmp/p/$case.h5" --model cifar-resnet \
        >"$tmp/p/$case.log" 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -Fq "$tmp/p/$case.pt" "$tmp/p/$case.log" &&
        grep -Fq "$reason" "$tmp/p/$case.log" && ! grep -q Traceback "$tmp/p/$case.log" &&
        echo "ok: import refuses $case: $(cat "$tmp/p/$case.log")" ||
        fail "import $case: exit $rc, not '$reason': $(tail -2 "$tmp/p/$case.log")"
    grep -q TORUS-TEST-RAN-CODE "$tmp/p/$case.log" && fail "import $case ran the file's code"
done <"$tmp/p/pt-cases.txt"
mkfifo "$tmp/fifo.h5" "$tmp/fifo.pt"
timeout 20 "${tt[@]}" export "$tmp/fifo.h5" "$tmp/f.pt" --model cifar-resnet >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "not a regular file" "$tmp/log" && echo "ok: export of a FIFO: $(cat "$tmp/log")" ||
    fail "export of a FIFO: exit $rc: $(tail -2 "$tmp/log")"
timeout 20 "${tt[@]}" import "$tmp/fifo.pt" "$tmp/f.h5" --model cifar-resnet >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "not a regular file" "$tmp/log" || fail "import of a FIFO: exit $rc: $(tail -2 "$tmp/log")"
timeout 60 "${tt[@]}" export "$ck" "$tmp/fifo.pt" --model cifar-resnet >"$tmp/log" 2>&1 &&
    [ -f "$tmp/fifo.pt" ] && echo "ok: export onto a FIFO replaced it with the file" ||
    fail "export onto a FIFO: $(tail -2 "$tmp/log")"

# ---- 4. the Python reader fuzzed over the C loader's corpus (tests/fuzz/
# corpus-ckpt, its edits plus external, virtual, linked and gzip storage)
# for PY_FUZZ_SECONDS: a ConvertError naming the file, or finite values.
"$PY" "$top_srcdir/tests/fuzz/fuzz_ckpt_py.py" "$ck" "$top_srcdir/tests/fuzz/corpus-ckpt" \
    "${PY_FUZZ_SECONDS:-20}" || fail "fuzz_ckpt_py.py (above)"
[ $fails -eq 0 ] || exit 1
