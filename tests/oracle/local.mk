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
	python/torus/checkpoint_convert.py

# teng_dump: one training step of the real engine on any backend, in and
# out as .npy files; oracle-check drives it and compares with PyTorch. It
# links what torus-train's engine links, and nothing of PyTorch.
check_PROGRAMS += tests/oracle/teng_dump
tests_oracle_teng_dump_SOURCES = tests/oracle/teng_dump.c
tests_oracle_teng_dump_LDADD = trainer/libtorustrain.la -lm

# On the CPU: dnnl against PyTorch fp32 for ResNet-50 (64 px) and the
# CIFAR ResNet, a deliberately wrong layer caught, and torus-torch's
# round trips (bit for bit, strict loads, a resume from an imported
# checkpoint). The GPU rows (cuda, cuda-fp16) run from the GPU bundle.
TESTS += tests/oracle/oracle.sh
EXTRA_DIST += tests/oracle/oracle.sh tests/oracle/oracle-check
dist_doc_DATA += docs/oracle.md
