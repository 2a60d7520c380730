# trainer/sweep/local.mk: torus-sweep, the batch-size sweep (steps to a
# target test top-1 against the global batch, per optimizer recipe, as a
# job array of torus-train runs; see docs/batch-science.md), its library
# (plan, results, regimes, report) and tests. It runs torus-train as a
# program, so it links nothing of the trainer.

noinst_LTLIBRARIES += trainer/sweep/libtsweep.la
trainer_sweep_libtsweep_la_SOURCES = trainer/sweep/tsweep.h \
	trainer/sweep/plan.c trainer/sweep/results.c trainer/sweep/regime.c \
	trainer/sweep/report.c trainer/sweep/run.c
trainer_sweep_libtsweep_la_LIBADD = common/libtoruscommon.la -lm

bin_PROGRAMS += trainer/sweep/torus-sweep
dist_doc_DATA += docs/batch-science.md docs/batch-science.png docs/batch-science-65.png
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

# A two-batch sweep as a job array on the local Slurm cluster
# (jobs/sweep.sbatch): results, resume, the PNG.
TESTS += tests/integration/sweep_cluster.sh
EXTRA_DIST += tests/integration/sweep_cluster.sh \
	tests/bench/sweep/README.md tests/bench/sweep/run.sh \
	tests/bench/sweep/fmnist_subset.sh tests/bench/sweep/resnet.sh
