# trainer/comm/local.mk: libtcomm (the collectives library) and its tests.
# Its layers, lowest first, each including only the ones below it (checked
# by tests/unit/include_layers.sh): the public headers (tcomm*.h) and the
# cost model; core/ (communicator state, errors, buffers, wire kernels);
# transport/ (MPI, node shared memory, PMIx exchange, NCCL); algo/ (ring,
# hier, torus2d, pipeline, in-place sums over MPI and shared memory, and
# nccl_*: the same algorithms as NCCL collectives); fusion/ (buckets, comm
# thread); bootstrap/ (tcomm_init, start-up watchdog, link probe); api/
# (libtoruscomm, the wire kernels for the Python hooks). The torus-bench
# tool is trainer/bench/.

# The wire kernels and the names of the public API: the part of libtcomm
# that needs neither MPI nor PMIx, apart so that libtoruscomm below can
# carry it alone (a convenience library goes whole into a shared one).
noinst_LTLIBRARIES += trainer/comm/libtcomm_wire.la
trainer_comm_libtcomm_wire_la_SOURCES = \
	trainer/comm/core/names.c \
	trainer/comm/core/wire.h \
	trainer/comm/core/wire_math.h \
	trainer/comm/core/wire_isa.h \
	trainer/comm/core/wire.c
trainer_comm_libtcomm_wire_la_CFLAGS = $(AM_CFLAGS) -O2 $(VECTORIZE_CFLAGS)

# libtoruscomm: the wire kernels behind a narrow, versioned C API (api/,
# libtcomm's top layer), installed as a shared library in $(pkglibdir) for
# the Python package's DDP hooks (python/torus/_lib.py loads it with
# ctypes). Only the tcomm_api_* symbols are exported.
pkglib_LTLIBRARIES += trainer/comm/libtoruscomm.la
trainer_comm_libtoruscomm_la_SOURCES = trainer/comm/api/tcomm_api.h \
	trainer/comm/api/tcomm_api.c
trainer_comm_libtoruscomm_la_LIBADD = trainer/comm/libtcomm_wire.la
trainer_comm_libtoruscomm_la_LDFLAGS = -version-info 1:0:0 \
	-export-symbols-regex '^tcomm_api_'

noinst_LTLIBRARIES += trainer/comm/libtcomm.la
trainer_comm_libtcomm_la_SOURCES = \
	trainer/comm/tcomm.h \
	trainer/comm/tcomm_fusion.h \
	trainer/comm/core/model.h \
	trainer/comm/core/model.c \
	trainer/comm/core/layout_env.h \
	trainer/comm/core/layout_env.c \
	trainer/comm/core/error.h \
	trainer/comm/core/comm.h \
	trainer/comm/core/buffer.c \
	trainer/comm/core/pick.c \
	trainer/comm/core/fold.c \
	trainer/comm/core/route.h \
	trainer/comm/transport/transport.h \
	trainer/comm/transport/mpi.c \
	trainer/comm/transport/shm.c \
	trainer/comm/transport/shm_win.c \
	trainer/comm/transport/guard.c \
	trainer/comm/transport/lost.c \
	trainer/comm/transport/pmix.c \
	trainer/comm/algo/algo.h \
	trainer/comm/algo/ring.c \
	trainer/comm/algo/hier.c \
	trainer/comm/algo/torus2d.c \
	trainer/comm/algo/pipeline.c \
	trainer/comm/algo/allreduce.c \
	trainer/comm/algo/seg_walk.c \
	trainer/comm/algo/segs.c \
	trainer/comm/algo/shared_grads.c \
	trainer/comm/fusion/plan.h \
	trainer/comm/fusion/plan.c \
	trainer/comm/fusion/fusion.c \
	trainer/comm/fusion/theta.h \
	trainer/comm/fusion/theta.c \
	trainer/comm/bootstrap/bootstrap.h \
	trainer/comm/bootstrap/init.c \
	trainer/comm/bootstrap/watchdog.c \
	trainer/comm/bootstrap/probe.c
trainer_comm_libtcomm_la_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS) $(PMIX_CFLAGS)
# The wire kernels' plain loops (fp32 adds, 1/P scale, inf/nan counts, the
# fused bucket's gather) are memory-bound passes over every gradient byte;
# without the full vectoriser they stayed scalar (fused fp16 ResNet-50
# sync on 4 ranks, tests/bench/comm/node.sh, 2026-11-29: 58 ms scalar
# against 36 ms vectorised).
trainer_comm_libtcomm_la_CFLAGS = $(AM_CFLAGS) -O2 $(VECTORIZE_CFLAGS)
# The one cost model (hybrid, torus-bench --model) is topology/'s, without Slurm.
trainer_comm_libtcomm_la_LIBADD = trainer/comm/libtcomm_wire.la \
	topology/libtoruscost.la common/libtoruscommon.la \
	$(MPI_LIBS) $(PMIX_LIBS) -lpthread -lm
