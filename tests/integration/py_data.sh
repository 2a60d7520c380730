#!/bin/bash
# py_data.sh: torus.data (the Python package's loader over libtorusdata)
# on a packed set of 256 random images in 3 shards; the checks are in
# py_data.py: 4 rank configurations see every sample exactly once per
# epoch, labels and pixels equal data_dump's, the order is libtdata's
# permutation, same seed same batches, a resumed loader gives the same next
# batch, a corrupt sample is logged as torus-train logs it, and a shard the
# C reader refuses raises TorusDataError with the C message. py_env.py:
# torus.env's rank, world size and grid, malformed values named.
set -u
. "${top_srcdir:?run through make check}/tests/integration/py_lib.sh"
py_idx_dataset "$tmp/ds" 256 3 || exit 1
"$top_builddir/tests/integration/data_dump" "$tmp/ds/train-index.txt" ids "$tmp/dump" ||
    { echo "FAIL: data_dump"; exit 1; }
"$PY" "$top_srcdir/tests/integration/py_env.py" || exit 1
"$PY" "$top_srcdir/tests/integration/py_data.py" "$tmp/ds" "$tmp/dump" \
    "$top_builddir/tests/integration/data_dump"
