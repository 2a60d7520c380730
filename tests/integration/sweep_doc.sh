#!/bin/bash
# sweep_doc.sh: the tables of docs/batch-science.md are the report's. For
# every `torus-sweep report` command in the doc (the last command of a
# code block) whose sweep directories are
# committed (docs/batch-science/...), the command runs again with this
# build's torus-sweep (its PNG into a scratch folder) and its output must
# be, line for line, the table block that follows the command's picture
# in the doc. Commands over sweeps that are not committed (the toy's, in
# /tmp) are counted and left alone; at least one must be checked.
set -euo pipefail
sweep=${top_builddir:?run from make check}/trainer/sweep/torus-sweep
command -v gnuplot > /dev/null || { echo "SKIP: gnuplot not installed (Debian: gnuplot-nox)"; exit 77; }
T=$(mktemp -d "$top_builddir/sweep_doc.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "${top_srcdir:?}"
/usr/bin/python3 - "$sweep" "$T" docs/batch-science.md <<'PY'
import re, shlex, subprocess, sys
sweep, tmp, doc = sys.argv[1:4]
text = open(doc).read()
blocks = re.findall(r"```\n(.*?)```\n", text, re.S)
checked = skipped = 0
for i, b in enumerate(blocks):
    m = re.search(r"^torus-sweep report .*", b, re.S | re.M)
    if not m:
        continue
    cmd = m.group(0).replace("\\\n", " ").strip()
    args = shlex.split(cmd)[2:]
    dirs = [a for a in args if not a.startswith("-") and a.startswith("docs/batch-science/")]
    if not dirs or any(a.startswith("/") for a in args):
        skipped += 1
        continue
    o = args.index("-o")
    args[o + 1] = "%s/%d.png" % (tmp, i)
    out = subprocess.run([sweep, "report"] + args, capture_output=True, text=True)
    if out.returncode:
        sys.exit("FAIL: %s: exit %d: %s" % (cmd, out.returncode, out.stderr))
    got = [l for l in out.stdout.splitlines() if not l.startswith("torus-sweep: wrote")]
    want = blocks[i + 1].splitlines()
    if got != want:
        for n, (g, w) in enumerate(zip(got + [""] * 99, want + [""] * 99)):
            if g != w:
                sys.exit("FAIL: %s: table line %d differs:\n  doc:    %s\n  report: %s" % (cmd, n + 1, w, g))
    checked += 1
if not checked:
    sys.exit("FAIL: no report command over committed sweeps found in %s" % doc)
print("ok: %d tables are the report's (%d over sweeps not committed left alone)" % (checked, skipped))
PY
