# python/local.mk: the Python package `torus` (pure Python over
# libtorusdata, data/local.mk, and libtoruscomm, trainer/comm/local.mk) and
# its tests. `pip install ./python`
# installs it; the Debian package python3-torus ships it.
# Included from the top Makefile.am; paths are relative to the top.

PY_PACKAGE_FILES = python/setup.py python/torus/__init__.py \
	python/torus/_lib.py python/torus/env.py python/torus/data.py \
	python/torus/distributed.py python/torus/checkpoint.py
EXTRA_DIST += $(PY_PACKAGE_FILES) examples/pytorch/train_imagenet.py \
	debian/python3-torus.install
dist_doc_DATA += docs/pytorch.md

# Run with Debian's python3 and torch over the build tree's libraries
# (tests/integration/py_lib.sh); they SKIP without torch.
# py_hook.sh and py_train.sh start the local Slurm cluster (4 ranks on 2
# nodes); py_train.sh trains 2 epochs of Fashion-MNIST twice (35-55 s of
# training on 2 cores).
PY_SH_TESTS = tests/integration/py_install.sh tests/integration/py_data.sh \
	tests/integration/py_hook.sh tests/integration/py_example.sh \
	tests/integration/py_checkpoint.sh tests/integration/py_train.sh \
	tests/integration/py_ckpt_trust.sh
TESTS += $(PY_SH_TESTS)
EXTRA_DIST += $(PY_SH_TESTS) tests/integration/py_lib.sh \
	tests/integration/py_ckpt_trust.py tests/fuzz/fuzz_ckpt_py.py \
	tests/integration/py_data.py tests/integration/py_env.py \
	tests/integration/py_hook.py tests/integration/py_train.py

# Benchmarks run by hand (docs/pytorch.md): the loader against torchvision
# on real JPEGs (photos.sh makes the set, shared with tests/bench/data/run.sh),
# and the hooks' sync time on the emulated 4-node cluster.
EXTRA_DIST += tests/bench/python/loader.sh tests/bench/python/loader_bench.py \
	tests/bench/python/hook_netns.sh tests/bench/python/hook_bench.py \
	tests/bench/data/photos.sh
