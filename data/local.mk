# data/local.mk: libtdata (HDF5 shards, CRC32C, the prefetching decode and
# augment pipeline), torus-pack and torus-data-bench, with their tests.
# Included from the top Makefile.am; paths are relative to the top.

noinst_LTLIBRARIES += data/libtdata.la
data_libtdata_la_SOURCES = \
	data/tdata.h data/tdata_internal.h data/pack.h \
	data/error.c data/crc32c.c data/shard_write.c data/shard_read.c \
	data/index.c data/dataset.c data/shuffle.c data/jpeg_decode.c \
	data/png_decode.c data/resize.c data/transform.c \
	data/loader.c data/stage.c \
	data/idx.c data/pack_source.c data/pack_listing.c data/pack_image.c \
	data/pack.c
data_libtdata_la_CPPFLAGS = $(AM_CPPFLAGS) $(HDF5_CFLAGS) $(TURBOJPEG_CFLAGS) \
	$(JPEG_CFLAGS)
# The resampler and the output conversion are plain loops written for the
# vectoriser.
data_libtdata_la_CFLAGS = $(AM_CFLAGS) $(VECTORIZE_CFLAGS)
# libpng and zlib (configure checks them): PNG inputs, gzipped IDX files.
data_libtdata_la_LIBADD = $(HDF5_LIBS) $(TURBOJPEG_LIBS) $(JPEG_LIBS) \
	$(PNG_LIBS) $(ZLIB_LIBS) -lpthread -lm

bin_PROGRAMS += data/torus-pack
data_torus_pack_SOURCES = data/torus_pack.c
data_torus_pack_LDADD = data/libtdata.la

bin_PROGRAMS += data/torus-data-bench
data_torus_data_bench_SOURCES = data/torus_data_bench.c
data_torus_data_bench_LDADD = data/libtdata.la

# ------------------------------------------------------------------ tests
check_PROGRAMS += tests/integration/data_dump
tests_integration_data_dump_SOURCES = tests/integration/data_dump.c
tests_integration_data_dump_LDADD = data/libtdata.la

DATA_SH_TESTS = \
	tests/integration/data_pack_idx.sh \
	tests/integration/data_pack_jpeg.sh \
	tests/integration/data_corrupt.sh
TESTS += $(DATA_SH_TESTS)
EXTRA_DIST += $(DATA_SH_TESTS)

DATA_UNIT_TESTS = tests/unit/test_data_crc32c tests/unit/test_data_shard \
	tests/unit/test_data_shuffle tests/unit/test_data_transform \
	tests/unit/test_data_loader
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
dist_doc_DATA += docs/shard-format.md
EXTRA_DIST += tests/bench/data/run.sh tests/bench/data/torchvision_pipeline.py
