#!/bin/bash
# deploy_spec.sh: torus.spec, the RPM recipe for RHEL-family sites, is one
# rpm accepts here (rpmspec -P, no warnings), carries configure.ac's version,
# and its %files list matches what `make install` installs with the spec's
# own directories: every installed file is packaged, and every file the
# list names is installed (an RPM build fails on either). The .deb side is
# tests/integration/deploy_deb.sh. Every installed program has a man page
# and a bash completion, and its --version names the package's version.
# No cluster, no root needed.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v rpmspec >/dev/null || { echo "SKIP: rpmspec not installed (run tools/install-deps: rpm)"; exit 77; }
spec=$top_srcdir/torus.spec
ev() { rpm --eval "$1"; }

# rpm's own parse, every macro expanded; warnings count as failures.
# A build with the cuda module installs it: the spec then needs --with gpu
# (the torus-cuda subpackage); without, the module must be in no package.
with=()
grep -q '^#define TORUS_HAVE_CUDNN' "$top_builddir/config.h" && with=(--with gpu)
rpmspec -P "${with[@]}" "$spec" >"$tmp/spec" 2>"$tmp/err" || fail "rpmspec -P: $(cat "$tmp/err")"
if [ ${#with[@]} = 1 ]; then
    sed -n '/^%files cuda/,/^%/p' "$tmp/spec" | grep -qx "$(ev %_libdir)/torus/torus_cuda.so" ||
        fail "torus.spec --with gpu: %files cuda does not hold the module"
    sed -n '/^%files$/,/^%files cuda/p' "$tmp/spec" | grep -q 'torus_cuda' &&
        fail "torus.spec: the main package lists the cuda module"
    rpmspec -P "$spec" 2>/dev/null | grep -q '^%files cuda' &&
        fail "torus.spec without --with gpu still has %files cuda"
fi
[ ! -s "$tmp/err" ] || fail "rpmspec -P warns: $(head -3 "$tmp/err")"
version=$(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")
grep -q "^Version: *$version\$" "$tmp/spec" || fail "torus.spec's Version is not configure's $version"

# Install with the directories the spec's %configure would use.
spankdir=$(sed -n 's/.*--with-spank-dir=\([^ ]*\).*/\1/p' "$tmp/spec")
[ -n "$spankdir" ] || fail "the spec's %configure sets no --with-spank-dir"
make -s -C "$top_builddir" install DESTDIR="$tmp/root" prefix=/usr bindir="$(ev %_bindir)" \
    libdir="$(ev %_libdir)" spankdir="$spankdir" mandir="$(ev %_mandir)" \
    docdir="$(ev %_defaultdocdir)/torus" >"$tmp/install.log" 2>&1 ||
    fail "make install failed: $(tail -5 "$tmp/install.log")"
(cd "$tmp/root" && find . -type f | sed 's|^\.||' | grep -v '\.la$') | sort >"$tmp/installed"
# %files, without directives; the conffile is made by %install, not make.
sed -n '/^%files/,/^%changelog/p' "$tmp/spec" | sed '1d;$d' |
    sed 's/^%config([a-z]*) *//; s/^%dir .*//; s/^%doc .*//' | grep '^/' | grep -v '^/etc/' >"$tmp/files"
[ "$(wc -l <"$tmp/files")" -ge 5 ] || fail "too few %files entries: $(cat "$tmp/files")"
# True when installed file $1 is what %files entry $2 names: a glob, or a
# directory (ending in /) and everything below it.
_covers() {
    # shellcheck disable=SC2053 # the pattern is a glob on purpose
    [[ $2 == */ && $1 == "$2"* ]] || [[ $1 == $2 ]]
}
_listed() { local p; while read -r p; do _covers "$1" "$p" && return 0; done <"$tmp/files"; return 1; }
_installed() { local f; while read -r f; do _covers "$f" "$1" && return 0; done <"$tmp/installed"; return 1; }
while read -r f; do
    _listed "$f" || fail "make install installs $f but torus.spec's %files does not list it"
done <"$tmp/installed"
while read -r pat; do
    _installed "$pat" || fail "torus.spec's %files lists $pat, which make install does not install"
done <"$tmp/files"
echo "ok: torus.spec parses, version $version, %files = make install ($(wc -l <"$tmp/installed") files)"

# Every installed program has its man page (a tool without one is a tool an
# admin cannot look up on the cluster).
bindir=$(ev %_bindir) mandir=$(ev %_mandir) n=0
for f in "$tmp/root$bindir"/*; do
    [ -e "$f" ] || fail "make install installed no program into $bindir"
    name=$(basename "$f")
    [ -f "$tmp/root$mandir/man1/$name.1" ] || fail "$bindir/$name is installed without $mandir/man1/$name.1"
    comp=$tmp/root$(ev %_datadir)/bash-completion/completions/$name
    [ -f "$comp" ] || fail "$bindir/$name is installed without its bash completion ${comp#"$tmp/root"}"
    bash -n "$comp" || fail "${comp#"$tmp/root"} is not bash"
    "$f" --version | grep -q "^$name $version\( \|\$\)" ||
        fail "the installed $name --version does not say $version: $("$f" --version 2>&1)"
    n=$((n + 1))
done
echo "ok: each of the $n installed programs has its man page and bash completion, and says its version"
