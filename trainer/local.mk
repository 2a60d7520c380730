# trainer/local.mk: the training engine (tensors, layers, arenas, backend
# interface), the compute backends and their registry (oneDNN on the CPU
# today, in trainer/backends/), the models, the optimizer and
# schedules, torus-train (options, data seam, HDF5 checkpoints) and
# torus-plot, their tests and the CPU training bench. See trainer/README.md.
# (trainer/comm/ has its own fragment.)

noinst_LTLIBRARIES += trainer/libtorustrain.la
trainer_libtorustrain_la_SOURCES = \
	trainer/engine/teng.h \
	trainer/engine/graph.h \
	trainer/engine/backend.h \
	trainer/engine/internal.h \
	trainer/engine/arena.h \
	trainer/engine/arena.c \
	trainer/engine/rng.h \
	trainer/engine/rng.c \
	trainer/engine/host_kernels.h \
	trainer/engine/elem_math.h \
	trainer/engine/step_math.h \
	trainer/engine/host_kernels.c \
	trainer/engine/net.c \
	trainer/engine/compile.c \
	trainer/engine/run.c \
	trainer/engine/backend.c \
	trainer/engine/query.c \
	trainer/engine/update.c \
	trainer/engine/input.c \
	trainer/backends/tbackends.h \
	trainer/backends/cuda/tcuda.h \
	trainer/backends/cuda/tcuda_fastpath.h \
	trainer/backends/cuda/fastpath.c \
	trainer/backends/cuda/cuda_fuse.h \
	trainer/backends/cuda/cuda_fuse.c \
	trainer/backends/cuda/tcuda_plan.h \
	trainer/backends/cuda/cuda_plan.c \
	trainer/backends/registry.c \
	trainer/models/tmodel.h \
	trainer/models/registry.c \
	trainer/models/resnet.c \
	trainer/models/alexnet.c \
	trainer/models/tiny.c \
	trainer/models/build.c \
	trainer/optim/topt.h \
	trainer/optim/schedule.c \
	trainer/optim/sgd.c \
	trainer/optim/topt_loss_scale.h \
	trainer/optim/loss_scale.c \
	trainer/train/ttrain_error.h \
	trainer/train/ttrain_options.h \
	trainer/train/options.c \
	trainer/train/ttrain_source.h \
	trainer/train/synthetic.c \
	trainer/train/ttrain_checkpoint.h \
	trainer/train/checkpoint.c \
	trainer/train/ckpt_meta.c \
	trainer/train/ttrain_ckpt_schema.h trainer/train/ckpt_schema.c \
	trainer/train/ttrain_state_hash.h \
	trainer/train/state_hash.c \
	trainer/train/ttrain_device.h \
	trainer/train/device.c \
	trainer/train/ttrain_bn_stash.h \
	trainer/train/bn_stash.c \
	trainer/train/ttrain_metrics.h \
	trainer/train/metrics.c \
	trainer/train/ttrain_diverge.h \
	trainer/train/diverge.c \
	trainer/train/ttrain_step_graph.h \
	trainer/train/step_graph.c \
	trainer/train/ttrain_test_hooks.h \
	trainer/train/test_hooks.c
# The registry looks for loadable backend modules in $(pkglibdir).
trainer_libtorustrain_la_CPPFLAGS = $(AM_CPPFLAGS) $(DNNL_CFLAGS) $(HDF5_CFLAGS) \
	-DTORUS_PKGLIBDIR='"$(pkglibdir)"'
trainer_libtorustrain_la_LIBADD = common/libtoruscommon.la $(DNNL_LIBS) \
	$(HDF5_LIBS) -ldl -lm
if HAVE_DNNL
trainer_libtorustrain_la_SOURCES += \
	trainer/backends/dnnl/tdnnl.h \
	trainer/backends/dnnl/dnnl_internal.h \
	trainer/backends/dnnl/dnnl_util.c \
	trainer/backends/dnnl/dnnl_backend.c \
	trainer/backends/dnnl/dnnl_layers.c
