# tests/local.mk: the lead's tests (build, local Slurm cluster, PMIx, GPU).
# Component tests live in their component's fragment.

# A PMIx client that reports rank/size/local rank/node id: used by the cluster
# tests and the smoke job, so it is built by plain `make`.
noinst_PROGRAMS += tests/integration/pmix_probe
tests_integration_pmix_probe_SOURCES = tests/integration/pmix_probe.c
tests_integration_pmix_probe_CFLAGS = $(AM_CFLAGS) $(PMIX_CFLAGS)
tests_integration_pmix_probe_LDADD = $(PMIX_LIBS)

# The include graph obeys the folder layers (no cycle, no upward include);
# the layer table is in the script.
TESTS += tests/unit/include_layers.sh
EXTRA_DIST += tests/unit/include_layers.sh
# Its sibling: no new TORUS_FAIL(-1, ...); every error carries its module's
# code.
TESTS += tests/unit/error_codes.sh
EXTRA_DIST += tests/unit/error_codes.sh
# And at link level: no two files of one folder call each other (nm over
# the libraries' objects; the known circles are listed in the script).
TESTS += tests/unit/call_circles.sh
EXTRA_DIST += tests/unit/call_circles.sh
# And no function over 80 lines in trainer/, data/, topology/, plugins/
# beyond the ones its table names.
TESTS += tests/unit/func_length.sh
EXTRA_DIST += tests/unit/func_length.sh
# And host or device is decided once: torus-train's steps and the
# exchange's interface only dispatch through their tables, and the dnnl
# backend's update calls nothing back in the engine's host kernels.
TESTS += tests/unit/update_seam.sh
EXTRA_DIST += tests/unit/update_seam.sh

# Docs that cannot drift: every path a document or comment names exists,
# every option a document shows is in the program's --help, no comment
# names an issue number. And every program keeps the command-line
# conventions (common/torus_cli.h), every job takes --help.
TESTS += tests/unit/docs_check.sh tests/unit/cli_conventions.sh
EXTRA_DIST += tests/unit/docs_check.sh tests/unit/docs_check.py tests/unit/cli_conventions.sh

TESTS += \
	tests/integration/configure_errors.sh \
	tests/integration/jobs_pack.sh \
	tests/integration/jobs_imagenet.sh \
	tests/integration/jobs_elastic.sh \
	tests/integration/jobs_gres.sh \
	tests/integration/jobs_bench.sh \
	tests/integration/plugin_build.sh \
	tests/integration/cluster_pmix.sh \
	tests/integration/cluster_netns.sh \
	tests/integration/cluster_updown.sh \
	tests/integration/cluster_backtoback.sh \
	tests/gpu/gpu_smoke.sh

EXTRA_DIST += \
	tests/integration/configure_errors.sh \
	tests/integration/jobs_pack.sh \
	tests/integration/jobs_imagenet.sh \
	tests/integration/jobs_elastic.sh \
	tests/integration/jobs_gres.sh \
	tests/integration/jobs_bench.sh \
	tests/integration/plugin_build.sh \
	tests/integration/cluster_pmix.sh \
	tests/integration/cluster_netns.sh \
	tests/integration/cluster_updown.sh \
	tests/integration/cluster_backtoback.sh \
	tests/gpu/gpu_smoke.sh \
	tests/gpu/run \
	tests/gpu/gpu_exchange.sh \
	tests/cluster/up \
	tests/cluster/down \
	tests/cluster/common.sh \
	tests/cluster/testlib.sh

# GPU smoke check: compiled and linked whenever CUDA is found (even with no
# GPU), run by tests/gpu/gpu_smoke.sh, which reports SKIP without a device.
# It tests the NCCL transport's shipped kernels: GPU_SMOKE_KERNELS names their
# source (without .cu/.h), compiled here into an object of its own, since
# trainer/comm builds its object only when NCCL is found.
GPU_SMOKE_KERNELS = trainer/comm/transport/nccl_kernels
if HAVE_CUDA
check_PROGRAMS += tests/gpu/gpu_smoke
tests_gpu_gpu_smoke_SOURCES = tests/gpu/gpu_smoke.c
tests_gpu_gpu_smoke_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS)
tests_gpu_gpu_smoke_LDADD = tests/gpu/nccl_kernels.o $(CUDNN_LIBS) $(NCCL_LIBS) \
	$(CUBLAS_LIBS) $(CUDA_LIBS) -lstdc++ -lm