noinst_HEADERS += trainer/comm/transport/nccl_kernels.h
EXTRA_DIST += trainer/comm/transport/nccl_kernels.cu

# The NCCL transport and the algorithms over it (built into libtcomm_gpu
# below where configure finds NCCL, else only shipped).
TCOMM_NCCL_FILES = trainer/comm/tcomm_nccl.h \
	trainer/comm/transport/nccl_transport.h trainer/comm/transport/nccl.c \
	trainer/comm/algo/nccl_allreduce.c trainer/comm/fusion/gpu_nccl.c

# The device fusion and its staged path (the NCCL path, gpu_nccl.c, is one
# of TCOMM_NCCL_FILES).
TCOMM_GPU_FILES = trainer/comm/tcomm_gpu.h trainer/comm/fusion/gpu_path.h \
	trainer/comm/fusion/gpu_fusion.c trainer/comm/fusion/gpu_staged.c

# The device-memory gradient exchange (tcomm_gpu.h: NCCL when found, else
# the staged MPI path) and the NCCL transport, apart from libtcomm so that
# libtcomm and the programs linking it link no CUDA library: the cuda
# backend's module (trainer/local.mk) carries them, and so do the GPU
# checks that link them directly. Built wherever configure finds CUDA (and
# NCCL for the transport), GPU or not; the NCCL kernels are a libtool
# object from nvcc (Makefile.am's .cu.lo rule, warnings as errors).
if HAVE_CUDA
noinst_LTLIBRARIES += trainer/comm/libtcomm_gpu.la
trainer_comm_libtcomm_gpu_la_SOURCES = $(TCOMM_GPU_FILES)
trainer_comm_libtcomm_gpu_la_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS) \
	$(PMIX_CFLAGS) $(CUDA_CFLAGS)
trainer_comm_libtcomm_gpu_la_LIBADD = $(CUDA_LIBS)
if HAVE_NCCL
trainer_comm_libtcomm_gpu_la_SOURCES += $(TCOMM_NCCL_FILES)
trainer_comm_libtcomm_gpu_la_LIBADD += trainer/comm/transport/nccl_kernels.lo \
	$(NCCL_LIBS) -lstdc++
CLEANFILES += trainer/comm/transport/nccl_kernels.lo \
	trainer/comm/transport/nccl_kernels.o trainer/comm/transport/nccl_kernels.pic.o
trainer/comm/transport/nccl_kernels.lo: trainer/comm/transport/nccl_kernels.h \
	trainer/comm/core/wire_math.h
else
EXTRA_DIST += $(TCOMM_NCCL_FILES)
endif
else
EXTRA_DIST += $(TCOMM_GPU_FILES) $(TCOMM_NCCL_FILES)
endif
# What a GPU check that uses tcomm_gpu or the NCCL transport links.
TCOMM_GPU_LIBS = trainer/comm/libtcomm_gpu.la

# What a program that uses libtcomm links.
TCOMM_LIBS = trainer/comm/libtcomm.la $(MPI_LIBS) $(PMIX_LIBS) -lpthread -lm
TCOMM_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS) $(PMIX_CFLAGS) $(CUDA_CFLAGS)

# ------------------------------------------------------------------ tests
COMM_UNIT_TESTS = tests/unit/test_comm_layout tests/unit/test_comm_wire \
	tests/unit/test_comm_fusion tests/unit/test_comm_model \
	tests/unit/test_comm_plan tests/unit/test_comm_api
