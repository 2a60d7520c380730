/* format/tdata_ckpt.h: the parts of a torus-train checkpoint's format that
 * every reader and writer shares (prefix tdata_ckpt_): its file name and
 * the validation of its tensors. The checkpoint module of the trainer
 * (trainer/train/checkpoint.c) and the Python package (python/torus,
 * through libtorusdata's tdata_api_ckpt_*) both call these, so that a file
 * one of them refuses is refused by the other for the same reason.
 *
 * Trust: a checkpoint is a user's file and hostile until checked. A tensor
 * is read only when it is a dataset reached by hard links (an external or
 * soft link could name another file or object), of 4-byte floats, one
 * dimension of exactly the count the model asks for, stored in this file
 * (chunked or contiguous layout; no external storage, no virtual dataset:
 * both read bytes of other files), with no filter other than the format's
 * own Fletcher32 checksum, and with all its bytes present (storage at
 * least count x 4 bytes, so a count is bounded by the file's size before
 * anyone allocates for it). What is read must be finite, and a BN running
 * variance >= 0.
 *
 * Errors follow tdata_format.h: TDATA_OK or a TDATA_E* code, the sentence
 * (naming the tensor) in torus_error_msg(). The HDF5 calls take
 * tdata_h5_lock themselves.
 *
 * Includes only format/ headers and <hdf5.h>. */
#ifndef TORUS_DATA_FORMAT_TDATA_CKPT_H
#define TORUS_DATA_FORMAT_TDATA_CKPT_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "data/format/tdata_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Length of a run id: 8 lowercase hex digits. */
#define TDATA_CKPT_RUN_CHARS 8

/* The name of the checkpoint of RUN at global step STEP: into out (n
 * bytes) "DIR/ckpt-STEP-RUN.h5", DIR without its trailing slashes ("/"
 * stays the root), or "ckpt-STEP-RUN.h5" when DIR is NULL or "". RUN must
 * be 8 lowercase hex digits and STEP >= 0. TDATA_OK, or TDATA_EINVAL
 * naming the folder and what is wrong (a bad run id or step, too long). */
int tdata_ckpt_name(char *out, size_t n, const char *dir, int64_t step,
                    const char *run);

/* What a tensor holds: values (finite), or BN running variances (finite
 * and >= 0). */
enum { TDATA_CKPT_VALUES = 0, TDATA_CKPT_VARIANCE = 1 };

/* Opens group NAME of LOC when it is reached by a hard link. A negative id
 * with TDATA_EFORMAT's message set otherwise. */
hid_t tdata_ckpt_group(hid_t loc, const char *name);

/* Checks dataset DSET of group G as the header says, for COUNT floats of
 * KIND, and reads them into buf when buf is not NULL (then checks them).
 * LABEL names the tensor in the message ("param conv1.w"). TDATA_OK,
 * TDATA_EMISSING (no such dataset), TDATA_EFORMAT (layout, type, shape,
 * storage, values) or TDATA_ECRC (a read that fails: its checksum). */
int tdata_ckpt_tensor(hid_t g, const char *dset, const char *label,
                      uint64_t count, int kind, float *buf);

#ifdef __cplusplus
}
#endif
#endif
