#!/bin/bash
# deploy_deb.sh: the Debian package as a site admin meets it. Builds the .deb
# with dpkg-buildpackage from this tree's distribution files (what a release
# tarball holds), installs it with dpkg -i, checks what it ships (tools,
# spank_torus.so in Slurm's plugin directory, man pages that render, the
# plugstack.conf.d conffile with its line commented out), enables that line
# as an admin would, starts the local Slurm cluster with the INSTALLED plugin
# and runs jobs/smoke.sbatch with only the installed tools on PATH (no build
# tree); then purges the package and checks that no file or directory it
# brought is left. Also: `debian/rules clean` leaves the tree as it was
# (the package rebuilds cleanly), and debian/changelog and torus.spec carry
# the version configure.ac does. The second binary package, python3-torus,
# is installed too: its torus.data finds the installed libtorusdata with no
# TORUS_LIBDIR and reads a set packed by the installed torus-pack; it is
# purged with nothing left. Needs root (dpkg -i, the cluster).
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
[ "$(id -u)" = 0 ] || tl_skip "installs a package and starts a cluster: needs root"
for t in dpkg-buildpackage dh fakeroot; do
    command -v $t >/dev/null || tl_skip "'$t' not installed (run tools/install-deps: debhelper)"
done
if dpkg-query -W -f='${Status}' torus 2>/dev/null | grep -q installed; then
    tl_fail "a torus package is already installed here; this test installs and purges its own: run dpkg --purge torus first"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/torus-deb.XXXXXX")
installed=0
# On any exit: purge what we installed, then let testlib stop the cluster.
_cleanup() {
    local rc=$?
    [ $installed = 1 ] && dpkg --purge python3-torus torus >/dev/null 2>&1
    rm -rf "$work"
    [ -n "${TL_BASE:-}" ] && { (exit $rc); tl_cluster_down; }
    exit $rc
}
trap _cleanup EXIT

