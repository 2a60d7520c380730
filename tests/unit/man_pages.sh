#!/bin/bash
# man_pages.sh: every man page torus installs renders with `man -l` without a
# warning, is lint-clean (groff -ww, mandoc -Tlint, lexgrog), and says what
# the program says: every option of a tool's --help is in its page, every
# plugstack argument the plugin's parser accepts is in spank_torus(8) with a
# description, and the parser's own list of keys (in its "unknown argument"
# message) names exactly those. The pages are built by docs/man/local.mk
# from the programs of this build tree. No cluster needed.
set -euo pipefail
b=$top_builddir s=$top_srcdir
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
for t in man groff lexgrog mandoc; do
    command -v $t >/dev/null || { echo "SKIP: '$t' not installed (run tools/install-deps)"; exit 77; }
done

# name:program whose --help made the page ('-' for torus(7): no program;
# '@' for a script of the source tree).
pages=(
    torus-layout.1:topology/torus-layout
    torus-pack.1:data/torus-pack
    torus-data-bench.1:data/torus-data-bench
    torus-train.1:trainer/torus-train
    torus-bench.1:trainer/bench/torus-bench
    torus-plot.1:@trainer/torus-plot
    torus-sweep.1:trainer/sweep/torus-sweep
    torus-torch.1:@tools/torus-torch
    spank_torus.8:plugins/spank-torus-doc
    torus.7:-
)
for entry in "${pages[@]}"; do
    page=${entry%%:*} prog=${entry#*:}
    f=$b/docs/man/$page
    [ -f "$f" ] || f=$s/docs/man/$page
    [ -f "$f" ] || fail "$page: not built (make)"
    # Lint: any output is a finding.
    groff -man -ww -z "$f" 2>"$tmp/err" || fail "$page: groff failed: $(cat "$tmp/err")"
    [ ! -s "$tmp/err" ] || fail "$page: groff -ww: $(head -3 "$tmp/err")"
    mandoc -Tlint -W warning "$f" >"$tmp/err" 2>&1 || fail "$page: mandoc -Tlint: $(head -3 "$tmp/err")"
    lexgrog "$f" >"$tmp/lex" || fail "$page: lexgrog cannot parse its NAME section"
    grep -q ' - ' "$tmp/lex" || fail "$page: lexgrog: $(cat "$tmp/lex")"
    # Render as a reader would; wide, so that no option is broken across lines.
    LC_ALL=C MANWIDTH=2000 man --warnings -l "$f" >"$tmp/text" 2>"$tmp/err" ||
        fail "$page: man -l failed: $(cat "$tmp/err")"
    [ ! -s "$tmp/err" ] || fail "$page: man -l warns: $(head -3 "$tmp/err")"
    grep -q '^OPTIONS\|^ENVIRONMENT' "$tmp/text" || fail "$page: rendered page has no OPTIONS or ENVIRONMENT"
    [ "$prog" = - ] && continue
    # Every option --help names is in the rendered page.
    # '@' marks a script run from the source tree (torus-plot).
    case $prog in @*) exe=$s/${prog#@} prog=${prog#@} ;; *) exe=$b/$prog ;; esac
    "$exe" --help >"$tmp/help" || fail "$prog --help failed"
    n=0
    for opt in $(grep -o -- '--[a-z0-9][-a-z0-9]*\|^ *-[A-Za-z],\|^ *-[A-Za-z] ' "$tmp/help" |
                 sed 's/^ *//; s/[, ]$//' | sort -u); do
        grep -q -- "$opt" "$tmp/text" || fail "$page: '$opt' is in $prog --help but not in the page"
        n=$((n + 1))
    done
    [ $n -gt 0 ] || fail "$page: found no option in $prog --help"
    echo "ok: $page ($n options of --help, lint clean)"
done

# spank_torus(8): each plugstack argument the parser knows, described.
page=$b/docs/man/spank_torus.8
LC_ALL=C MANWIDTH=2000 man -l "$page" >"$tmp/text" 2>/dev/null
! grep -q UNDOCUMENTED "$tmp/text" ||
    fail "spank_torus.8: $(grep -m1 -B1 UNDOCUMENTED "$tmp/text" | head -1 | sed 's/^ *//') has no description (add it to _docs in topology/plugstack.c)"
"$b/plugins/spank-torus-doc" | sed -n 's/^    \([a-z_]*\)\(=.*\)\{0,1\}$/\1/p' | sort >"$tmp/doc-keys"
[ "$(wc -l <"$tmp/doc-keys")" -ge 5 ] || fail "spank-torus-doc listed too few arguments: $(cat "$tmp/doc-keys")"
while read -r key; do
    grep -Eq "^ +$key(=|\$)" "$tmp/text" || fail "spank_torus.8: plugstack argument '$key' missing"
done <"$tmp/doc-keys"
# The parser's message lists its keys for the admin who typed one wrong:
# that list must be the documented one.
"$b/topology/torus-layout" --check-plugstack 'no_such_key=1' 2>"$tmp/err" >/dev/null && fail "no_such_key accepted"
sed -n 's/.*(keys: \([^)]*\)).*/\1/p' "$tmp/err" | tr -d ' ' | tr , '\n' | sort >"$tmp/msg-keys"
[ -s "$tmp/msg-keys" ] || fail "no key list in: $(cat "$tmp/err")"
diff "$tmp/doc-keys" "$tmp/msg-keys" >"$tmp/diff" ||
    fail "plugstack keys: the parser's message (>) and its tables (<) differ (topology/plugstack.c _KEYS): $(grep '^[<>]' "$tmp/diff" | tr '\n' ' ')"
echo "ok: spank_torus.8 documents all $(wc -l <"$tmp/doc-keys") plugstack arguments"