else
EXTRA_DIST += \
	trainer/backends/dnnl/tdnnl.h \
	trainer/backends/dnnl/dnnl_internal.h \
	trainer/backends/dnnl/dnnl_util.c \
	trainer/backends/dnnl/dnnl_backend.c \
	trainer/backends/dnnl/dnnl_layers.c
endif

# The cuDNN/cuBLAS GPU backend (trainer/backends/cuda/): built wherever
# configure found CUDA, cuDNN and cuBLAS, GPU or not, as the loadable module
# torus_cuda.so in $(pkglibdir) (trainer/backends/cuda/tcuda.h): torus-train
# and libtorustrain link no CUDA library; the registry dlopens the module
# when a cuda backend is asked for. Its kernels are nvcc objects: the layer
# kernels (cuda_kernels.cu) and the optimizer's multi-tensor kernels behind
# tcuda_optim.h (cuda_optim.cu); libtool does not know nvcc, so each .cu
# becomes a libtool object (.lo, the suffix rule in Makefile.am).
TCUDA_C = \
	trainer/backends/cuda/tcuda.h \
	trainer/backends/cuda/cuda_internal.h \
	trainer/backends/cuda/cuda_util.c \
	trainer/backends/cuda/cuda_backend.c \
	trainer/backends/cuda/cuda_layers.c \
	trainer/backends/cuda/cuda_exec.c \
	trainer/backends/cuda/cuda_bn.c \
	trainer/backends/cuda/cuda_input.c \
	trainer/backends/cuda/cuda_graph.c \
	trainer/backends/cuda/cuda_tune_dnn.c \
	trainer/backends/cuda/cuda_module.c
TCUDA_CU = trainer/backends/cuda/cuda_kernels.cu \
	trainer/backends/cuda/cuda_stem.cu \
	trainer/backends/cuda/cuda_optim.cu
TCUDA_KHDR = trainer/backends/cuda/cuda_kernels.h \
	trainer/backends/cuda/cuda_math.h trainer/backends/cuda/cuda_layout.h \
	trainer/backends/cuda/tcuda_optim.h trainer/backends/cuda/optim_math.h \
	trainer/backends/cuda/chunk_plan.h trainer/backends/cuda/cuda_stem.h \
	trainer/backends/cuda/cuda_grid.h
TCUDA_KDEPS = $(TCUDA_KHDR) trainer/engine/teng.h \
	trainer/engine/elem_math.h trainer/engine/step_math.h common/torus_error.h \
	data/read/tdata_norm.h
# The backend's plain-C parts (the optimizer's chunk plan, the algorithm
# cache): built everywhere, so their unit tests run without CUDA. The BN
# plan and the fusion rules (cuda_fuse.c) and the plan report
# (cuda_plan.c) are in libtorustrain instead: torus-train --dry-run
# prints the plan with no CUDA library, and the module takes them from
# the program that loads it, as it takes the engine.
noinst_LTLIBRARIES += trainer/backends/cuda/libtcuda_host.la
trainer_backends_cuda_libtcuda_host_la_SOURCES = \
	trainer/backends/cuda/chunk_plan.c \
	trainer/backends/cuda/cuda_algo.h trainer/backends/cuda/cuda_algo.c \
	trainer/backends/cuda/cuda_tune.h trainer/backends/cuda/cuda_tune.c
