#!/bin/bash
# cli_conventions.sh: every program keeps the command-line conventions of
# common/torus_cli.h, and every job and cluster script takes --help.
# Programs: every bin_PROGRAMS and dist_bin_SCRIPTS of the build's Makefile
# (so a program added later is checked too), each run in an empty folder:
#   --help               exit 0, help on stdout, nothing on stderr, no line
#                        over 80 columns, nothing else done (no file made);
#   --version            exit 0, "NAME VERSION" on stdout, nothing else;
#   --no-such-option     exit 2, one line on stderr that starts with the
#                        program's name (not its path) and names the option;
#   an out-of-range value (the table below: a program without a row fails)
#                        exit 2, one line naming the option;
#   bash completion      tools/torus-completion.bash offers --help,
#                        --version and the out-of-range case's option.
# Jobs (jobs/*), tests/cluster/up|down, tests/run-all and tests/gpu/run:
# --help exits 0, prints the
# header and does nothing else (an unknown option is refused, named): no file appears in the folder it runs in
# or in TMPDIR, and none of sbatch, srun, salloc, make, configure,
# apt-get, dpkg, munged, slurmd or slurmctld is run (each is a PATH entry
# that records its call).
set -euo pipefail
b=$top_builddir s=$top_srcdir
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# NAME -> "OPTION VALUE": a value outside the option's range.
declare -A range=(
    [torus-layout]='--max-lines -1'
    [torus-pack]='--quality=500'
    [torus-data-bench]='-b 0'
    [torus-train]='--synthetic --threads 0'
    [torus-bench]='-n 0'
    [torus-sweep]='plan DIR --target 101'
    [torus-plot]='-o ""'
    [torus-torch]='--image-size 0'
)

progs=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$b/Makefile" |
    sed -n 's/^\(bin_PROGRAMS\|dist_bin_SCRIPTS\) = *//p' | tr ' \t' '\n\n' | sed 's/\$(EXEEXT)//' | grep -v '^$')
[ "$(echo "$progs" | wc -l)" -ge 5 ] || fail "found only these programs in $b/Makefile: $progs"

# run DIR CMD...: runs CMD in the empty folder DIR (stdin closed), output
# in $tmp/out and $tmp/err; its status in $rc.
run() {
    local dir=$1
    shift
    rm -rf "$dir" && mkdir -p "$dir"
    rc=0
    (cd "$dir" && TMPDIR=$dir "$@" </dev/null >"$tmp/out" 2>"$tmp/err") || rc=$?
    [ -z "$(ls -A "$dir")" ] || fail "$* left files behind: $(ls -A "$dir")"
}

# one_line NAME OPT WHAT: stderr is one line, from NAME, naming OPT.
one_line() {
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "$1 $3: stderr is not one line: $(cat "$tmp/err")"
    grep -q "^$1: " "$tmp/err" || fail "$1 $3: the message does not start with '$1: ': $(cat "$tmp/err")"
    grep -q -- "$2" "$tmp/err" || fail "$1 $3: the message does not name '$2': $(cat "$tmp/err")"
}

version=$(sed -n 's/^PACKAGE_VERSION = //p' "$b/Makefile")
n=0
for p in $progs; do
    name=${p##*/}
    case $p in trainer/torus-plot | tools/torus-torch) exe=$s/$p ;; *) exe=$b/$p ;; esac
    [ -x "$exe" ] || fail "$exe: not built"
    run "$tmp/cwd" "$exe" --help
    [ $rc = 0 ] || fail "$name --help: exit $rc"
    [ -s "$tmp/out" ] && [ ! -s "$tmp/err" ] || fail "$name --help: help not on stdout alone: $(head -3 "$tmp/err")"
    wide=$(awk 'length > 80 { print FNR ": " $0 }' "$tmp/out")
    [ -z "$wide" ] || fail "$name --help: lines over 80 columns: $wide"
    cp "$tmp/out" "$tmp/help"

    run "$tmp/cwd" "$exe" --version
    [ $rc = 0 ] || fail "$name --version: exit $rc"
    grep -q "^$name $version\( \|\$\)" "$tmp/out" && [ ! -s "$tmp/err" ] ||
        fail "$name --version: '$(cat "$tmp/out" "$tmp/err")', want '$name $version'"

    run "$tmp/cwd" "$exe" --no-such-option
    [ $rc = 2 ] || fail "$name --no-such-option: exit $rc, want 2"
    one_line "$name" "'--no-such-option'" --no-such-option

    [ -n "${range[$name]:-}" ] || fail "$name: no out-of-range case in this test's table"
    eval "args=(${range[$name]//DIR/\$tmp/cwd/sweep})"
    opt=$(printf '%s\n' "${args[@]}" | grep '^-[-A-Za-z]' | tail -1 | sed 's/=.*//')
    run "$tmp/cwd" "$exe" "${args[@]}"
    [ $rc = 2 ] || fail "$name ${range[$name]}: exit $rc, want 2 ($(cat "$tmp/err"))"
    one_line "$name" "$opt" "${range[$name]}"

    # The completion offers what --help defines (run on the bare name, as
    # a shell would, with the program's folder first on PATH).
    words=$(PATH="$(dirname "$exe"):$PATH" bash -c '. "$1"; COMP_WORDS=("$2" -); COMP_CWORD=1
        _torus_complete; printf "%s\n" "${COMPREPLY[@]}"' _ "$s/tools/torus-completion.bash" "$name")
    for o in --help --version "$opt"; do
        grep -q -- "^$o=\{0,1\}\$" <<<"$words" || fail "$name: bash completion lacks $o: $(echo $words)"
    done
    echo "ok: $name: --help, --version, --no-such-option, ${range[$name]}, completion ($(wc -l <<<"$words") options)"
    n=$((n + 1))
done

# Jobs and cluster scripts: --help and nothing else.
mkdir -p "$tmp/shims"
for t in sbatch srun salloc make configure apt-get dpkg munged slurmd slurmctld; do
    printf '#!/bin/sh\necho "%s $*" >>"%s/called"\nexit 1\n' "$t" "$tmp" >"$tmp/shims/$t"
    chmod +x "$tmp/shims/$t"
done
for j in "$s"/jobs/* "$s"/tests/cluster/up "$s"/tests/cluster/down "$s"/tests/run-all "$s"/tests/gpu/run; do
    [ -f "$j" ] && [ -x "$j" ] || continue
    rel=${j#"$s"/}
    run "$tmp/cwd" env PATH="$tmp/shims:$PATH" timeout 30 "$j" --help
    [ $rc = 0 ] || fail "$rel --help: exit $rc: $(head -3 "$tmp/err")"
    [ "$(wc -l <"$tmp/out")" -ge 3 ] || fail "$rel --help: too little help: $(cat "$tmp/out")"
    [ ! -e "$tmp/called" ] || fail "$rel --help ran $(cat "$tmp/called")"
    run "$tmp/cwd" env PATH="$tmp/shims:$PATH" timeout 30 "$j" --no-such-option
    [ $rc != 0 ] || fail "$rel --no-such-option: exit 0"
    grep -q -- "--no-such-option" "$tmp/err" || fail "$rel --no-such-option: not named: $(cat "$tmp/err")"
    [ ! -e "$tmp/called" ] || fail "$rel --no-such-option ran $(cat "$tmp/called")"
    n=$((n + 1))
done
echo "ok: $n programs, jobs and scripts keep the command-line conventions"
