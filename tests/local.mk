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

TESTS += \
	tests/integration/configure_errors.sh \
	tests/integration/jobs_pack.sh \
	tests/integration/jobs_imagenet.sh \
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
