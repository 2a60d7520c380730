#!/bin/bash
# docs_check.sh: the documents cannot drift from the tree (docs_check.py
# says what it checks): paths they name exist, options they show are in the
# program's --help, no comment names an issue number. No cluster needed.
set -euo pipefail
command -v python3 >/dev/null || { echo "SKIP: python3 not installed (run tools/install-deps)"; exit 77; }
exec python3 "$top_srcdir/tests/unit/docs_check.py" "$top_srcdir" "$top_builddir"
