# plugins/local.mk: the SPANK plugin spank_torus.so (the --torus option).
# Built pyxis-style: one file per SPANK context, hardened, and a version
# script so that only the symbols Slurm looks up (slurm_spank_*, plugin_*,
# spank_*) leave the object. The layout itself is libtoruslayout (with the
# cost model, libtoruscost, and common/), all kept local by the script.
# Files call downward only: spank_torus.c -> local.c, remote.c -> step.c,
# slurm_conf.c, args.c. The plugstack-argument parser is the layout
# library's (topology/plugstack.c), shared with torus-layout --check-plugstack.

spank_LTLIBRARIES += plugins/spank_torus.la
plugins_spank_torus_la_SOURCES = \
	plugins/torus_plugin.h \
	plugins/spank_torus.c \
	plugins/args.c \
	plugins/local.c \
	plugins/remote.c \
	plugins/step.c \
	plugins/gpu.c \
	plugins/slurm_conf.c
plugins_spank_torus_la_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CFLAGS)
plugins_spank_torus_la_CFLAGS = $(AM_CFLAGS) $(HARDEN_CFLAGS)
plugins_spank_torus_la_LDFLAGS = -module -avoid-version -shared $(HARDEN_LDFLAGS) \
	-Wl,--version-script=$(top_srcdir)/plugins/spank_torus.map
# Deliberately no -lslurm: srun, sbatch and slurmstepd already carry
# libslurm's symbols (slurm_hostlist_*, and slurm_conf, read in
# plugins/slurm_conf.c only), resolved at load time.
plugins_spank_torus_la_LIBADD = topology/libtoruslayout.la
EXTRA_DIST += plugins/spank_torus.map

# Cluster tests of the plugin (each starts its own local Slurm cluster; they
# SKIP with a reason where the cluster cannot run, e.g. without root).
TESTS += \
	tests/integration/plugin_srun.sh \
	tests/integration/plugin_sbatch.sh \
	tests/integration/plugin_args.sh \
	tests/integration/plugin_uneven.sh \
	tests/integration/plugin_harden.sh \
	tests/integration/plugin_topology.sh
EXTRA_DIST += \
	tests/integration/plugin_topology.sh \
	tests/integration/plugin_srun.sh \
	tests/integration/plugin_sbatch.sh \
	tests/integration/plugin_args.sh \
	tests/integration/plugin_uneven.sh \
	tests/integration/plugin_harden.sh \
	tests/integration/plugin_lib.sh

# A hostile client for plugin_harden.sh: a SPANK plugin that rewrites the
# step's environment before spank_torus.so reads it (built, never installed).
check_LTLIBRARIES += tests/integration/plugin_forge.la
tests_integration_plugin_forge_la_SOURCES = tests/integration/plugin_forge.c
tests_integration_plugin_forge_la_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CFLAGS)
tests_integration_plugin_forge_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere

# The plugstack-argument parser is pure C: unit-tested without Slurm.
check_PROGRAMS += tests/unit/test_layout_args
TESTS += tests/unit/test_layout_args
tests_unit_test_layout_args_SOURCES = tests/unit/test_layout_args.c plugins/args.c
tests_unit_test_layout_args_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(SLURM_CFLAGS)
tests_unit_test_layout_args_LDADD = topology/libtoruslayout.la $(SLURM_LIBS) $(CHECK_LIBS) -lm

# The step checks run as root in slurmstepd on user-set variables: unit
# tests with hostile values under an address-space limit.
check_PROGRAMS += tests/unit/test_layout_step
TESTS += tests/unit/test_layout_step
tests_unit_test_layout_step_SOURCES = tests/unit/test_layout_step.c plugins/step.c
tests_unit_test_layout_step_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(SLURM_CFLAGS)
tests_unit_test_layout_step_LDADD = topology/libtoruslayout.la $(SLURM_LIBS) $(CHECK_LIBS) -lm

# GPU and rail choice per task (TORUS_LOCAL_GPU, nics=): pure, unit-tested.
check_PROGRAMS += tests/unit/test_plugin_gpu
TESTS += tests/unit/test_plugin_gpu
tests_unit_test_plugin_gpu_SOURCES = tests/unit/test_plugin_gpu.c plugins/gpu.c plugins/args.c
tests_unit_test_plugin_gpu_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(SLURM_CFLAGS)
tests_unit_test_plugin_gpu_LDADD = topology/libtoruslayout.la $(SLURM_LIBS) $(CHECK_LIBS) -lm