noinst_HEADERS += $(TCUDA_KHDR) trainer/backends/cuda/tcuda.h
EXTRA_DIST += $(TCUDA_CU)
if HAVE_CUDNN
# The whole backend with its CUDA libraries: the module's body, and what
# the GPU checks (cuda_check, optim_check) link in directly.
noinst_LTLIBRARIES += trainer/backends/cuda/libtcuda.la
trainer_backends_cuda_libtcuda_la_SOURCES = $(TCUDA_C)
trainer_backends_cuda_libtcuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
TCUDA_LO = $(TCUDA_CU:.cu=.lo)
trainer_backends_cuda_libtcuda_la_LIBADD = $(TCUDA_LO) \
	trainer/backends/cuda/libtcuda_host.la $(CUDNN_LIBS) $(CUBLAS_LIBS) \
	$(NCCL_LIBS) $(CUDA_LIBS) -lstdc++
CLEANFILES += $(TCUDA_LO) $(TCUDA_CU:.cu=.o) $(TCUDA_CU:.cu=.pic.o)
$(TCUDA_LO): $(TCUDA_KDEPS)

# The module: the backend, and libtcomm's device fusion and NCCL with the
# table of their tcomm_gpu functions (train/gpu_exchange_cuda.c) that
# torus-train's gradient exchange calls. Its other symbols (the engine,
# libtcomm, torus_error) come from the program that loads it.
pkglib_LTLIBRARIES += trainer/backends/cuda/torus_cuda.la
trainer_backends_cuda_torus_cuda_la_SOURCES = trainer/train/gpu_exchange_cuda.c
trainer_backends_cuda_torus_cuda_la_CPPFLAGS = $(TCOMM_CPPFLAGS)
trainer_backends_cuda_torus_cuda_la_LDFLAGS = -module -avoid-version -shared
trainer_backends_cuda_torus_cuda_la_LIBADD = \
	trainer/backends/cuda/libtcuda.la trainer/comm/libtcomm_gpu.la
else
EXTRA_DIST += $(TCUDA_C) trainer/train/gpu_exchange_cuda.c
endif

# torus-train and the CPU programs link no CUDA library (ldd); the module
# loads into torus-train and names what is missing.
TESTS += tests/integration/cuda_module.sh
EXTRA_DIST += tests/integration/cuda_module.sh
# torus-train --dry-run prints the cuda backend's plan with no GPU.
TESTS += tests/integration/cuda_plan.sh
EXTRA_DIST += tests/integration/cuda_plan.sh

# torus-train: the training program (one process, or ranks bootstrapped
# by PMIx exchanging gradients through libtcomm; data from libtdata).
bin_PROGRAMS += trainer/torus-train
# The packed-dataset source lives here, not in the library, so the engine
# tests need no data library. libtdata comes after libtorustrain: the
# checkpoints (train/checkpoint.c) read and write their attributes through
# data/format/tdata_h5attr.h.
trainer_torus_train_SOURCES = trainer/torus-train.c \
	trainer/train/ttrain_tdata_source.h trainer/train/tdata_source.c \
	trainer/train/ttrain_exchange.h trainer/train/exchange.c \
	trainer/train/ttrain_ckpt_beat.h trainer/train/ckpt_beat.c \
	trainer/train/ttrain_ckpt_run.h trainer/train/ckpt_run.c \
	trainer/train/ttrain_input.h trainer/train/input.c \
	trainer/train/ttrain_step.h trainer/train/step.c \
	trainer/train/ttrain_dstep.h trainer/train/dstep.c \
	trainer/train/ttrain_update.h trainer/train/update.c \
	trainer/train/ttrain_report.h trainer/train/report.c \
	trainer/train/ttrain_gpu_exchange.h \
	trainer/train/ttrain_trace.h trainer/train/trace.c
trainer_torus_train_CPPFLAGS = $(TCOMM_CPPFLAGS)
# The cuda module (torus_cuda.so) resolves the engine and libtcomm against
# this program: export its symbols, and keep every object of libtorustrain,
# used here or only by the module (libtcomm's that the module uses are
# used here too; tests/integration/cuda_module.sh binds every symbol).
trainer_torus_train_LDFLAGS = -export-dynamic \
	-Wl,--whole-archive,trainer/.libs/libtorustrain.a,--no-whole-archive
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

