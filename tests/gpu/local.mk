# tests/gpu/local.mk: the self-contained GPU bundle (`make gpu-bundle`,
# tools/gpu-bundle) and its bare-node test.
#
# The bundle's programs are relinked from the same objects with
# $ORIGIN/../lib in their search path, so the installed programs keep
# their plain one; tools/gpu-bundle then makes it their only search path,
# as a DT_RPATH (tools/elf-rpath: unlike a DT_RUNPATH it also finds the
# dependencies of the bundled libraries, so no LD_LIBRARY_PATH is needed
# for them). The bundle carries every shared library they need that is
# neither glibc, libstdc++/libgcc_s nor CUDA; run-gpu finds CUDA, cuBLAS,
# cuDNN 9 and NCCL 2 on the node at run time.
BUNDLE_NAME = torus-gpu-$(PACKAGE_VERSION)
BUNDLE_TAR = $(BUNDLE_NAME)-x86_64.tar.xz
BUNDLE_RPATH = -Wl,-rpath,'$$ORIGIN/../lib'
EXTRA_DIST += tools/gpu-bundle tools/elf-rpath tests/gpu/run-gpu tests/gpu/bundle_bare.sh \
	tests/gpu/run_gpu_rows.sh tests/gpu/run_gpu_rules.sh \
	tests/gpu/fixtures/ab_bn_ex_zero.txt tests/gpu/fixtures/ab_bn_fallback.txt \
	tests/gpu/fixtures/ab_counter_missing.txt tests/gpu/fixtures/ab_crashed.txt \
	tests/gpu/fixtures/ab_graph_off.txt tests/gpu/fixtures/ab_no_fastpath.txt \
	tests/gpu/fixtures/ab_not_u8.txt tests/gpu/fixtures/ab_on_cached.txt \
	tests/gpu/fixtures/ab_on_tuned.txt tests/gpu/fixtures/ab_replay_zero.txt \
	tests/gpu/fixtures/ab_tune_fellback.txt tests/gpu/fixtures/ab_tune_off.txt \
	tests/gpu/fixtures/cuda_check.txt tests/gpu/fixtures/decode_train.txt
# The bundle on a bare node (mount namespace); run-gpu's rows, limits and
# exit codes against stand-in checks and a stand-in driver; its plan and
# rules on recorded outputs (no GPU needed).
TESTS += tests/gpu/bundle_bare.sh tests/gpu/run_gpu_rows.sh tests/gpu/run_gpu_rules.sh

# Whether the driver counts a device (run-gpu's "no GPU"): no CUDA needed
# to build it, so it is built and tested everywhere and always bundled.
check_PROGRAMS += tests/gpu/gpu_count
tests_gpu_gpu_count_SOURCES = tests/gpu/gpu_count.c
tests_gpu_gpu_count_LDADD = -ldl
# A stand-in for libcuda.so.1 for run_gpu_rows.sh (never installed).
check_LTLIBRARIES += tests/gpu/fakecuda.la
tests_gpu_fakecuda_la_SOURCES = tests/gpu/fake_libcuda.c
tests_gpu_fakecuda_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere

if HAVE_CUDNN
EXTRA_PROGRAMS += bundle/torus-train bundle/torus-bench bundle/torus-data-bench \
	bundle/cuda_check bundle/optim_check bundle/gpu_smoke bundle/test_comm_gpu \
	bundle/teng_dump bundle/gpu_count
