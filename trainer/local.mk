# trainer/local.mk: the training engine (tensors, layers, arenas, backend
# interface), the compute backends and their registry (oneDNN on the CPU
# today, in trainer/backends/), the models, the optimizer and
# schedules, torus-train (options, data seam, HDF5 checkpoints) and
# torus-plot, their tests and the CPU training bench. See trainer/README.md.
# (trainer/comm/ has its own fragment.)

noinst_LTLIBRARIES += trainer/libtorustrain.la
trainer_libtorustrain_la_SOURCES = \
	trainer/engine/engine.h \
	trainer/engine/graph.h \
	trainer/engine/backend.h \
	trainer/engine/internal.h \
	trainer/engine/arena.h \
	trainer/engine/arena.c \
	trainer/engine/rng.h \
	trainer/engine/rng.c \
	trainer/engine/host_kernels.h \
	trainer/engine/host_kernels.c \
	trainer/engine/net.c \
	trainer/engine/compile.c \
	trainer/engine/run.c \
	trainer/engine/backend.c \
	trainer/engine/query.c \
	trainer/engine/update.c \
	trainer/backends/backends.h \
	trainer/backends/registry.c \
	trainer/models/models.h \
	trainer/models/registry.c \
	trainer/models/resnet.c \
	trainer/models/alexnet.c \
	trainer/models/tiny.c \
	trainer/models/build.c \
	trainer/optim/optim.h \
	trainer/optim/schedule.c \
	trainer/optim/sgd.c \
	trainer/optim/loss_scale.h \
	trainer/optim/loss_scale.c \
	trainer/train/options.h \
	trainer/train/options.c \
	trainer/train/source.h \
	trainer/train/synthetic.c \
	trainer/train/checkpoint.h \
	trainer/train/checkpoint.c \
	trainer/train/state_hash.h \
	trainer/train/state_hash.c
trainer_libtorustrain_la_CPPFLAGS = $(AM_CPPFLAGS) $(DNNL_CFLAGS) $(HDF5_CFLAGS)
trainer_libtorustrain_la_LIBADD = common/libtoruscommon.la $(DNNL_LIBS) \
	$(HDF5_LIBS) -lm
if HAVE_DNNL
trainer_libtorustrain_la_SOURCES += \
	trainer/backends/dnnl/dnnl.h \
	trainer/backends/dnnl/dnnl_internal.h \
	trainer/backends/dnnl/dnnl_backend.c \
	trainer/backends/dnnl/dnnl_layers.c
else
EXTRA_DIST += \
	trainer/backends/dnnl/dnnl.h \
	trainer/backends/dnnl/dnnl_internal.h \
	trainer/backends/dnnl/dnnl_backend.c \
	trainer/backends/dnnl/dnnl_layers.c
endif

# The cuda backend's optimizer kernels (trainer/backends/cuda/, see
# cuda_optim.h): the chunk plan is plain C and goes into the library with
# CUDA; cuda_optim.cu is an nvcc object (warnings are errors under
# --enable-werror, host and device side). A program that calls
# tcuda_optim_* adds $(TCUDA_OPTIM_OBJS) to its LDADD.
TCUDA_OPTIM_HDRS = trainer/backends/cuda/cuda_optim.h \
	trainer/backends/cuda/optim_math.h trainer/backends/cuda/chunk_plan.h
noinst_HEADERS += $(TCUDA_OPTIM_HDRS)
EXTRA_DIST += trainer/backends/cuda/cuda_optim.cu
TCUDA_NVCC_WARN = $(if $(findstring -Werror,$(WARN_CFLAGS)),-Werror all-warnings \
	-Xcompiler -Wall$(comma)-Wextra$(comma)-Werror)
comma = ,
if HAVE_CUDA
trainer_libtorustrain_la_SOURCES += trainer/backends/cuda/chunk_plan.c
TCUDA_OPTIM_OBJS = trainer/backends/cuda/cuda_optim.o $(CUDA_LIBS) -lstdc++
# Built with the library, so make compiles it before any program needs it.
EXTRA_trainer_libtorustrain_la_DEPENDENCIES = trainer/backends/cuda/cuda_optim.o
CLEANFILES += trainer/backends/cuda/cuda_optim.o
trainer/backends/cuda/cuda_optim.o: $(srcdir)/trainer/backends/cuda/cuda_optim.cu \
		$(addprefix $(srcdir)/,$(TCUDA_OPTIM_HDRS))
	@$(MKDIR_P) trainer/backends/cuda
	$(AM_V_GEN)$(NVCC_COMPILE) $(TCUDA_NVCC_WARN) \
		-c $(srcdir)/trainer/backends/cuda/cuda_optim.cu -o $@
else
TCUDA_OPTIM_OBJS =
EXTRA_DIST += trainer/backends/cuda/chunk_plan.c
endif

# torus-train: the training program (one process, or ranks bootstrapped
# by PMIx exchanging gradients through libtcomm; data from libtdata).
bin_PROGRAMS += trainer/torus-train
# The packed-dataset source lives here, not in the library, so the engine
# tests need no data library.
trainer_torus_train_SOURCES = trainer/torus-train.c \
	trainer/train/tdata_source.h trainer/train/tdata_source.c
trainer_torus_train_CPPFLAGS = $(TCOMM_CPPFLAGS)
trainer_torus_train_LDADD = trainer/libtorustrain.la data/libtdata.la \
	$(TCOMM_LIBS) -lm

TRAINER_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
TRAINER_TEST_LDADD = trainer/libtorustrain.la $(CHECK_LIBS) -lm

check_PROGRAMS += tests/unit/test_engine
TESTS += tests/unit/test_engine
tests_unit_test_engine_SOURCES = tests/unit/test_engine.c \
	tests/unit/layer_harness.c tests/unit/layer_harness.h
