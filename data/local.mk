# data/local.mk: libtdata (HDF5 shards, CRC32C, the packer, the prefetching
# decode and augment pipeline), torus-pack and torus-data-bench, with their
# tests. One file for the whole of data/ and its layer folders.
# Included from the top Makefile.am; paths are relative to the top.

noinst_LTLIBRARIES += data/libtdata.la
# Layers, lowest first; each includes only the ones before it (pack/ and
# read/ not each other): format/ (shards, index, CRC32C, error codes, the
# seeded stream), image/ (codec), pack/ (the packer), read/ (the reader),
# tools/ (the programs).
data_libtdata_la_SOURCES = data/tdata.h \
	data/format/tdata_format.h data/format/format.h \
	data/format/tdata_h5attr.h data/format/tdata_ckpt.h \
	data/format/error.c data/format/crc32c.c data/format/rng.c \
	data/format/limits.c data/format/h5attr.c data/format/durable.c \
	data/format/shard_write.c data/format/shard_read.c data/format/index.c \
	data/format/textio.c data/format/ckpt.c \
	data/image/image.h data/image/jpeg_decode.c data/image/png_decode.c \
	data/image/resize.c \
	data/pack/pack.h data/pack/idx.c data/pack/pack_source.c \
	data/pack/pack_listing.c data/pack/pack_image.c data/pack/pack.c \
	data/read/tdata_read.h data/read/read.h data/read/tdata_norm.h \
	data/read/dataset.c \
	data/read/shuffle.c data/read/transform.c data/read/loader.c \
	data/read/stage.c
data_libtdata_la_CPPFLAGS = $(AM_CPPFLAGS) $(HDF5_CFLAGS) $(TURBOJPEG_CFLAGS) \
	$(JPEG_CFLAGS)
# The resampler and the output conversion are plain loops written for the
# vectoriser.
data_libtdata_la_CFLAGS = $(AM_CFLAGS) $(VECTORIZE_CFLAGS)
# The error convention (common/); libpng and zlib (configure checks them):
# PNG inputs, gzipped IDX files.
data_libtdata_la_LIBADD = common/libtoruscommon.la $(HDF5_LIBS) \
	$(TURBOJPEG_LIBS) $(JPEG_LIBS) $(PNG_LIBS) $(ZLIB_LIBS) -lpthread -lm

# libtorusdata: the reader behind a narrow, versioned C API (api/, the
# top layer beside tools/), installed as a shared library in $(pkglibdir)
# for the Python package (python/torus/_lib.py loads it with ctypes). Only
# the tdata_api_* symbols are exported.
pkglib_LTLIBRARIES += data/libtorusdata.la
data_libtorusdata_la_SOURCES = data/api/tdata_api.h data/api/tdata_api.c \
	data/api/ckpt_api.c
data_libtorusdata_la_CPPFLAGS = $(AM_CPPFLAGS) $(HDF5_CFLAGS)
data_libtorusdata_la_LIBADD = data/libtdata.la
# 2:0:1: API version 2 added the checkpoint functions; the soname stays .so.1.
data_libtorusdata_la_LDFLAGS = -version-info 2:0:1 \
	-export-symbols-regex '^tdata_api_'

# The programs keep their build paths (data/torus-pack, scripts run them
# from there) and install names; their sources are the tools/ layer.
bin_PROGRAMS += data/torus-pack
data_torus_pack_SOURCES = data/tools/torus_pack.c data/tools/cli.h \
	data/tools/cli.c
data_torus_pack_LDADD = data/libtdata.la

bin_PROGRAMS += data/torus-data-bench
data_torus_data_bench_SOURCES = data/tools/torus_data_bench.c \
	data/tools/cli.h data/tools/cli.c
data_torus_data_bench_LDADD = data/libtdata.la

# ------------------------------------------------------------------ tests
check_PROGRAMS += tests/integration/data_dump
tests_integration_data_dump_SOURCES = tests/integration/data_dump.c
tests_integration_data_dump_LDADD = data/libtdata.la

# Crafts hostile inputs (rewritten HDF5 attributes, pixel-bomb JPEG/PNG
# headers) from real files, for data_hostile.sh.
check_PROGRAMS += tests/integration/data_craft
tests_integration_data_craft_SOURCES = tests/integration/data_craft.c
tests_integration_data_craft_CFLAGS = $(AM_CFLAGS) $(HDF5_CFLAGS) \
	$(TURBOJPEG_CFLAGS) $(ZLIB_CFLAGS)
tests_integration_data_craft_LDADD = $(HDF5_LIBS) $(TURBOJPEG_LIBS) \
	$(ZLIB_LIBS)

DATA_SH_TESTS = \
	tests/integration/data_pack_idx.sh \
	tests/integration/data_pack_jpeg.sh \
	tests/integration/data_corrupt.sh \
	tests/integration/data_hostile.sh \
	tests/integration/data_names.sh \
	tests/integration/data_inputs.sh \
	tests/integration/data_fuzz.sh
