/* tdata.h: the public API of libtdata, the torus input pipeline, for code
 * outside data/ (the trainer, tests).
 *
 * A dataset is a directory with an index file (SPLIT-index.txt) and N HDF5
 * shards (SPLIT-00000-of-0000N.h5); docs/shard-format.md is the format.
 * libtdata is layered (lowest first): format/ (shards, index, CRC32C, error
 * codes), image/ (codec), then pack/ (the packer) and read/ (dataset,
 * shuffle, loader, staging), with the programs in tools/ on top. This header
 * only gathers the two public parts: format/tdata_format.h and
 * read/tdata_read.h. */
#ifndef TORUS_TDATA_H
#define TORUS_TDATA_H

#include "data/format/tdata_format.h"
#include "data/read/tdata_read.h"

#endif
