# trainer/comm/local.mk: libtcomm (PMIx bootstrap, MPI/NCCL backends, the
# all-reduce algorithms, tensor fusion), the torus-bench tool, and their tests.

noinst_LTLIBRARIES += trainer/comm/libtcomm.la
trainer_comm_libtcomm_la_SOURCES = \
	trainer/comm/tcomm.h \
	trainer/comm/tcomm_internal.h \
	trainer/comm/error.c \
	trainer/comm/layout_env.h \
	trainer/comm/layout_env.c \
	trainer/comm/bootstrap.c \
	trainer/comm/startup_watchdog.c \
	trainer/comm/pmix_exchange.c \
	trainer/comm/backend_mpi.c \
	trainer/comm/wire_isa.h \
	trainer/comm/wire.c \
	trainer/comm/algo_ring.c \
	trainer/comm/shm_node.c \
	trainer/comm/algo_torus2d.c \
	trainer/comm/algo_hier.c \
	trainer/comm/pipeline.c \
	trainer/comm/algo_hybrid.c \
	trainer/comm/allreduce.c \
	trainer/comm/allreduce_segs.c \
	trainer/comm/shared_grads.c \
	trainer/comm/cost_model.h \
	trainer/comm/cost_model.c \
	trainer/comm/probe.c \
	trainer/comm/tcomm_fusion.h \
	trainer/comm/fusion.c \
	trainer/comm/testdata.h \
	trainer/comm/testdata.c \
	trainer/comm/resnet50_shapes.h \
	trainer/comm/resnet50_shapes.c
trainer_comm_libtcomm_la_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS) $(PMIX_CFLAGS) $(CUDA_CFLAGS)
# The wire kernels' plain loops (fp32 adds, 1/P scale, inf/nan counts, the
# fused bucket's gather) are memory-bound passes over every gradient byte;
# without the full vectoriser they stayed scalar (fused ResNet-50 sync 58
# ms against 36).
trainer_comm_libtcomm_la_CFLAGS = $(AM_CFLAGS) -O2 $(VECTORIZE_CFLAGS)
# The one cost model (hybrid, torus-bench --model) is topology/'s, without Slurm.
trainer_comm_libtcomm_la_LIBADD = topology/libtoruscost.la common/libtoruscommon.la \
	$(MPI_LIBS) $(PMIX_LIBS) -lpthread -lm
noinst_HEADERS += trainer/comm/nccl_kernels.h
EXTRA_DIST += trainer/comm/nccl_kernels.cu

# The NCCL backend (device memory): compiled and linked wherever configure
# finds CUDA + NCCL, GPU or not. Its kernels are an nvcc object that every
# program linking libtcomm gets through TCOMM_LIBS.
if HAVE_NCCL
trainer_comm_libtcomm_la_SOURCES += trainer/comm/tcomm_nccl.h trainer/comm/backend_nccl.c
TCOMM_GPU_LIBS = trainer/comm/nccl_kernels.o $(NCCL_LIBS) $(CUDA_LIBS) -lstdc++
CLEANFILES += trainer/comm/nccl_kernels.o
trainer/comm/nccl_kernels.o: trainer/comm/nccl_kernels.cu trainer/comm/nccl_kernels.h
	@$(MKDIR_P) trainer/comm
	$(AM_V_GEN)$(NVCC_COMPILE) -c $(srcdir)/trainer/comm/nccl_kernels.cu -o $@
else
TCOMM_GPU_LIBS =
EXTRA_DIST += trainer/comm/tcomm_nccl.h trainer/comm/backend_nccl.c
endif

# What a program that uses libtcomm links.
TCOMM_LIBS = trainer/comm/libtcomm.la $(TCOMM_GPU_LIBS) $(MPI_LIBS) $(PMIX_LIBS) -lpthread -lm
TCOMM_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS) $(PMIX_CFLAGS) $(CUDA_CFLAGS)

