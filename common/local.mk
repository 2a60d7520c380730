# common/local.mk: layer 0, shared by every component: the error convention
# (torus_error.h), JSON through json-c (torus_json.h), the reporter of
# warnings and progress
# (torus_report.h) and the command-line conventions (torus_cli.h). It
# includes nothing of torus. Linked into each library.

noinst_LTLIBRARIES += common/libtoruscommon.la
common_libtoruscommon_la_SOURCES = common/torus_error.h common/torus_error.c \
	common/torus_report.h common/torus_report.c \
	common/torus_cli.h common/torus_cli.c \
	common/torus_json.h common/torus_json.c
common_libtoruscommon_la_CFLAGS = $(AM_CFLAGS)
common_libtoruscommon_la_LIBADD = $(JSONC_LIBS) -lm
# The TORUS_* names of the env contract (plugin writes, libtcomm reads).
noinst_HEADERS += common/torus_env.h
# How a global batch is split over ranks (loader and torus-train).
noinst_HEADERS += common/torus_share.h
