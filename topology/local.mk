# topology/local.mk: libtoruslayout (the 2D-torus layout), the torus-layout
# admin tool, their unit tests, the scale bench and the by-hand fuzz target.

# libtoruscost: the one alpha-beta cost model (torus_cost.h), pure C with no
# Slurm, so that libtcomm links it too (hybrid, torus-bench --model) and the
# plugin and the trainer price with the same numbers. Hardened: it ends up
# in spank_torus.so.
noinst_LTLIBRARIES += topology/libtoruscost.la
topology_libtoruscost_la_SOURCES = \
	topology/torus_cost.h \
	topology/cost_model.c \
	topology/cost_params.c
topology_libtoruscost_la_CFLAGS = $(AM_CFLAGS) $(HARDEN_CFLAGS)
topology_libtoruscost_la_LIBADD = -lm

# The library is linked into both the tool and spank_torus.so, so it is
# built with the plugin's hardening flags. It does not link libslurm itself:
# the tool adds $(SLURM_LIBS), the plugin borrows srun/slurmstepd's copy.
noinst_LTLIBRARIES += topology/libtoruslayout.la
topology_libtoruslayout_la_SOURCES = \
	topology/torus_layout.h \
	topology/internal.h \
	topology/spec.c \
	topology/names.c \
	topology/switchmap.c \
	topology/coords.c \
	topology/yaml.c \
	topology/plugstack.c \
	topology/layout.c
topology_libtoruslayout_la_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CFLAGS) $(YAML_CFLAGS)
topology_libtoruslayout_la_CFLAGS = $(AM_CFLAGS) $(HARDEN_CFLAGS)
topology_libtoruslayout_la_LIBADD = topology/libtoruscost.la common/libtoruscommon.la $(YAML_LIBS) -lm

TOPOLOGY_TEST_LDADD = topology/libtoruslayout.la $(SLURM_LIBS) $(CHECK_LIBS) -lm

check_PROGRAMS += tests/unit/test_layout tests/unit/test_layout_parse tests/unit/test_layout_topo
TESTS += tests/unit/test_layout tests/unit/test_layout_parse tests/unit/test_layout_topo
tests_unit_test_layout_SOURCES = tests/unit/test_layout.c
tests_unit_test_layout_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(SLURM_CFLAGS)
tests_unit_test_layout_LDADD = $(TOPOLOGY_TEST_LDADD)
tests_unit_test_layout_parse_SOURCES = tests/unit/test_layout_parse.c
tests_unit_test_layout_parse_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(SLURM_CFLAGS)
tests_unit_test_layout_parse_LDADD = $(TOPOLOGY_TEST_LDADD)
# block, topology.yaml, torus3d/ring: held-out shapes.
tests_unit_test_layout_topo_SOURCES = tests/unit/test_layout_topo.c
tests_unit_test_layout_topo_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(SLURM_CFLAGS)
tests_unit_test_layout_topo_LDADD = $(TOPOLOGY_TEST_LDADD)

# One model for both consumers: the plugin's grid and tcomm's hybrid pick
# move together (links libtcomm too, hence TCOMM_*, from trainer/comm).
check_PROGRAMS += tests/unit/test_cost_model
TESTS += tests/unit/test_cost_model
tests_unit_test_cost_model_SOURCES = tests/unit/test_cost_model.c
tests_unit_test_cost_model_CPPFLAGS = $(TCOMM_CPPFLAGS) $(SLURM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_cost_model_LDADD = topology/libtoruslayout.la $(TCOMM_LIBS) $(SLURM_LIBS) \
	$(CHECK_LIBS) -lm

# The real 4096 x 8 number: tests/bench/bench_layout (built, not run, by check).
check_PROGRAMS += tests/bench/bench_layout
tests_bench_bench_layout_SOURCES = tests/bench/bench_layout.c
tests_bench_bench_layout_LDADD = topology/libtoruslayout.la $(SLURM_LIBS) -lm

# torus-layout: the admin/debugging tool (man page: docs/man/torus-layout.1.in,
# built from its --help by docs/man/local.mk).
bin_PROGRAMS += topology/torus-layout
topology_torus_layout_SOURCES = topology/torus-layout.c topology/report.c topology/report.h
topology_torus_layout_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CFLAGS)
topology_torus_layout_LDADD = topology/libtoruslayout.la $(SLURM_LIBS) -lm
dist_doc_DATA += docs/env-contract.md
TESTS += tests/unit/torus_layout_cli.sh tests/unit/torus_layout_plugstack.sh
EXTRA_DIST += tests/unit/torus_layout_cli.sh tests/unit/torus_layout_plugstack.sh \
	tests/integration/torus_check.py tests/bench/comm/twolevel.sh

# libFuzzer target for the spec, plugstack-argument, tasks-per-node,
# SLURM_TOPOLOGY_ADDR, topology.conf and cost parsers. Built and run only by
# hand (needs clang), never by `make` or CI:
#   make fuzz-parsers && make fuzz-run FUZZ_SECONDS=60
FUZZ_CC = clang
FUZZ_CFLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_SECONDS = 60
FUZZ_SRCS = tests/fuzz/fuzz_parsers.c plugins/args.c topology/plugstack.c topology/spec.c topology/cost_model.c \
	topology/cost_params.c common/torus_error.c \
	topology/names.c topology/switchmap.c topology/coords.c topology/yaml.c topology/layout.c
FUZZ_SEEDS = tests/fuzz/corpus/spec-auto tests/fuzz/corpus/spec-4x8 tests/fuzz/corpus/args \
	tests/fuzz/corpus/tasks tests/fuzz/corpus/addr tests/fuzz/corpus/topo tests/fuzz/corpus/cost \
	tests/fuzz/corpus/block tests/fuzz/corpus/yaml tests/fuzz/corpus/torus3d \
	tests/fuzz/corpus/yaml-deep tests/fuzz/corpus/yaml-deep-ok
EXTRA_DIST += tests/fuzz/fuzz_parsers.c tests/fuzz/lsan.supp $(FUZZ_SEEDS)
fuzz-parsers: $(FUZZ_SRCS:%=$(top_srcdir)/%) topology/torus_layout.h topology/torus_cost.h \
		plugins/torus_plugin.h common/torus_error.h
	$(MKDIR_P) tests/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -D_GNU_SOURCE -I$(top_srcdir) -I$(top_builddir) $(SLURM_CFLAGS) \
		$(FUZZ_SRCS:%=$(top_srcdir)/%) -o tests/fuzz/fuzz_parsers $(SLURM_LIBS) $(YAML_LIBS) -lm
# Work corpus in the build tree; the seeds in the source tree stay read-only.
fuzz-run: fuzz-parsers
	$(MKDIR_P) tests/fuzz/work
	LSAN_OPTIONS=suppressions=$(top_srcdir)/tests/fuzz/lsan.supp tests/fuzz/fuzz_parsers -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
		-rss_limit_mb=2048 tests/fuzz/work $(top_srcdir)/tests/fuzz/corpus
CLEANFILES += tests/fuzz/fuzz_parsers
.PHONY: fuzz-parsers fuzz-run
