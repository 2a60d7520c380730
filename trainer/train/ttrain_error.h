/* trainer/train/ttrain_error.h: the error codes of trainer/train (ttrain_)
 * and of torus-train itself, for TORUS_FAIL (common/torus_error.h): a
 * positive code names the kind of failure, the message names the file, the
 * rank or the option. They are not exit statuses (TTRAIN_EXIT_*). */
#ifndef TORUS_TTRAIN_ERROR_H
#define TORUS_TTRAIN_ERROR_H

enum {
    TTRAIN_EIO = 1,   /* a file or folder: create, read, write, sync */
    TTRAIN_EFORMAT,   /* a file's contents: not ours, damaged, out of range */
    TTRAIN_ENOMEM,    /* out of memory */
    TTRAIN_EDEVICE,   /* the GPU of a rank, or a build without one */
    TTRAIN_EDATA,     /* the data does not fit the model or the batch */
    TTRAIN_ERANKS,    /* ranks disagree, or another rank failed */
    TTRAIN_EDIVERGED, /* inf/nan past --max-nonfinite, or --diverge-loss */
    TTRAIN_ENOCKPT,   /* no checkpoint to resume or evaluate */
};

#endif