bundle_gpu_count_SOURCES =
bundle_gpu_count_DEPENDENCIES = $(tests_gpu_gpu_count_OBJECTS)
bundle_gpu_count_LDFLAGS = $(BUNDLE_RPATH)
bundle_gpu_count_LDADD = $(tests_gpu_gpu_count_OBJECTS) $(tests_gpu_gpu_count_LDADD)
bundle_torus_train_SOURCES =
bundle_torus_train_DEPENDENCIES = $(trainer_torus_train_OBJECTS) $(trainer_torus_train_DEPENDENCIES)
bundle_torus_train_LDFLAGS = $(trainer_torus_train_LDFLAGS) $(BUNDLE_RPATH)
bundle_torus_train_LDADD = $(trainer_torus_train_OBJECTS) $(trainer_torus_train_LDADD)
bundle_torus_bench_SOURCES =
bundle_torus_bench_DEPENDENCIES = $(trainer_bench_torus_bench_OBJECTS) $(trainer_bench_torus_bench_DEPENDENCIES)
bundle_torus_bench_LDFLAGS = $(BUNDLE_RPATH)
bundle_torus_bench_LDADD = $(trainer_bench_torus_bench_OBJECTS) $(trainer_bench_torus_bench_LDADD)
bundle_torus_data_bench_SOURCES =
bundle_torus_data_bench_DEPENDENCIES = $(data_torus_data_bench_OBJECTS) $(data_torus_data_bench_DEPENDENCIES)
bundle_torus_data_bench_LDFLAGS = $(BUNDLE_RPATH)
bundle_torus_data_bench_LDADD = $(data_torus_data_bench_OBJECTS) $(data_torus_data_bench_LDADD)
bundle_cuda_check_SOURCES =
bundle_cuda_check_DEPENDENCIES = $(tests_gpu_cuda_check_OBJECTS) $(tests_gpu_cuda_check_DEPENDENCIES)
bundle_cuda_check_LDFLAGS = $(BUNDLE_RPATH)
bundle_cuda_check_LDADD = $(tests_gpu_cuda_check_OBJECTS) $(tests_gpu_cuda_check_LDADD)
bundle_optim_check_SOURCES =
bundle_optim_check_DEPENDENCIES = $(tests_gpu_optim_check_OBJECTS) $(tests_gpu_optim_check_DEPENDENCIES)
bundle_optim_check_LDFLAGS = $(BUNDLE_RPATH)
bundle_optim_check_LDADD = $(tests_gpu_optim_check_OBJECTS) $(tests_gpu_optim_check_LDADD)
bundle_gpu_smoke_SOURCES =
bundle_gpu_smoke_DEPENDENCIES = $(tests_gpu_gpu_smoke_OBJECTS) $(tests_gpu_gpu_smoke_DEPENDENCIES)
bundle_gpu_smoke_LDFLAGS = $(BUNDLE_RPATH)
bundle_gpu_smoke_LDADD = $(tests_gpu_gpu_smoke_OBJECTS) $(tests_gpu_gpu_smoke_LDADD)
bundle_teng_dump_SOURCES =
bundle_teng_dump_DEPENDENCIES = $(tests_oracle_teng_dump_OBJECTS) $(tests_oracle_teng_dump_DEPENDENCIES)
bundle_teng_dump_LDFLAGS = $(tests_oracle_teng_dump_LDFLAGS) $(BUNDLE_RPATH)
bundle_teng_dump_LDADD = $(tests_oracle_teng_dump_OBJECTS) $(tests_oracle_teng_dump_LDADD)
bundle_test_comm_gpu_SOURCES =
bundle_test_comm_gpu_DEPENDENCIES = $(tests_unit_test_comm_gpu_OBJECTS) $(tests_unit_test_comm_gpu_DEPENDENCIES)
bundle_test_comm_gpu_LDFLAGS = $(BUNDLE_RPATH)
bundle_test_comm_gpu_LDADD = $(tests_unit_test_comm_gpu_OBJECTS) $(tests_unit_test_comm_gpu_LDADD)
BUNDLE_PROGS = bundle/torus-train bundle/torus-bench bundle/torus-data-bench \
	bundle/cuda_check bundle/optim_check bundle/gpu_smoke bundle/test_comm_gpu \
	bundle/teng_dump bundle/gpu_count
if HAVE_NCCL
EXTRA_PROGRAMS += bundle/comm_nccl_check
bundle_comm_nccl_check_SOURCES =
bundle_comm_nccl_check_DEPENDENCIES = $(tests_integration_comm_nccl_check_OBJECTS) $(tests_integration_comm_nccl_check_DEPENDENCIES)
bundle_comm_nccl_check_LDFLAGS = $(BUNDLE_RPATH)
bundle_comm_nccl_check_LDADD = $(tests_integration_comm_nccl_check_OBJECTS) \
	$(tests_integration_comm_nccl_check_LDADD)
BUNDLE_PROGS += bundle/comm_nccl_check
endif

gpu-bundle: $(BUNDLE_TAR)
$(BUNDLE_TAR): $(BUNDLE_PROGS) trainer/backends/cuda/torus_cuda.la data/torus-pack \
		$(srcdir)/tools/gpu-bundle $(srcdir)/tools/elf-rpath $(srcdir)/tests/gpu/run-gpu \
		$(srcdir)/tests/gpu/gpu_exchange.sh $(srcdir)/tests/oracle/oracle-check
	$(AM_V_GEN)$(SHELL) $(srcdir)/tools/gpu-bundle --srcdir '$(srcdir)' \
		--name '$(BUNDLE_NAME)' --out '$(BUNDLE_TAR)' \
		--module trainer/backends/cuda/.libs/torus_cuda.so \
		--pack data/torus-pack $(BUNDLE_PROGS)
else
gpu-bundle:
	@echo "gpu-bundle: configure found no CUDA with cuDNN: there is no cuda module to bundle" >&2; exit 1
endif
.PHONY: gpu-bundle
CLEANFILES += $(BUNDLE_TAR) bundle_bare.make.log
clean-local: clean-gpu-bundle
clean-gpu-bundle:
	-rm -rf bundle gpu-bundle.stage
.PHONY: clean-gpu-bundle
