#!/bin/bash
# py_data.sh: torus.data (the Python package's loader over libtorusdata)
# on a packed set of 256 random images in 3 shards; the checks are in
# py_data.py: 4 rank configurations see every sample exactly once per
# epoch, labels and pixels equal data_dump's, the order is libtdata's
# permutation, same seed same batches, a resumed loader gives the same next
# batch, a corrupt sample is logged as torus-train logs it, and a shard the
# C reader refuses raises TorusDataError with the C message; libtorusdata
# loads after another libjpeg.so.62 (a wheel's) was loaded first;
# drop_last means PyTorch's (eval's partial batch left out only under
# drop_last=True; train=True refuses drop_last=False), and a negative
# epoch, step, seed or size is a ValueError before C sees it. py_env.py:
# torus.env's rank, world size and grid, malformed values named.
set -u
. "${top_srcdir:?run through make check}/tests/integration/py_lib.sh"
py_idx_dataset "$tmp/ds" 256 3 || exit 1
"$top_builddir/tests/integration/data_dump" "$tmp/ds/train-index.txt" ids "$tmp/dump" ||
    { echo "FAIL: data_dump"; exit 1; }
"$PY" "$top_srcdir/tests/integration/py_env.py" || exit 1
"$PY" "$top_srcdir/tests/integration/py_data.py" "$tmp/ds" "$tmp/dump" \
    "$top_builddir/tests/integration/data_dump"
rc=$?
[ $rc = 0 ] || exit $rc

# A wheel's libjpeg loaded first under the system's soname (torchvision
# 0.20 bundles one without jpeg_crop_scanline): here a stand-in with that
# soname and those symbol versions and two functions. Loaded alone after it,
# libtorusdata fails (the clash is real); torus._lib loads it all the same.
cat >"$tmp/jpeg.c" <<'C'
void jpeg_std_error(void) {}
void jpeg_mem_src(void) {}
C
printf '%s\n' 'LIBJPEG_6.2 { global: jpeg_std_error; local: *; };' \
    'LIBJPEGTURBO_6.2 { global: jpeg_mem_src; } LIBJPEG_6.2;' >"$tmp/jpeg.map"
${CC:-cc} -shared -fPIC -o "$tmp/libjpeg.so.62" -Wl,-soname,libjpeg.so.62 \
    -Wl,--version-script="$tmp/jpeg.map" "$tmp/jpeg.c" || { echo "FAIL: cc"; exit 1; }
"$PY" - "$tmp/libjpeg.so.62" "$top_builddir/data/.libs/libtorusdata.so.1" <<'PY' || exit 1
import ctypes, subprocess, sys
stub, lib = sys.argv[1:]
alone = "import ctypes, sys; ctypes.CDLL(sys.argv[1]); ctypes.CDLL(sys.argv[2])"
r = subprocess.run([sys.executable, "-c", alone, stub, lib], capture_output=True, text=True)
if r.returncode == 0 or "jpeg" not in r.stderr:
    sys.exit(f"FAIL: libtorusdata loaded after the stand-in without help: {r.stderr[-300:]}")
ctypes.CDLL(stub)
import torus._lib as L
L.lib()
if L._mapped_jpegs() - {__import__("os").path.realpath(stub)} == set():
    sys.exit("FAIL: the system's libjpeg was not loaded")
print("PASS: libtorusdata loads after a foreign libjpeg.so.62 (the system's ahead of it)")
PY