check_PROGRAMS += tests/unit/test_engine_live
TESTS += tests/unit/test_engine_live
tests_unit_test_engine_live_SOURCES = tests/unit/test_engine_live.c \
	tests/unit/layer_harness.c tests/unit/layer_harness.h
tests_unit_test_engine_live_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_engine_live_LDADD = trainer/backends/cuda/libtcuda_host.la \
	$(TRAINER_TEST_LDADD)

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
check_PROGRAMS += tests/unit/test_cuda_optim tests/unit/test_loss_scale
TESTS += tests/unit/test_cuda_optim tests/unit/test_loss_scale
tests_unit_test_cuda_optim_SOURCES = tests/unit/test_cuda_optim.c
tests_unit_test_cuda_optim_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_cuda_optim_LDADD = trainer/backends/cuda/libtcuda_host.la \
	$(TRAINER_TEST_LDADD)
tests_unit_test_loss_scale_SOURCES = tests/unit/test_loss_scale.c
tests_unit_test_loss_scale_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_loss_scale_LDADD = $(TRAINER_TEST_LDADD)

# Usage errors are returned, not printed: common/torus_cli.c's helpers and
# torus-train's option parser (train/options.c).
check_PROGRAMS += tests/unit/test_usage_errors
TESTS += tests/unit/test_usage_errors
tests_unit_test_usage_errors_SOURCES = tests/unit/test_usage_errors.c
tests_unit_test_usage_errors_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_usage_errors_LDADD = $(TRAINER_TEST_LDADD)

# When the step is recorded in a CUDA graph (train/step_graph.c): plain C.
check_PROGRAMS += tests/unit/test_step_graph
TESTS += tests/unit/test_step_graph
tests_unit_test_step_graph_SOURCES = tests/unit/test_step_graph.c
tests_unit_test_step_graph_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_step_graph_LDADD = $(TRAINER_TEST_LDADD)

# The tests' fault injection (train/test_hooks.c), as configured and as
# --disable-test-hooks compiles it (the Debian package): no cluster needed.
check_PROGRAMS += tests/unit/test_train_hooks tests/unit/test_train_hooks_off
TESTS += tests/unit/test_train_hooks tests/unit/test_train_hooks_off
tests_unit_test_train_hooks_SOURCES = tests/unit/test_train_hooks.c
tests_unit_test_train_hooks_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_train_hooks_LDADD = $(TRAINER_TEST_LDADD)
tests_unit_test_train_hooks_off_SOURCES = tests/unit/test_train_hooks.c \
	trainer/train/test_hooks.c
tests_unit_test_train_hooks_off_CPPFLAGS = $(AM_CPPFLAGS) -DTORUS_NO_TEST_HOOKS=1
tests_unit_test_train_hooks_off_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_train_hooks_off_LDADD = $(CHECK_LIBS)

# Every source with a fault hook, compiled as --disable-test-hooks compiles
# it: tests/unit/hooks_off.sh checks that these objects hold no hook (and
# that every source with one is here), and the build's own torus-train
# holds them exactly when it was configured with the hooks.
check_LIBRARIES += tests/unit/libhooks_off.a
tests_unit_libhooks_off_a_SOURCES = trainer/comm/transport/shm_win.c \
	trainer/train/test_hooks.c
tests_unit_libhooks_off_a_CPPFLAGS = $(TCOMM_CPPFLAGS) -DTORUS_NO_TEST_HOOKS=1
TESTS += tests/unit/hooks_off.sh
EXTRA_DIST += tests/unit/hooks_off.sh

# The --metrics records (train/metrics.c) that torus-sweep and torus-plot
# read back: plain C.
check_PROGRAMS += tests/unit/test_train_metrics
TESTS += tests/unit/test_train_metrics
tests_unit_test_train_metrics_SOURCES = tests/unit/test_train_metrics.c
tests_unit_test_train_metrics_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_train_metrics_LDADD = $(TRAINER_TEST_LDADD)

