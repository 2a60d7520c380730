/* format/tdata_h5attr.h: reading HDF5 attributes from files that users
 * control, without trusting their declared type or size. Public (tdata_
 * prefix) so that every HDF5 reader in torus (shards here, checkpoints in
 * trainer/train) checks attributes the same way.
 *
 * Promises: an attribute is read only after its class, rank and element
 * count match what the caller's buffer holds, so a crafted file can never
 * make H5Aread write past the buffer. Failures return a TDATA_E* code with
 * a message naming WHAT (the file) and the attribute (common/torus_error.h).
 * Includes only format/tdata_format.h and <hdf5.h>. */
#ifndef TORUS_DATA_FORMAT_TDATA_H5ATTR_H
#define TORUS_DATA_FORMAT_TDATA_H5ATTR_H

#include <hdf5.h>
#include <stddef.h>

#include "data/format/tdata_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest string attribute read (bytes): larger ones are refused before
 * anything is allocated. */
#define TDATA_H5_STR_MAX 65536

/* Numeric attribute NAME of LOC into buf: exactly `count` elements (a
 * scalar counts as one, a 1-D array of `count` as well), converted to
 * MEM_TYPE, a native integer or float type. The file's type must be of the
 * same class (integer or float). Returns TDATA_OK, TDATA_EMISSING when the
 * attribute is absent, TDATA_EFORMAT when its class, rank or size differ.
 * WHAT names the file in the message. */
int tdata_h5_attr_read(hid_t loc, const char *what, const char *name,
                       hid_t mem_type, void *buf, size_t count);

/* Fixed-length string attribute NAME of LOC (one element, at most
 * TDATA_H5_STR_MAX bytes) into buf of n bytes, cut to fit and always
 * terminated. Returns like tdata_h5_attr_read (buf is "" on failure). */
int tdata_h5_attr_str(hid_t loc, const char *what, const char *name, char *buf,
                      size_t n);

#ifdef __cplusplus
}
#endif
#endif
