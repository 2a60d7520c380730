# trainer/bench/local.mk: torus-bench, the benchmark tool over libtcomm
# (size sweep, ResNet-50 gradient sync, cost-model predictions). Not part
# of the library: it takes ResNet-50's tensors from the models library and
# its reproducible inputs (testdata.c) are shared with the comm checks.

# The reproducible all-reduce inputs and their reference (the comm checks
# in trainer/comm/local.mk compile them in too).
BENCH_TESTDATA = trainer/bench/testdata.h trainer/bench/testdata.c

bin_PROGRAMS += trainer/bench/torus-bench
trainer_bench_torus_bench_SOURCES = \
	trainer/bench/bench.h \
	trainer/bench/torus_bench.c \
	trainer/bench/sweep.c \
	trainer/bench/resnet50.c \
	trainer/bench/model.c \
	trainer/bench/grads.c \
	$(BENCH_TESTDATA)
trainer_bench_torus_bench_CPPFLAGS = $(TCOMM_CPPFLAGS)
trainer_bench_torus_bench_LDADD = trainer/libtorustrain.la $(TCOMM_LIBS) \
	common/libtoruscommon.la -lm
