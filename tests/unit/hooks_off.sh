#!/bin/bash
# tests/unit/hooks_off.sh: --disable-test-hooks compiles out every fault
# hook, checked on built objects (cheap: no second build).
#   1. The hooks are found in the sources: every getenv("..._TEST_...") or
#      getenv("..._FAULT...") under common/, data/, topology/, plugins/
#      and trainer/ (today TTRAIN_TEST_SLEEP, TTRAIN_TEST_OVERFLOW and
#      TCOMM_FAULT).
#   2. tests/unit/libhooks_off.a compiles every source holding one as
#      --disable-test-hooks does (TORUS_NO_TEST_HOOKS): a source with a
#      hook missing from it fails the test, and its objects hold none of
#      the variables' names and no tc_fault_point symbol, defined or
#      called.
#   3. This build's torus-train holds the names exactly when configured
#      with the hooks (config.h): with them, the probe of 2 finds them
#      there (so it can fail); without, torus-train and every shared
#      library built (libtoruscomm.so, the cuda module, ...) are checked
#      as in 2.
set -u
: "${top_srcdir:?run through make check}" "${top_builddir:?}"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
for t in nm ar strings; do
    command -v $t >/dev/null || { echo "SKIP: '$t' not installed (binutils)"; exit 77; }
done
lib=$top_builddir/tests/unit/libhooks_off.a
bin=$top_builddir/trainer/torus-train
pat='getenv\("[A-Z0-9_]*(_TEST_|_FAULT)[A-Z0-9_]*"\)'
cd "$top_srcdir" || exit 1
files=$(grep -rlE --include='*.c' "$pat" common data topology plugins trainer | sort)
names=$(grep -rhoE --include='*.c' "$pat" common data topology plugins trainer |
        sed 's/getenv("\(.*\)")/\1/' | sort -u)
[ -n "$names" ] && [ -n "$files" ] || { echo "FAIL: no fault hook found in the sources"; exit 1; }
echo "hooks: $(echo $names) in $(echo $files)"
# A hook is compiled out when its name is gone and tc_fault_point too.
hooks_in() {
    { strings -a "$1" | grep -oE "$(echo $names | tr ' ' '|')"
      nm "$1" 2>/dev/null | grep -oE '\btc_fault_point\b'; } | sort -u | tr '\n' ' '
}
members=$(ar t "$lib") || { echo "FAIL: no $lib"; exit 1; }
for f in $files; do
    grep -q -- "-$(basename "$f" .c)\.o\$" <<<"$members" ||
        fail "$f has a fault hook that tests/unit/libhooks_off.a does not compile (trainer/local.mk)"
done
left=$(hooks_in "$lib")
[ -z "$left" ] || fail "compiled with TORUS_NO_TEST_HOOKS, the objects still hold: $left"
if grep -q '^#define TORUS_NO_TEST_HOOKS' "$top_builddir/config.h"; then
    for b in "$bin" $(find "$top_builddir" -path '*/.libs/*.so' -not -path '*/tests/*'); do
        left=$(hooks_in "$b")
        [ -z "$left" ] || fail "configured with --disable-test-hooks, $b holds: $left"
    done
else
    got=$(hooks_in "$bin")
    for n in $names tc_fault_point; do
        grep -qw -- "$n" <<<"$got" || fail "configured with the hooks, torus-train lacks $n (the probe cannot see it)"
    done
fi
[ $fails -eq 0 ] || exit 1
echo "PASS: --disable-test-hooks leaves none of $(echo $names) tc_fault_point"