# The divergence rule on a finite loss (train/diverge.c, --diverge-loss):
# plain C.
check_PROGRAMS += tests/unit/test_train_diverge
TESTS += tests/unit/test_train_diverge
tests_unit_test_train_diverge_SOURCES = tests/unit/test_train_diverge.c
tests_unit_test_train_diverge_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_train_diverge_LDADD = $(TRAINER_TEST_LDADD)

# The GPU of each rank (train/device.c): plain C, no GPU needed.
check_PROGRAMS += tests/unit/test_train_device
TESTS += tests/unit/test_train_device
tests_unit_test_train_device_SOURCES = tests/unit/test_train_device.c
tests_unit_test_train_device_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_train_device_LDADD = $(TRAINER_TEST_LDADD)

# The GPU check of the optimizer kernels (tests/gpu/run runs it): the
# multi-tensor sums of squares and update over ResNet-50's tensors against
# the host maths, and the fp16/bf16 working copies over every fp32 pattern.
# Built wherever CUDA is found; without a device it prints SKIP.
if HAVE_CUDNN
check_PROGRAMS += tests/gpu/optim_check
tests_gpu_optim_check_SOURCES = tests/gpu/optim_check.c
tests_gpu_optim_check_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS)
tests_gpu_optim_check_LDADD = trainer/backends/cuda/libtcuda.la \
	trainer/libtorustrain.la -lm
else
EXTRA_DIST += tests/gpu/optim_check.c
endif

# CPU training bench (built by check, run by hand: tests/bench/train/run_bench.sh).
check_PROGRAMS += tests/bench/train/bench_train
tests_bench_train_bench_train_SOURCES = tests/bench/train/bench_train.c
tests_bench_train_bench_train_LDADD = trainer/libtorustrain.la -lm
EXTRA_DIST += tests/bench/train/run_bench.sh tests/bench/train/bench_torch.py tests/bench/train/wire.sh

# The command line, config file and a tiny synthetic run of torus-train.
TESTS += tests/integration/train_cli.sh
EXTRA_DIST += tests/integration/train_cli.sh

# torus-plot: loss, LR, batch and accuracy curves from the metrics (gnuplot).
dist_bin_SCRIPTS += trainer/torus-plot
TESTS += tests/integration/train_plot.sh
# --trace on the local cluster: the timeline's spans nest, buckets overlap
# backward, torus-plot --trace draws it.
TESTS += tests/integration/train_trace.sh
EXTRA_DIST += tests/integration/train_trace.sh tests/integration/trace_check.py
# --bucket-kb auto, the default (mpirun): the choice follows its rule and
# trains as the size it chose; a resume takes the checkpoint's size.
TESTS += tests/integration/train_theta.sh
EXTRA_DIST += tests/integration/train_theta.sh
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

# Elastic resume under mpirun: stopped on 4 ranks, resumed on 2, 3 and 8,
# every sample served once per epoch in the uninterrupted run's global
# batches (TTRAIN_TEST_SERVED), the same weights; a batch of 64 on 3 ranks.
TESTS += tests/integration/train_elastic.sh
EXTRA_DIST += tests/integration/train_elastic.sh

# Only consistent checkpoints are trusted: poisoned tensors and counters,
# junk of other runs, FIFOs/devices/sockets, a full file system.
TESTS += tests/integration/train_ckpt_trust.sh
EXTRA_DIST += tests/integration/train_ckpt_trust.sh

# The test-set evaluation gives the same numbers at every batch size
# (last batches of one image included), during training and --eval-only;
# --eval-only --metrics writes its record.
TESTS += tests/integration/train_eval.sh
EXTRA_DIST += tests/integration/train_eval.sh

# A stopped or killed rank ends the step within the comm timeout + 15 s
# under plain srun, srun -K0, mpirun and a batch job's own srun (local
# Slurm cluster).
TESTS += tests/integration/train_stall.sh
EXTRA_DIST += tests/integration/train_stall.sh

