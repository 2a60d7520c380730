#!/bin/bash
# py_train.sh: training with torus.data and torus_allreduce_hook reaches the
# accuracy of DDP's default all-reduce. The real Fashion-MNIST (Debian's
# dataset-fashion-mnist, 60,000 training and 10,000 test images) is packed
# with torus-pack; `srun --mpi=pmix --torus=auto -N2 -n4 py_train.py` on
# the local Slurm cluster trains a small CNN for 2 full epochs twice from
# the same seed, on the same loader batches: DDP's default all-reduce
# (gloo), and the torus hook (fp16 wire) on the plugin's 2x2 grid. The
# final test accuracies must agree within 0.5 points; py_train.py lists
# its other checks (first losses, weights equal on every rank, the hook on
# every bucket).
set -u
. "${top_srcdir:?run through make check}/tests/integration/py_lib.sh"
. "$top_srcdir/tests/cluster/testlib.sh"
FM=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$FM/train-images-idx3-ubyte.gz" ] && [ -f "$FM/t10k-images-idx3-ubyte.gz" ] ||
    tl_skip "Fashion-MNIST not found in $FM (Debian package dataset-fashion-mnist)"
plugin=$top_builddir/plugins/.libs/spank_torus.so
[ -f "$plugin" ] || tl_fail "$plugin is not built"
pack=$top_builddir/data/torus-pack
"$pack" --no-progress -o "$tmp/fm" "$FM/train-images-idx3-ubyte.gz" >"$tmp/pack.log" 2>&1 &&
    "$pack" --no-progress -o "$tmp/fm" -s test "$FM/t10k-images-idx3-ubyte.gz" >>"$tmp/pack.log" 2>&1 ||
    tl_fail "torus-pack of $FM: $(tail -3 "$tmp/pack.log")"
tl_cluster_up --nodes 2 --leaves 1 --plugin "$plugin"
# tl_cluster_up's trap replaced py_lib.sh's: remove $tmp too.
trap 'rc=$?; rm -rf "$tmp"; (exit $rc); tl_cluster_down' EXIT
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start=$(date +%s)
out=$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo TL_SRUN_TIMEOUT=900 \
    tl_srun_mpi --mpi=pmix --torus=auto -N2 -n4 "$PY" "$top_srcdir/tests/integration/py_train.py" \
    --data "$tmp/fm" --epochs 2)
rc=$?
printf '%s\n' "$out"
echo "srun took $(($(date +%s) - start)) s"
[ $rc = 0 ] || tl_fail "srun -N2 -n4 py_train.py: exit $rc"
grep -q 'grid TorusGrid(2x2, row 0, col 0, from TORUS_\*)' <<<"$out" ||
    tl_fail "the grid did not come from the plugin's TORUS_* as 2x2"
grep -q '^result: test accuracy ddp .* over 10000 test images; 468 steps' <<<"$out" ||
    tl_fail "no result line for 2 epochs of 234 steps"
echo "PASS: 2 epochs of Fashion-MNIST on 4 ranks: the torus hook's accuracy is DDP's within 0.5 points"
