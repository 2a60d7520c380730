#!/bin/bash
# configure_errors.sh: configure refuses bad or unsatisfiable options with a
# message that names the fix (the option, or the Debian package to install).
set -uo pipefail
work=$(mktemp -d "${TMPDIR:-/tmp}/torus-cfg.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fails=0
expect_error() { # expect_error PATTERN ARGS...
    local pat=$1 out
    shift
    if out=$("$top_srcdir/configure" -q "$@" 2>&1); then
        echo "FAIL: configure $* succeeded"
        fails=$((fails + 1))
    elif ! grep -q "configure: error:.*$pat" <<<"$out"; then
        echo "FAIL: configure $*: error does not mention '$pat':"
        tail -n 3 <<<"$out"
        fails=$((fails + 1))
    else
        echo "ok: configure $* -> $(grep 'configure: error:' <<<"$out" | head -n1)"
    fi
}
expect_error "libpmix-dev" --with-pmix=/nonexistent
expect_error "libslurm-dev" --with-slurm=/nonexistent
expect_error "libhdf5-dev" --with-hdf5=/nonexistent
expect_error "openmpi-bin libopenmpi-dev" --with-mpi=no-such-mpicc
expect_error "--enable-gpu=yes" --enable-gpu=yes --with-cuda=/nonexistent
expect_error "--enable-gpu must be" --enable-gpu=maybe
expect_error "libdnnl-dev" --with-dnnl=/nonexistent
expect_error "oneDNN is required.*libdnnl-dev" --without-dnnl
# oneDNN missing from the system (its header check answered "no" through
# the configure cache variable): required, so an error naming the package.
expect_error "oneDNN headers not found.*libdnnl-dev" ac_cv_header_oneapi_dnnl_dnnl_h=no
[ $fails = 0 ]
