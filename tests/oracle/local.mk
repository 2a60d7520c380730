# tests/oracle/local.mk: PyTorch as the engine's independent oracle, and
# torus-torch, the converter between torus checkpoints and PyTorch state
# dicts (docs/oracle.md).

# torus-torch is a thin command line over the torus Python package
# (python/torus/), which is installed beside the other data of torus;
# torus-torch finds it there (bin/../share/torus/python) or in the source
# tree (tools/../python).
dist_bin_SCRIPTS += tools/torus-torch
torus_pythondir = $(pkgdatadir)/python/torus
dist_torus_python_DATA = python/torus/__init__.py \
	python/torus/checkpoint_convert.py python/torus/_lib.py

# teng_dump: one training step of the real engine on any backend, in and
# out as .npy files; oracle-check drives it and compares with PyTorch. It
# is linked as torus-train is (every object of libtorustrain, its symbols
# exported, libtcomm), so that --backend cuda loads the cuda module into it
# as into torus-train; nothing of PyTorch.
check_PROGRAMS += tests/oracle/teng_dump
tests_oracle_teng_dump_SOURCES = tests/oracle/teng_dump.c
tests_oracle_teng_dump_LDFLAGS = $(trainer_torus_train_LDFLAGS)
tests_oracle_teng_dump_LDADD = $(trainer_torus_train_LDADD)

# On the CPU: dnnl against PyTorch fp32 for ResNet-50 (64 px) and the
# CIFAR ResNet, a deliberately wrong layer caught, and torus-torch's
# round trips (bit for bit, strict loads, a resume from an imported
# checkpoint). The GPU rows (cuda, cuda-fp16) run from the GPU bundle.
TESTS += tests/oracle/oracle.sh
EXTRA_DIST += tests/oracle/oracle.sh tests/oracle/oracle-check
dist_doc_DATA += docs/oracle.md