tests_unit_test_engine_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_engine_LDADD = $(TRAINER_TEST_LDADD)

check_PROGRAMS += tests/unit/test_engine_models
TESTS += tests/unit/test_engine_models
tests_unit_test_engine_models_SOURCES = tests/unit/test_engine_models.c \
	tests/unit/layer_harness.c tests/unit/layer_harness.h
tests_unit_test_engine_models_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_engine_models_LDADD = $(TRAINER_TEST_LDADD)

check_PROGRAMS += tests/unit/test_optim
TESTS += tests/unit/test_optim
tests_unit_test_optim_SOURCES = tests/unit/test_optim.c \
	tests/unit/layer_harness.c tests/unit/layer_harness.h
tests_unit_test_optim_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_optim_LDADD = $(TRAINER_TEST_LDADD)

# Layer tests run layers on oneDNN, which configure requires.
check_PROGRAMS += tests/unit/test_layers tests/unit/test_layers_ref
TESTS += tests/unit/test_layers tests/unit/test_layers_ref
tests_unit_test_layers_SOURCES = tests/unit/test_layers.c \
	tests/unit/layer_harness.c tests/unit/layer_harness.h
tests_unit_test_layers_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_layers_LDADD = $(TRAINER_TEST_LDADD)
tests_unit_test_layers_ref_SOURCES = tests/unit/test_layers_ref.c \
	tests/unit/layer_harness.c tests/unit/layer_harness.h
tests_unit_test_layers_ref_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_layers_ref_LDADD = $(TRAINER_TEST_LDADD)

# The cuda optimizer's host side on the CPU (chunk plan, per-element maths
# against the host maths, fp16/bf16 rounding) and the loss-scale machine.
# Without CUDA the library lacks the chunk plan, so the test compiles it.
check_PROGRAMS += tests/unit/test_cuda_optim tests/unit/test_loss_scale
TESTS += tests/unit/test_cuda_optim tests/unit/test_loss_scale
tests_unit_test_cuda_optim_SOURCES = tests/unit/test_cuda_optim.c
if !HAVE_CUDA
tests_unit_test_cuda_optim_SOURCES += trainer/backends/cuda/chunk_plan.c
endif
tests_unit_test_cuda_optim_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_cuda_optim_LDADD = $(TRAINER_TEST_LDADD)
tests_unit_test_loss_scale_SOURCES = tests/unit/test_loss_scale.c
tests_unit_test_loss_scale_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_loss_scale_LDADD = $(TRAINER_TEST_LDADD)

# The GPU check of the optimizer kernels (tests/gpu/run runs it): the
# multi-tensor sums of squares and update over ResNet-50's tensors against
# the host maths, and the fp16/bf16 working copies over every fp32 pattern.
# Built wherever CUDA is found; without a device it prints SKIP.
if HAVE_CUDA
check_PROGRAMS += tests/gpu/optim_check
tests_gpu_optim_check_SOURCES = tests/gpu/optim_check.c
tests_gpu_optim_check_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS)
tests_gpu_optim_check_LDADD = trainer/libtorustrain.la $(TCUDA_OPTIM_OBJS) -lm
else
EXTRA_DIST += tests/gpu/optim_check.c
endif

# CPU training bench (built by check, run by hand: tests/bench/train/run_bench.sh).
check_PROGRAMS += tests/bench/train/bench_train
tests_bench_train_bench_train_SOURCES = tests/bench/train/bench_train.c
tests_bench_train_bench_train_LDADD = trainer/libtorustrain.la -lm
EXTRA_DIST += tests/bench/train/run_bench.sh tests/bench/train/bench_torch.py

# The command line, config file and a tiny synthetic run of torus-train.
TESTS += tests/integration/train_cli.sh
EXTRA_DIST += tests/integration/train_cli.sh

# torus-plot: loss, LR, batch and accuracy curves from the metrics (gnuplot).
dist_bin_SCRIPTS += trainer/torus-plot
TESTS += tests/integration/train_plot.sh
EXTRA_DIST += tests/integration/train_plot.sh

# Checkpoints: bitwise resume, damaged files, signals, --keep.
TESTS += tests/integration/train_resume.sh
EXTRA_DIST += tests/integration/train_resume.sh trainer/README.md

# Checkpoints that never lose a run: run ids and pruning, the configuration
# record and its check, hostile attributes (ckpt_attr forges them), stale
# temporary files; under mpirun: every rank resumes from rank 0's pick, a
# change of ranks, rank 0's slow write, --comm-timeout.
check_PROGRAMS += tests/integration/ckpt_attr
tests_integration_ckpt_attr_SOURCES = tests/integration/ckpt_attr.c
tests_integration_ckpt_attr_CPPFLAGS = $(AM_CPPFLAGS) $(HDF5_CFLAGS)
tests_integration_ckpt_attr_LDADD = $(HDF5_LIBS)
TESTS += tests/integration/train_ckpt.sh tests/integration/train_ckpt_dist.sh
EXTRA_DIST += tests/integration/train_ckpt.sh tests/integration/train_ckpt_dist.sh \
	tests/integration/train_lib.sh

# Data parallel: 2 ranks under mpirun equal 1 rank (BN-free tiny-cnn).
TESTS += tests/integration/train_dist.sh
EXTRA_DIST += tests/integration/train_dist.sh

# The launch the jobs use, on the local Slurm cluster: srun --mpi=pmix
# --torus=auto; 2 ranks equal 1, distributed evaluation and BN averaging.
TESTS += tests/integration/train_cluster.sh
EXTRA_DIST += tests/integration/train_cluster.sh tests/bench/train/fmnist_common.sh \
	tests/bench/train/fmnist_long.sh tests/bench/train/large_batch.sh
