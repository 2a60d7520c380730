# trainer/sweep/local.mk: torus-sweep, the batch-size sweep (steps to a
# target test top-1 against the global batch, per optimizer recipe, as a
# job array of torus-train runs; see docs/batch-science.md), its library
# (plan, results, regimes, report) and tests. It runs torus-train as a
# program, so it links nothing of the trainer.

noinst_LTLIBRARIES += trainer/sweep/libtsweep.la
trainer_sweep_libtsweep_la_SOURCES = trainer/sweep/tsweep.h \
	trainer/sweep/plan.c trainer/sweep/results.c trainer/sweep/regime.c \
	trainer/sweep/report.c trainer/sweep/run.c trainer/sweep/outcome.c \
	trainer/sweep/merge.c
trainer_sweep_libtsweep_la_LIBADD = common/libtoruscommon.la -lm

bin_PROGRAMS += trainer/sweep/torus-sweep
dist_doc_DATA += docs/batch-science.md docs/batch-science.png docs/batch-science-65.png \
	docs/batch-science-resnet8.png docs/batch-science-resnet8-86.png \
	docs/batch-science-resnet8-28px.png docs/batch-science-resnet8-28px-86.png \
	docs/batch-science-resnet8-quarter.png docs/batch-science-resnet8-eighth.png
# The sweeps behind its ResNet section (plan, results, the tasks'
# evaluations), which the doc names and its report redraws from.
EXTRA_DIST += docs/batch-science
trainer_sweep_torus_sweep_SOURCES = trainer/sweep/torus-sweep.c
trainer_sweep_torus_sweep_LDADD = trainer/sweep/libtsweep.la -lm

# Regime detection on synthetic curves (perfect, bending, flat), the plan
# and results files against hostile lines (errors name file:line).
check_PROGRAMS += tests/unit/test_sweep
TESTS += tests/unit/test_sweep
tests_unit_test_sweep_SOURCES = tests/unit/test_sweep.c
tests_unit_test_sweep_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_sweep_LDADD = trainer/sweep/libtsweep.la $(CHECK_LIBS) -lm

# The report of a sweep where no batch reached the target (no cluster).
TESTS += tests/integration/sweep_report.sh
EXTRA_DIST += tests/integration/sweep_report.sh

# The tables of docs/batch-science.md are what the report prints over the
# committed sweeps (no cluster).
TESTS += tests/integration/sweep_doc.sh
EXTRA_DIST += tests/integration/sweep_doc.sh

# A task that blows up ends "diverged" with the plan's --diverge-loss,
# spends its budget without it (no cluster).
TESTS += tests/integration/sweep_diverge.sh
EXTRA_DIST += tests/integration/sweep_diverge.sh

# A two-batch sweep as a job array on the local Slurm cluster
# (jobs/sweep.sbatch): results, resume, the PNG.
TESTS += tests/integration/sweep_cluster.sh
EXTRA_DIST += tests/integration/sweep_cluster.sh \
	tests/bench/sweep/README.md tests/bench/sweep/run.sh \
	tests/bench/sweep/fmnist_subset.sh tests/bench/sweep/resnet.sh

# libFuzzer target for the JSON readers (tests/fuzz/fuzz_json.c): the
# results file, a task's metrics as the sweep reads them, and torus_json's
# parser and getters, all built with clang and the sanitizers (json-c
# itself links as installed). `make fuzz-smoke` runs it; by hand:
#   make fuzz-json && tests/fuzz/fuzz_json -max_total_time=60 \
#       tests/fuzz/corpus-json
FUZZ_JSON_SRCS = tests/fuzz/fuzz_json.c trainer/sweep/plan.c \
	trainer/sweep/results.c trainer/sweep/outcome.c \
	common/torus_error.c common/torus_json.c
EXTRA_DIST += tests/fuzz/fuzz_json.c tests/fuzz/corpus-json
fuzz-json: $(FUZZ_JSON_SRCS:%=$(top_srcdir)/%) trainer/sweep/tsweep.h \
		common/torus_json.h common/torus_error.h
	$(MKDIR_P) tests/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -D_GNU_SOURCE -I$(top_srcdir) \
		-I$(top_builddir) $(JSONC_CFLAGS) \
		$(FUZZ_JSON_SRCS:%=$(top_srcdir)/%) -o tests/fuzz/fuzz_json \
		$(JSONC_LIBS) -lm
CLEANFILES += tests/fuzz/fuzz_json
.PHONY: fuzz-json