# Loss scaling in the step: scaled == unscaled bit for bit on dnnl, an
# injected overflow skips and backs off (1 rank and 2 under mpirun), resume.
TESTS += tests/integration/train_scale.sh
EXTRA_DIST += tests/integration/train_scale.sh

# The 8-bit input path (--input u8) == float batches bit for bit, resume.
TESTS += tests/integration/train_input.sh
EXTRA_DIST += tests/integration/train_input.sh

# Each rank's own BN statistics across checkpoints and resumes (mpirun):
# checkpoints change nothing, a stopped run resumes bit for bit, damaged
# statistics files are named.
TESTS += tests/integration/train_bn_resume.sh
EXTRA_DIST += tests/integration/train_bn_resume.sh

# Data parallel: 2 ranks under mpirun equal 1 rank (BN-free tiny-cnn).
TESTS += tests/integration/train_dist.sh
EXTRA_DIST += tests/integration/train_dist.sh

# The launch the jobs use, on the local Slurm cluster: srun --mpi=pmix
# --torus=auto; 2 ranks equal 1, distributed evaluation and BN averaging.
TESTS += tests/integration/train_cluster.sh
EXTRA_DIST += tests/integration/train_cluster.sh tests/bench/train/fmnist_common.sh \
	tests/bench/train/fmnist_long.sh tests/bench/train/large_batch.sh

# The cuda backend's host-side parts (algorithm cache, kernel maths
# against the host kernels): plain C, no GPU, built everywhere.
check_PROGRAMS += tests/unit/test_cuda_host
TESTS += tests/unit/test_cuda_host
tests_unit_test_cuda_host_SOURCES = tests/unit/test_cuda_host.c \
	tests/unit/layer_harness.c tests/unit/layer_harness.h
tests_unit_test_cuda_host_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_cuda_host_LDADD = trainer/backends/cuda/libtcuda_host.la \
	$(TRAINER_TEST_LDADD)
# The vector kernels' alignment rule and the warp-per-row cross-entropy.
check_PROGRAMS += tests/unit/test_cuda_vec
TESTS += tests/unit/test_cuda_vec
tests_unit_test_cuda_vec_SOURCES = tests/unit/test_cuda_vec.c
tests_unit_test_cuda_vec_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_cuda_vec_LDADD = $(TRAINER_TEST_LDADD)
# Convolution tuning and the tune cache file with a stand-in for cuDNN.
check_PROGRAMS += tests/unit/test_cuda_tune
TESTS += tests/unit/test_cuda_tune
tests_unit_test_cuda_tune_SOURCES = tests/unit/test_cuda_tune.c
tests_unit_test_cuda_tune_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_cuda_tune_LDADD = trainer/backends/cuda/libtcuda_host.la \
	$(TRAINER_TEST_LDADD)

# The cuda backend against the oneDNN backend on a GPU (tests/gpu/run runs
# it with --bench; here it skips without a GPU).
if HAVE_CUDNN
check_PROGRAMS += tests/gpu/cuda_check
TESTS += tests/gpu/cuda_check
tests_gpu_cuda_check_SOURCES = tests/gpu/cuda_check.c
tests_gpu_cuda_check_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_cuda_check_LDADD = trainer/backends/cuda/libtcuda.la \
	trainer/libtorustrain.la $(CUDA_LIBS) -lm
else
EXTRA_DIST += tests/gpu/cuda_check.c
endif

# The engine's placement of f16/bf16 working copies (a test backend on host
# memory plans them; no GPU).
check_PROGRAMS += tests/unit/test_engine_f16
TESTS += tests/unit/test_engine_f16
tests_unit_test_engine_f16_SOURCES = tests/unit/test_engine_f16.c \
	tests/unit/layer_harness.c tests/unit/layer_harness.h
