#!/bin/sh
# autogen.sh: regenerate configure and Makefile.in from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
autoreconf --install --force --warnings=all,no-portability >/dev/null
echo "torus: now run ./configure (or out of tree: mkdir build && cd build && ../configure)"
