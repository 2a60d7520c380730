#!/bin/bash
# py_install.sh: `pip install ./python` works offline (a copy of the source,
# since pip builds in the folder it is given), and the installed package
# loads the build tree's libtorusdata through TORUS_LIBDIR and reads a
# packed set; with TORUS_LIBDIR pointing nowhere the first use of
# torus.data fails with an ImportError that names the path it tried.
set -u
. "${top_srcdir:?run through make check}/tests/integration/py_lib.sh"
cp -r "$top_srcdir/python" "$tmp/src"
chmod -R u+w "$tmp/src"
"$PY" -m pip install --no-deps --no-index --target "$tmp/site" "$tmp/src" \
    >"$tmp/pip.log" 2>&1 || { echo "FAIL: pip install: $(tail -5 "$tmp/pip.log")"; exit 1; }
[ -f "$tmp/site/torus/data.py" ] || { echo "FAIL: pip installed no torus/data.py"; exit 1; }
py_idx_dataset "$tmp/ds" 40 2 || exit 1
out=$(cd "$tmp" && PYTHONPATH="$tmp/site" "$PY" -c '
import sys, torus, torus.data
assert torus.data.__file__.startswith(sys.argv[2]), torus.data.__file__
ds = torus.data.ShardDataset(sys.argv[1])
print(len(ds), ds.classes[:2])' "$tmp/ds" "$tmp/site" 2>&1) ||
    { echo "FAIL: installed package: $out"; exit 1; }
[ "$out" = "40 ['0', '1']" ] || { echo "FAIL: installed package read: $out"; exit 1; }
echo "ok: pip install ./python; the installed package reads a packed set"
out=$(cd "$tmp" && TORUS_LIBDIR=/nonexistent PYTHONPATH="$tmp/site" "$PY" -c '
import torus.data; torus.data.ShardDataset("x")' 2>&1)
grep -q "ImportError: libtorusdata not found (tried /nonexistent/libtorusdata.so.1)" <<<"$out" ||
    { echo "FAIL: missing library: $out"; exit 1; }
echo "ok: a missing libtorusdata is an ImportError naming the path"