tests_unit_test_engine_f16_CFLAGS = $(TRAINER_TEST_CFLAGS)
tests_unit_test_engine_f16_LDADD = $(TRAINER_TEST_LDADD)

# libFuzzer target for the checkpoint loader (tests/fuzz/fuzz_ckpt.c): mutated
# HDF5 checkpoints through the real HDF5 library. The harness,
# checkpoint.c and ckpt_schema.c (its I/O and its checks) are built with
# clang and the sanitizers (the fuzzer's coverage); the rest of
# libtorustrain and libtdata link as built (their own checkpoint.o and
# ckpt_schema.o are never pulled: the instrumented ones define it all;
# so is data/format/ckpt.c, the tensor validation it calls).
# `make fuzz-smoke` runs it; by hand:
#   make fuzz-ckpt && make fuzz-ckpt-run FUZZ_SECONDS=60
FUZZ_CKPT_CFLAGS = -g -O1 -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=undefined -D_GNU_SOURCE -DHAVE_CONFIG_H \
	-I$(top_srcdir) -I$(top_builddir) $(HDF5_CFLAGS) $(DNNL_CFLAGS)
EXTRA_DIST += tests/fuzz/fuzz_ckpt.c tests/fuzz/corpus-ckpt
fuzz-ckpt: $(top_srcdir)/tests/fuzz/fuzz_ckpt.c \
		$(top_srcdir)/trainer/train/checkpoint.c \
		$(top_srcdir)/trainer/train/ckpt_schema.c \
		$(top_srcdir)/data/format/ckpt.c trainer/libtorustrain.la \
		data/libtdata.la
	$(MKDIR_P) tests/fuzz
	$(FUZZ_CC) $(FUZZ_CKPT_CFLAGS) -c $(top_srcdir)/tests/fuzz/fuzz_ckpt.c \
		-o tests/fuzz/fuzz_ckpt-main.o
	$(FUZZ_CC) $(FUZZ_CKPT_CFLAGS) -c $(top_srcdir)/trainer/train/checkpoint.c \
		-o tests/fuzz/fuzz_ckpt-checkpoint.o
	$(FUZZ_CC) $(FUZZ_CKPT_CFLAGS) -c $(top_srcdir)/trainer/train/ckpt_schema.c \
		-o tests/fuzz/fuzz_ckpt-schema.o
	$(FUZZ_CC) $(FUZZ_CKPT_CFLAGS) -c $(top_srcdir)/data/format/ckpt.c \
		-o tests/fuzz/fuzz_ckpt-ckpt.o
	$(LIBTOOL) --silent --tag=CC --mode=link $(FUZZ_CC) \
		-fsanitize=fuzzer,address,undefined -o tests/fuzz/fuzz_ckpt \
		tests/fuzz/fuzz_ckpt-main.o tests/fuzz/fuzz_ckpt-checkpoint.o \
		tests/fuzz/fuzz_ckpt-schema.o tests/fuzz/fuzz_ckpt-ckpt.o \
		trainer/libtorustrain.la data/libtdata.la $(HDF5_LIBS) -lm
	-rmdir tests/fuzz/.libs 2> /dev/null
fuzz-ckpt-run: fuzz-ckpt
	$(MKDIR_P) tests/fuzz/work-ckpt
	tests/fuzz/fuzz_ckpt -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
		-timeout=20 -rss_limit_mb=2048 tests/fuzz/work-ckpt \
		$(top_srcdir)/tests/fuzz/corpus-ckpt
CLEANFILES += tests/fuzz/fuzz_ckpt tests/fuzz/fuzz_ckpt-main.o \
	tests/fuzz/fuzz_ckpt-checkpoint.o tests/fuzz/fuzz_ckpt-schema.o \
	tests/fuzz/fuzz_ckpt-ckpt.o
.PHONY: fuzz-ckpt fuzz-ckpt-run