TESTS += $(DATA_SH_TESTS)
EXTRA_DIST += $(DATA_SH_TESTS)

DATA_UNIT_TESTS = tests/unit/test_data_crc32c tests/unit/test_data_shard \
	tests/unit/test_data_shuffle tests/unit/test_data_transform \
	tests/unit/test_data_loader tests/unit/test_data_h5lock
check_PROGRAMS += $(DATA_UNIT_TESTS)
TESTS += $(DATA_UNIT_TESTS)
noinst_HEADERS += tests/unit/test_data_main.h
DATA_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
DATA_TEST_LDADD = data/libtdata.la $(CHECK_LIBS)
tests_unit_test_data_crc32c_SOURCES = tests/unit/test_data_crc32c.c
tests_unit_test_data_crc32c_CFLAGS = $(DATA_TEST_CFLAGS)
tests_unit_test_data_crc32c_LDADD = $(DATA_TEST_LDADD)
tests_unit_test_data_shuffle_SOURCES = tests/unit/test_data_shuffle.c
tests_unit_test_data_shuffle_CFLAGS = $(DATA_TEST_CFLAGS)
tests_unit_test_data_shuffle_LDADD = $(DATA_TEST_LDADD)
tests_unit_test_data_transform_SOURCES = tests/unit/test_data_transform.c
tests_unit_test_data_transform_CFLAGS = $(DATA_TEST_CFLAGS)
tests_unit_test_data_transform_LDADD = $(DATA_TEST_LDADD)
tests_unit_test_data_loader_SOURCES = tests/unit/test_data_loader.c
tests_unit_test_data_loader_CFLAGS = $(DATA_TEST_CFLAGS) $(TURBOJPEG_CFLAGS)
tests_unit_test_data_loader_LDADD = $(DATA_TEST_LDADD) $(TURBOJPEG_LIBS)
tests_unit_test_data_shard_SOURCES = tests/unit/test_data_shard.c
tests_unit_test_data_shard_CFLAGS = $(DATA_TEST_CFLAGS) $(HDF5_CFLAGS)
tests_unit_test_data_shard_LDADD = $(DATA_TEST_LDADD) $(HDF5_LIBS)
tests_unit_test_data_h5lock_SOURCES = tests/unit/test_data_h5lock.c
tests_unit_test_data_h5lock_CFLAGS = $(DATA_TEST_CFLAGS) $(HDF5_CFLAGS)
tests_unit_test_data_h5lock_LDADD = $(DATA_TEST_LDADD) $(HDF5_LIBS) -lpthread
dist_doc_DATA += docs/shard-format.md
EXTRA_DIST += tests/bench/data/run.sh tests/bench/data/torchvision_pipeline.py

# libFuzzer target for libtdata's readers of user files (index, shards,
# JPEG, PNG, IDX). CI runs it through tests/integration/data_fuzz.sh for a
# fixed short time; by hand:
#   make fuzz-data && make fuzz-data-run FUZZ_SECONDS=60
DATA_FUZZ_SRCS = tests/fuzz/fuzz_data.c tests/fuzz/fuzz_shard.c \
	common/torus_error.c common/torus_report.c \
	$(filter %.c,$(data_libtdata_la_SOURCES))
DATA_FUZZ_LIBS = $(HDF5_LIBS) $(TURBOJPEG_LIBS) $(JPEG_LIBS) $(PNG_LIBS) \
	$(ZLIB_LIBS) -lpthread -lm
EXTRA_DIST += tests/fuzz/fuzz_data.c tests/fuzz/fuzz_shard.c \
	tests/fuzz/fuzz_input.h tests/fuzz/corpus-data
fuzz-data: $(DATA_FUZZ_SRCS:%=$(top_srcdir)/%)
	$(MKDIR_P) tests/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -D_GNU_SOURCE -DHAVE_CONFIG_H -I$(top_srcdir) \
		-I$(top_builddir) $(HDF5_CFLAGS) $(TURBOJPEG_CFLAGS) $(JPEG_CFLAGS) \
		$(PNG_CFLAGS) $(ZLIB_CFLAGS) $(DATA_FUZZ_SRCS:%=$(top_srcdir)/%) \
		-o tests/fuzz/fuzz_data $(DATA_FUZZ_LIBS)
fuzz-data-run: fuzz-data
	$(MKDIR_P) tests/fuzz/work-data
	tests/fuzz/fuzz_data -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
		-timeout=10 -rss_limit_mb=2048 tests/fuzz/work-data \
		$(top_srcdir)/tests/fuzz/corpus-data
CLEANFILES += tests/fuzz/fuzz_data
.PHONY: fuzz-data fuzz-data-run