tests_gpu_gpu_smoke_DEPENDENCIES = tests/gpu/nccl_kernels.o
CLEANFILES += tests/gpu/nccl_kernels.o
tests/gpu/nccl_kernels.o: $(srcdir)/$(GPU_SMOKE_KERNELS).cu $(srcdir)/$(GPU_SMOKE_KERNELS).h \
		$(srcdir)/trainer/comm/core/wire_math.h
	@$(MKDIR_P) tests/gpu
	$(AM_V_GEN)$(NVCC_COMPILE) -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
		-c $(srcdir)/$(GPU_SMOKE_KERNELS).cu -o $@
else
EXTRA_DIST += tests/gpu/gpu_smoke.c
endif

# Site deployment: build the .deb, install it, run the smoke job with the
# installed plugin and tools, purge (docs/deploy.md).
TESTS += tests/integration/deploy_deb.sh
EXTRA_DIST += tests/integration/deploy_deb.sh
TESTS += tests/unit/deploy_spec.sh
EXTRA_DIST += tests/unit/deploy_spec.sh

# Every libFuzzer target (tests/fuzz/) for FUZZ_SMOKE_SECONDS each from its
# committed seeds: fuzz_parsers (topology parsers), fuzz_data (libtdata's
# readers, the listing, names), fuzz_ckpt (the checkpoint loader), fuzz_json
# (the JSON readers: sweep results, metrics). Needs clang. CI runs the
# parsers, the checkpoint loader and the JSON readers for 5 s each
# (tests/integration/fuzz_smoke.sh; data_fuzz.sh runs fuzz_data); by hand:
#   make fuzz-smoke                 # 30 s each
FUZZ_SMOKE_SECONDS = 30
FUZZ_SMOKE_TARGETS = parsers data ckpt json
FUZZ_SMOKE_DIR = $(abs_builddir)/tests/fuzz/smoke
TESTS += tests/integration/fuzz_smoke.sh
EXTRA_DIST += tests/integration/fuzz_smoke.sh
fuzz-smoke:
	@set -e; for t in $(FUZZ_SMOKE_TARGETS); do \
	  case $$t in \
	  parsers) seeds=$(top_srcdir)/tests/fuzz/corpus;; \
	  *) seeds=$(top_srcdir)/tests/fuzz/corpus-$$t;; \
	  esac; \
	  $(MAKE) --no-print-directory fuzz-$$t; \
	  $(MKDIR_P) $(FUZZ_SMOKE_DIR)/$$t $(FUZZ_SMOKE_DIR)/$$t-tmp; \
	  echo "fuzz-smoke: fuzz_$$t for $(FUZZ_SMOKE_SECONDS) s"; \
	  LSAN_OPTIONS=suppressions=$(top_srcdir)/tests/fuzz/lsan.supp \
	    TMPDIR=$(FUZZ_SMOKE_DIR)/$$t-tmp \
	    tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SMOKE_SECONDS) \
	    -max_len=4096 -timeout=20 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix=$(FUZZ_SMOKE_DIR)/$$t/ \
	    $(FUZZ_SMOKE_DIR)/$$t $$seeds \
	    > $(FUZZ_SMOKE_DIR)/$$t.log 2>&1 \
	    || { tail -30 $(FUZZ_SMOKE_DIR)/$$t.log; exit 1; }; \
	  echo "fuzz-smoke: fuzz_$$t: $$(grep -m1 number_of_executed_units \
	    $(FUZZ_SMOKE_DIR)/$$t.log), no crash"; \
	done
# The work corpora and scratch files of a run by hand.
clean-local: clean-fuzz-smoke
clean-fuzz-smoke:
	-rm -rf tests/fuzz/smoke
.PHONY: fuzz-smoke clean-fuzz-smoke

# Reads a JSON file torus wrote back through json-c and checks its schema
# (layout, bench, metrics, results); the tests that make the files call it.
check_PROGRAMS += tests/unit/json_check
tests_unit_json_check_SOURCES = tests/unit/json_check.c
tests_unit_json_check_LDADD = common/libtoruscommon.la
# ...and refuses what it must (a field missing, retyped or out of range, a
# key twice, a cut line, an empty file), naming the file and line.
TESTS += tests/unit/json_check.sh
EXTRA_DIST += tests/unit/json_check.sh