# ------------------------------------------------------------------ torus-bench
bin_PROGRAMS += trainer/comm/torus-bench
trainer_comm_torus_bench_SOURCES = \
	trainer/comm/bench.h \
	trainer/comm/torus_bench.c \
	trainer/comm/bench_sweep.c \
	trainer/comm/bench_resnet50.c \
	trainer/comm/bench_model.c
trainer_comm_torus_bench_CPPFLAGS = $(TCOMM_CPPFLAGS)
trainer_comm_torus_bench_LDADD = $(TCOMM_LIBS)

# ------------------------------------------------------------------ tests
COMM_UNIT_TESTS = tests/unit/test_comm_layout tests/unit/test_comm_wire \
	tests/unit/test_comm_fusion tests/unit/test_comm_model
check_PROGRAMS += $(COMM_UNIT_TESTS)
TESTS += $(COMM_UNIT_TESTS)
tests_unit_test_comm_layout_SOURCES = tests/unit/test_comm_layout.c
tests_unit_test_comm_layout_CPPFLAGS = $(TCOMM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_layout_LDADD = $(TCOMM_LIBS) $(CHECK_LIBS)
tests_unit_test_comm_wire_SOURCES = tests/unit/test_comm_wire.c
tests_unit_test_comm_wire_CPPFLAGS = $(TCOMM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_wire_LDADD = $(TCOMM_LIBS) $(CHECK_LIBS)
tests_unit_test_comm_fusion_SOURCES = tests/unit/test_comm_fusion.c
tests_unit_test_comm_fusion_CPPFLAGS = $(TCOMM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_fusion_LDADD = $(TCOMM_LIBS) $(CHECK_LIBS)
tests_unit_test_comm_model_SOURCES = tests/unit/test_comm_model.c
tests_unit_test_comm_model_CPPFLAGS = $(TCOMM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_model_LDADD = $(TCOMM_LIBS) $(CHECK_LIBS)

# The correctness driver the comm_*.sh tests launch under mpirun / srun.
check_PROGRAMS += tests/integration/comm_check
tests_integration_comm_check_SOURCES = tests/integration/comm_check.c
tests_integration_comm_check_CPPFLAGS = $(TCOMM_CPPFLAGS)
tests_integration_comm_check_LDADD = $(TCOMM_LIBS)
check_PROGRAMS += tests/integration/comm_fault_check
tests_integration_comm_fault_check_SOURCES = tests/integration/comm_fault_check.c
tests_integration_comm_fault_check_CPPFLAGS = $(TCOMM_CPPFLAGS)
tests_integration_comm_fault_check_LDADD = $(TCOMM_LIBS)
check_PROGRAMS += tests/integration/comm_fusion_check
tests_integration_comm_fusion_check_SOURCES = tests/integration/comm_fusion_check.c
tests_integration_comm_fusion_check_CPPFLAGS = $(TCOMM_CPPFLAGS)
tests_integration_comm_fusion_check_LDADD = $(TCOMM_LIBS)

if HAVE_NCCL
check_PROGRAMS += tests/integration/comm_nccl_check
tests_integration_comm_nccl_check_SOURCES = tests/integration/comm_nccl_check.c
tests_integration_comm_nccl_check_CPPFLAGS = $(TCOMM_CPPFLAGS)
tests_integration_comm_nccl_check_LDADD = $(TCOMM_LIBS)
else
EXTRA_DIST += tests/integration/comm_nccl_check.c
endif

COMM_SH_TESTS = \
	tests/integration/comm_allreduce.sh \
	tests/integration/comm_env.sh \
	tests/integration/comm_fusion.sh \
	tests/integration/comm_fault.sh \
	tests/integration/comm_bench.sh \
	tests/integration/comm_nccl.sh \
	tests/integration/comm_cluster.sh
TESTS += $(COMM_SH_TESTS)
EXTRA_DIST += $(COMM_SH_TESTS) tests/integration/comm_lib.sh

# Design notes and the by-hand benchmarks (numbers go in the issue note).
dist_doc_DATA += docs/comm.md
EXTRA_DIST += tests/bench/comm/node.sh tests/bench/comm/netns.sh tests/bench/comm/ddp_gloo_resnet50.py
