#!/bin/bash
# cluster_updown.sh: the cluster scripts themselves. Bad arguments are refused
# with a message naming the option; topology follows --leaf-sizes; sbatch
# works; a second `up` on a running base is refused; `down` stops a cluster
# with a job still running and leaves no daemon or task behind; the README's
# "A local Slurm cluster for development" example runs as written (its
# relative --plugin path included).
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
tl_require_cluster
up="$top_srcdir/tests/cluster/up"

expect_refusal() { # expect_refusal PATTERN ARGS...
    local pat=$1 msg
    shift
    if msg=$("$up" "$@" 2>&1); then tl_fail "up $* was accepted"; fi
    grep -q -- "$pat" <<<"$msg" || tl_fail "up $*: message '$msg' does not mention '$pat'"
}
"$up" --help | grep -q 'SYNOPSIS' || tl_fail "up --help has no SYNOPSIS"
expect_refusal '--base' --nodes 2
expect_refusal '--nodes' --base /tmp/x --nodes 0
expect_refusal '--leaf-sizes' --base /tmp/x --nodes 4 --leaf-sizes 2,1
expect_refusal '--rate' --base /tmp/x --rate 1gbit
expect_refusal 'unknown option' --base /tmp/x --bogus
expect_refusal 'not made by tests/cluster/up' --base "$top_srcdir"

tl_cluster_up --nodes 3 --leaf-sizes 2,1
topo=$(scontrol show topology)
grep -q 'SwitchName=leaf1 .*Nodes=n\[1-2\]' <<<"$topo" || tl_fail "leaf1 is not n[1-2]: $topo"
grep -q 'SwitchName=leaf2 .*Nodes=n3' <<<"$topo" || tl_fail "leaf2 is not n3: $topo"
grep -q 'SwitchName=spine .*Switches=leaf1,leaf2' <<<"$topo" || tl_fail "no spine over both leaves: $topo"

# Task sees its node's hostname and per-node TmpFS.
out=$(srun -N3 -n3 sh -c 'echo $(hostname) $SLURM_TOPOLOGY_ADDR') || tl_fail "srun -N3 failed"
grep -q '^n3 spine.leaf2.n3$' <<<"$out" || tl_fail "n3 topology address wrong: $out"

if msg=$("$up" --base "$TL_BASE" --nodes 3 2>&1); then tl_fail "second up on a running base was accepted"; fi
grep -q 'already running' <<<"$msg" || tl_fail "second up: unexpected message '$msg'"

jobid=$(sbatch --parsable -N2 --output="$TL_BASE/job-%j.out" --wrap 'srun sleep 300') || tl_fail "sbatch failed"
for _ in $(seq 1 100); do
    [ "$(squeue -h -j "$jobid" -o %T)" = RUNNING ] && break
    sleep 0.1
done
[ "$(squeue -h -j "$jobid" -o %T)" = RUNNING ] || tl_fail "batch job $jobid never ran"
sleep 1
uts=$(readlink "/proc/$(cat "$TL_BASE/run/slurmd-n1.pid")/ns/uts")
pids=$(cat "$TL_BASE"/run/*.pid)
"$top_srcdir/tests/cluster/down" --base "$TL_BASE" --quiet
for p in $pids; do ! kill -0 "$p" 2>/dev/null || tl_fail "daemon $p survived down"; done
for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/uts" 2>/dev/null)" != "$uts" ] || tl_fail "process ${p#/proc/} left in node n1's namespace"
done
"$top_srcdir/tests/cluster/down" --base "$TL_BASE" --quiet || tl_fail "second down failed"

# Stale pid files whose pids now belong to someone else: down must leave
# that process (and everything in its namespace) alone.
sleep 60 &
bystander=$!
for f in slurmctld slurmd-n1 slurmd-n2 munged; do echo "$bystander" >"$TL_BASE/run/$f.pid"; done
"$top_srcdir/tests/cluster/down" --base "$TL_BASE" --quiet || tl_fail "down with stale pid files failed"
kill -0 "$bystander" 2>/dev/null || tl_fail "down killed an unrelated process named by a stale pid file"
kill "$bystander"
rm -rf "$TL_BASE"

# The README's example, its lines as written (optional [--netns ...] left
# out, [--plugin ...] taken), run from a directory laid out like the
# README's checkout (tests/ and build/), on a base of our own that
# tl_cluster_down tears down whatever happens.
readme=$(sed -n '/^## A local Slurm cluster for development/,/^## /p' "$top_srcdir/README.md" |
    sed -n '/^```sh/,/^```/p' | sed '1d;$d')
grep -q -- '--plugin build/plugins/.libs/spank_torus.so' <<<"$readme" ||
    tl_fail "README's cluster example changed; update this test: $readme"
readme=$(sed -e 's/ \[--netns[^]]*\]//' -e 's/\[\(--plugin [^]]*\)\]/\1/' <<<"$readme")
TL_BASE=$(mktemp -d "${TMPDIR:-/tmp}/torus-test.XXXXXX")
readme=${readme//\/tmp\/tc/$TL_BASE}
co=$(mktemp -d "${TMPDIR:-/tmp}/torus-readme.XXXXXX")
ln -s "$top_srcdir/tests" "$co/tests"
ln -s "$(cd "$top_builddir" && pwd)" "$co/build"
rc=0
out=$(cd "$co" && bash -e -c "$readme" 8>&- 2>&1) || rc=$?
rm -rf "$co"
[ $rc = 0 ] || tl_fail "README's cluster example failed (exit $rc): $readme: $(tail -5 <<<"$out")"
[ "$(grep -c '^rank=' <<<"$out")" = 8 ] || tl_fail "README's example: not 8 probe lines: $out"
grep -qx "required $co/build/plugins/.libs/spank_torus.so *" "$TL_BASE/etc/plugstack.conf" ||
    tl_fail "plugstack.conf lacks the absolute plugin path: $(cat "$TL_BASE/etc/plugstack.conf")"
expect_refusal "no such file 'nope.so'" --base /tmp/x --plugin nope.so
echo "PASS: argument checks, uneven leaves, sbatch, double-up refusal, clean teardown with a running job, stale pid files ignored, README's example with a relative --plugin"