check_PROGRAMS += $(COMM_UNIT_TESTS)
TESTS += $(COMM_UNIT_TESTS)
tests_unit_test_comm_layout_SOURCES = tests/unit/test_comm_layout.c
tests_unit_test_comm_layout_CPPFLAGS = $(TCOMM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_layout_LDADD = $(TCOMM_LIBS) $(CHECK_LIBS)
tests_unit_test_comm_wire_SOURCES = tests/unit/test_comm_wire.c
tests_unit_test_comm_wire_CPPFLAGS = $(TCOMM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_wire_LDADD = $(TCOMM_LIBS) $(CHECK_LIBS)
# Linked to the shared library itself, as the Python hooks load it.
tests_unit_test_comm_api_SOURCES = tests/unit/test_comm_api.c
tests_unit_test_comm_api_CPPFLAGS = $(AM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_api_LDADD = trainer/comm/libtoruscomm.la $(CHECK_LIBS) -ldl
tests_unit_test_comm_fusion_SOURCES = tests/unit/test_comm_fusion.c
tests_unit_test_comm_fusion_CPPFLAGS = $(TCOMM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_fusion_LDADD = $(TCOMM_LIBS) $(CHECK_LIBS)
tests_unit_test_comm_plan_SOURCES = tests/unit/test_comm_plan.c
tests_unit_test_comm_plan_CPPFLAGS = $(TCOMM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_plan_LDADD = $(TCOMM_LIBS) $(CHECK_LIBS)
tests_unit_test_comm_model_SOURCES = tests/unit/test_comm_model.c
tests_unit_test_comm_model_CPPFLAGS = $(TCOMM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_model_LDADD = $(TCOMM_LIBS) $(CHECK_LIBS)

# The checks compare against torus-bench's reproducible inputs
# (BENCH_TESTDATA, trainer/bench/local.mk).
# The correctness driver the comm_*.sh tests launch under mpirun / srun.
check_PROGRAMS += tests/integration/comm_check
tests_integration_comm_check_SOURCES = tests/integration/comm_check.c $(BENCH_TESTDATA)
tests_integration_comm_check_CPPFLAGS = $(TCOMM_CPPFLAGS)
tests_integration_comm_check_LDADD = $(TCOMM_LIBS)
check_PROGRAMS += tests/integration/comm_fault_check
tests_integration_comm_fault_check_SOURCES = tests/integration/comm_fault_check.c
tests_integration_comm_fault_check_CPPFLAGS = $(TCOMM_CPPFLAGS)
tests_integration_comm_fault_check_LDADD = $(TCOMM_LIBS)
check_PROGRAMS += tests/integration/comm_fusion_check
tests_integration_comm_fusion_check_SOURCES = tests/integration/comm_fusion_check.c $(BENCH_TESTDATA)
tests_integration_comm_fusion_check_CPPFLAGS = $(TCOMM_CPPFLAGS)
tests_integration_comm_fusion_check_LDADD = $(TCOMM_LIBS)

# The device-memory fusion on one rank: error paths everywhere CUDA is
# built, both paths where a GPU is (tests/gpu/run).
if HAVE_CUDA
check_PROGRAMS += tests/unit/test_comm_gpu
TESTS += tests/unit/test_comm_gpu
tests_unit_test_comm_gpu_SOURCES = tests/unit/test_comm_gpu.c
tests_unit_test_comm_gpu_CPPFLAGS = $(TCOMM_CPPFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_gpu_LDADD = $(TCOMM_GPU_LIBS) $(TCOMM_LIBS) $(CHECK_LIBS)
else
EXTRA_DIST += tests/unit/test_comm_gpu.c
endif

if HAVE_NCCL
check_PROGRAMS += tests/integration/comm_nccl_check
tests_integration_comm_nccl_check_SOURCES = tests/integration/comm_nccl_check.c $(BENCH_TESTDATA)
tests_integration_comm_nccl_check_CPPFLAGS = $(TCOMM_CPPFLAGS)
tests_integration_comm_nccl_check_LDADD = $(TCOMM_GPU_LIBS) $(TCOMM_LIBS)
else
EXTRA_DIST += tests/integration/comm_nccl_check.c
endif

COMM_SH_TESTS = \
	tests/integration/comm_allreduce.sh \
	tests/integration/comm_env.sh \
	tests/integration/comm_fusion.sh \
	tests/integration/comm_fault.sh \
	tests/integration/comm_fault_calls.sh \
	tests/integration/comm_bench.sh \
	tests/integration/comm_nccl.sh \
	tests/integration/comm_cluster.sh
TESTS += $(COMM_SH_TESTS)
EXTRA_DIST += $(COMM_SH_TESTS) tests/integration/comm_lib.sh

# Design notes and the by-hand benchmarks (numbers go in the issue note).
dist_doc_DATA += docs/comm.md
EXTRA_DIST += tests/bench/comm/node.sh tests/bench/comm/netns.sh tests/bench/comm/ddp_gloo_resnet50.py \
	tests/bench/comm/chain.awk tests/bench/comm/tbf_goodput.sh tests/bench/comm/link_ring.sh
