/* format/tdata_h5attr.h: reading HDF5 attributes from files that users
 * control, without trusting their declared type or size, and writing the
 * attributes those readers accept. Public (tdata_ prefix) so that every
 * HDF5 file of torus (shards here, checkpoints in trainer/train) reads and
 * writes attributes the same way.
 *
 * Promises: an attribute is read only after its class, rank and element
 * count match what the caller's buffer holds, so a crafted file can never
 * make H5Aread write past the buffer. Failures return a TDATA_E* code with
 * a message naming WHAT (the file) and the attribute (common/torus_error.h).
 * HDF5 from several threads: an HDF5 built without its thread-safety
 * option (HDF5's own default; site builds on clusters often are) lets two
 * threads inside it at once corrupt its global state (error stack,
 * identifier tables, metadata cache). Every
 * HDF5 call of the process (decode threads naming a bad sample, the
 * loader's shard opens, rank 0 writing a checkpoint) runs between
 * tdata_h5_lock() and tdata_h5_unlock(). The helpers below take it
 * themselves; callers that call HDF5 directly hold it around those calls,
 * including the argument H5T_NATIVE_* (a macro that calls H5open).
 *
 * Includes only format/tdata_format.h and <hdf5.h>. */
#ifndef TORUS_DATA_FORMAT_TDATA_H5ATTR_H
#define TORUS_DATA_FORMAT_TDATA_H5ATTR_H

#include <hdf5.h>
#include <stddef.h>

#include "data/format/tdata_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Takes the process-wide HDF5 lock: a recursive mutex, so a holder may
 * call the helpers below (which take it again). A no-op when HDF5 reports
 * itself thread-safe (H5is_library_threadsafe), as HDF5 then serialises its
 * API itself, unless the environment has TORUS_HDF5_LOCK=always (read once,
 * at the first call). */
void tdata_h5_lock(void);

/* Releases one tdata_h5_lock(). */
void tdata_h5_unlock(void);

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

/* The `count` of a scalar attribute (one element, rank 0) for
 * tdata_h5_attr_write; any other count makes a 1-D attribute. */
#define TDATA_H5_SCALAR 0

/* Creates attribute NAME of LOC with file type FILE_TYPE and writes it from
 * buf, read as MEM_TYPE: `count` elements in one dimension, or one element
 * without dimensions when count is TDATA_H5_SCALAR. Returns TDATA_OK, or
 * TDATA_EIO (the attribute exists, or HDF5 failed) naming WHAT and NAME. */
int tdata_h5_attr_write(hid_t loc, const char *what, const char *name,
                        hid_t file_type, hid_t mem_type, const void *buf,
                        size_t count);

/* Creates the scalar attribute NAME of LOC holding v as a fixed-length,
 * NUL-terminated string of strlen(v) + 1 bytes (what tdata_h5_attr_str
 * reads). Returns like tdata_h5_attr_write. */
int tdata_h5_attr_write_str(hid_t loc, const char *what, const char *name,
                            const char *v);

#ifdef __cplusplus
}
#endif
#endif