version=$(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")
[ -n "$version" ] || tl_fail "no PACKAGE_VERSION in $top_builddir/Makefile"
head -1 "$top_srcdir/debian/changelog" | grep -q "^torus ($version)" ||
    tl_fail "debian/changelog's version is not $version: $(head -1 "$top_srcdir/debian/changelog")"
grep -q "^Version: *$version\$" "$top_srcdir/torus.spec" || tl_fail "torus.spec's Version is not $version"

# 1. Build from the distribution files, as from a release tarball.
src=$work/torus-$version
make -s -C "$top_builddir" distdir distdir="$src" >"$work/distdir.log" 2>&1 ||
    tl_fail "make distdir failed: $(tail -5 "$work/distdir.log")"
cp -a "$src" "$work/pristine"
t0=$(date +%s)
(cd "$src" && DEB_BUILD_OPTIONS="parallel=$(nproc) nocheck noddebs" dpkg-buildpackage -us -uc -b) \
    >"$work/build.log" 2>&1 || tl_fail "dpkg-buildpackage failed: $(tail -15 "$work/build.log")"
echo "dpkg-buildpackage: $(($(date +%s) - t0)) s"
deb=$work/torus_${version}_$(dpkg --print-architecture).deb
[ -f "$deb" ] || tl_fail "no $deb after the build"
# Rebuilds cleanly: the clean target leaves exactly the sources (automake's
# empty .deps directories and .dirstamp files aside).
(cd "$src" && dpkg-buildpackage -us -uc -b -T clean) >"$work/clean.log" 2>&1 ||
    tl_fail "debian/rules clean failed: $(tail -5 "$work/clean.log")"
diff -rq "$work/pristine" "$src" | grep -v -e '\.deps$' -e '\.dirstamp$' >"$work/dirty" || true
[ ! -s "$work/dirty" ] || tl_fail "debian/rules clean left the tree changed: $(head -5 "$work/dirty")"

# 2. What the package says about itself.
dpkg-deb -f "$deb" Depends >"$work/depends"
grep -q 'libslurm' "$work/depends" || tl_fail "Depends lacks the shlibs of libslurm: $(cat "$work/depends")"
# The CPU package: nothing from CUDA, and no cuda module (that is torus-cuda,
# built with the pkg.torus.gpu profile, which this test's control lists).
! grep -Eiq 'cuda|cudnn|cublas|nccl|nvidia' "$work/depends" ||
    tl_fail "the CPU package depends on CUDA: $(cat "$work/depends")"
! dpkg-deb -c "$deb" | grep -q 'torus_cuda' || tl_fail "the CPU package ships the cuda module"
(cd "$src" && DEB_BUILD_PROFILES=pkg.torus.gpu dh_listpackages) 2>/dev/null | grep -qx torus-cuda ||
    tl_fail "debian/control builds no torus-cuda package with the pkg.torus.gpu profile"
! (cd "$src" && dh_listpackages) 2>/dev/null | grep -qx torus-cuda ||
    tl_fail "debian/control builds torus-cuda without the pkg.torus.gpu profile"
grep -q 'slurm-wlm-basic-plugins (>= [0-9]*\.[0-9]*), slurm-wlm-basic-plugins (<< ' "$work/depends" ||
    tl_fail "Depends does not pin the Slurm release: $(cat "$work/depends")"
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|; s|/$||' | grep -v '^$' >"$work/contents"
# Directories that exist before the install must survive the purge; the
# others must go with it.
dpkg-deb -c "$deb" | awk '$1 ~ /^d/ { print $6 }' | sed 's|^\./|/|; s|/$||' | grep -v '^$' |
    while read -r p; do [ -d "$p" ] || echo "$p"; done >"$work/new-dirs"

# 3. Install.
dpkg -i "$deb" >"$work/install.log" 2>&1 || tl_fail "dpkg -i failed: $(tail -10 "$work/install.log")"
installed=1
dpkg -L torus >"$work/files"
so=$(grep -m1 '/slurm-wlm/spank_torus\.so$' "$work/files") ||
    tl_fail "spank_torus.so is not in Slurm's plugin directory: $(grep spank "$work/files")"
for f in /usr/bin/torus-train /usr/bin/torus-pack /usr/bin/torus-bench /usr/bin/torus-data-bench \
    /usr/bin/torus-layout /usr/share/man/man8/spank_torus.8.gz /usr/share/man/man7/torus.7.gz \
    /usr/share/man/man1/torus-train.1.gz /etc/slurm/plugstack.conf.d/torus.conf; do
    grep -qx "$f" "$work/files" || tl_fail "the package does not ship $f"
    [ -e "$f" ] || tl_fail "$f is listed but missing after dpkg -i"
done
for b in $(grep '^/usr/bin/torus-' "$work/files"); do
    grep -qx "/usr/share/bash-completion/completions/${b##*/}" "$work/files" ||
        tl_fail "the package ships $b without its bash completion"
done
! grep -q '\.la$\|/include/' "$work/files" || tl_fail "the package ships build leftovers: $(grep '\.la$\|/include/' "$work/files")"
conf=/etc/slurm/plugstack.conf.d/torus.conf
dpkg-query -W -f='${Conffiles}\n' torus | grep -q " $conf " || tl_fail "$conf is not a conffile"
! grep -v '^#' "$conf" | grep -q '[^[:space:]]' || tl_fail "$conf enables something: $(grep -v '^#' "$conf")"
for page in spank_torus torus torus-train torus-layout; do
    LC_ALL=C MANWIDTH=80 man --warnings "$page" >"$work/man" 2>"$work/man.err" ||
        tl_fail "man $page failed: $(cat "$work/man.err")"
    [ ! -s "$work/man.err" ] || tl_fail "man $page warns: $(head -3 "$work/man.err")"
done

# 3b. python3-torus over the installed libraries (no build tree, no TORUS_LIBDIR).
pydeb=$work/python3-torus_${version}_all.deb
[ -f "$pydeb" ] || tl_fail "no $pydeb after the build"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    dpkg -i "$pydeb" >"$work/install-py.log" 2>&1 || tl_fail "dpkg -i python3-torus failed: $(tail -5 "$work/install-py.log")"
    /usr/bin/python3 - "$work/idx" <<'PY' || tl_fail "could not write an IDX file"
import gzip, struct, sys
with gzip.open(sys.argv[1] + "-images-idx3-ubyte.gz", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, 12, 28, 28) + bytes(range(256)) * 36 + bytes(12 * 784 - 9216))
with gzip.open(sys.argv[1] + "-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">II", 0x801, 12) + bytes([3] * 12))
PY
    /usr/bin/torus-pack --no-progress -o "$work/packed" -s train "$work/idx-images-idx3-ubyte.gz" >/dev/null ||
        tl_fail "installed torus-pack failed"
    out=$(cd "$work" && env -u TORUS_LIBDIR -u PYTHONPATH /usr/bin/python3 -c '
import sys, torus.data as d, torus._lib as L
ld = d.ShardLoader(sys.argv[1], 4, train=False, world_size=1, rank=0)
print(sum(len(y) for _, y in ld), d.__file__, L.comm().tcomm_api_version())' "$work/packed/train-index.txt" 2>&1) ||
        tl_fail "python3-torus over the installed libraries: $out"
    [ "$out" = "12 /usr/lib/python3/dist-packages/torus/data.py 1" ] || tl_fail "python3-torus read: $out"
    echo "python3-torus: the installed package reads a packed set through the installed libtorusdata and loads libtoruscomm"
    dpkg --purge python3-torus >"$work/purge-py.log" 2>&1 || tl_fail "dpkg --purge python3-torus: $(cat "$work/purge-py.log")"
    [ ! -e /usr/lib/python3/dist-packages/torus ] || tl_fail "python3-torus left /usr/lib/python3/dist-packages/torus"
else
    echo "python3-torus: not installed here (no python3-torch); its .deb was built"
fi

# 4. Enable the shipped line as an admin would, check it with the installed
# torus-layout, and run the smoke job on the cluster with that plugin.
sed -i 's/^#\(optional .*spank_torus\.so.*\)$/\1/' "$conf"
line=$(grep '^optional ' "$conf") || tl_fail "no commented plugstack line to enable in $conf"
/usr/bin/torus-layout --check-plugstack "$line" >"$work/check" || tl_fail "the shipped line is refused: $line"
read -r _ plugin args <<<"$line"
[ "$plugin" = "$so" ] || tl_fail "the shipped line names $plugin, the package installed $so"
tl_cluster_up --nodes 4 --cpus 8 --plugin "$plugin" --plugin-args "$args"
trap _cleanup EXIT # tl_cluster_up set its own
grep -q "$so" "$TL_BASE/etc/plugstack.conf" || tl_fail "the cluster does not load the installed plugin"
_smoke() {
    (
        cd "$work"
        # The installed tools only: no build tree, nothing of this checkout on PATH.
        unset TORUS_BUILD
        export PATH=/usr/sbin:/usr/bin:/sbin:/bin
        [ "$(command -v torus-bench)" = /usr/bin/torus-bench ] || exit 9
        timeout 300 sbatch --wait -o "$work/smoke.out" "$top_srcdir/jobs/smoke.sbatch" >/dev/null
    )
}
# testlib's rule (tl_srun_mpi): OpenMPI 4.1.4's crash inside MPI_Init on a
# loaded host, which tcomm names, alone earns a logged retry, twice at most
# (the job starts MPI several times, so one crash in it is likelier than in
# one step).
for try in 1 2 3; do
    _smoke && break
    grep -q 'OpenMPI crashed inside MPI_Init' "$work/smoke.out" 2>/dev/null ||
        tl_fail "jobs/smoke.sbatch failed with the installed package: $(grep -m8 -E 'error|tcomm|torus|FAIL' "$work/smoke.out" 2>/dev/null)"
    [ $try -lt 3 ] || tl_fail "jobs/smoke.sbatch failed 3 times with the installed package, each time OpenMPI crashed inside MPI_Init: $(grep -m8 -E 'error|tcomm|torus|FAIL' "$work/smoke.out" 2>/dev/null)"
    echo "RETRY: smoke job try $try: OpenMPI crashed inside MPI_Init: $(grep -m1 'OpenMPI crashed' "$work/smoke.out")" >&2
done
grep -q '== torus smoke: OK' "$work/smoke.out" || tl_fail "smoke job did not finish: $(tail -5 "$work/smoke.out")"
grep -q 'dims=[0-9]*x[0-9]* coord=' "$work/smoke.out" || tl_fail "tasks got no TORUS_* from the installed plugin: $(grep rank "$work/smoke.out" | head -3)"
grep -q 'unset' "$work/smoke.out" && tl_fail "a task lacks a TORUS_* variable: $(grep -m1 unset "$work/smoke.out")"
echo "smoke job ran with the installed tools and plugin"
"$top_srcdir/tests/cluster/down" --base "$TL_BASE" --quiet
rm -rf "$TL_BASE"
TL_BASE=""

# 5. Purge: every file and every directory the package brought is gone.
dpkg --purge torus >"$work/purge.log" 2>&1 || tl_fail "dpkg --purge failed: $(cat "$work/purge.log")"
installed=0
! dpkg-query -W -f='${Status}' torus 2>/dev/null | grep -q 'installed\|config-files' ||
    tl_fail "dpkg still knows torus after the purge: $(dpkg-query -W -f='${Status}' torus)"
left=0
while read -r p; do
    [ -d "$p" ] && ! grep -qx "$p" "$work/new-dirs" && continue
    if [ -e "$p" ] || [ -L "$p" ]; then echo "left after purge: $p" >&2; left=1; fi
done <"$work/contents"
[ $left = 0 ] || tl_fail "the purge left files or directories behind"
echo "purged: $(wc -l <"$work/contents") paths gone, $(wc -l <"$work/new-dirs") of them directories the package created"
