/* ttrain_device.h: which GPU a rank of torus-train uses (prefix
 * ttrain_device_), as a plain-C rule on what the process sees, so that it
 * is tested without a GPU (tests/unit/test_train_device.c).
 *
 * The rule, first match wins:
 *   1. TORUS_LOCAL_GPU (set by spank_torus.so when the step has GPUs; an
 *      index into the devices the task sees, CUDA_VISIBLE_DEVICES order):
 *      that device; a value that is not an index in [0, visible) is an
 *      error naming the rank and the value.
 *   2. One device visible: device 0 (Slurm gave each task its own GPU,
 *      --gpus-per-task / --gpu-bind, or the ranks share one on purpose).
 *   3. At least as many devices as ranks on the node: the local rank's.
 *   4. Otherwise (1 < visible < local ranks) an error on every rank of the
 *      node, naming this one, its local rank and the devices it sees.
 */
#ifndef TORUS_TRAINER_TRAIN_DEVICE_H
#define TORUS_TRAINER_TRAIN_DEVICE_H

#include <stddef.h>

typedef struct {
    int rank;              /* world rank (for messages) */
    int local_rank;        /* on this node, in [0, local_size) */
    int local_size;        /* ranks on this node (>= 1) */
    int visible;           /* devices this process sees (cudaGetDeviceCount) */
    const char *local_gpu; /* TORUS_LOCAL_GPU, or NULL when unset */
    const char *cvd;       /* CUDA_VISIBLE_DEVICES, or NULL (messages) */
} ttrain_device_in;

/* Picks the device by the rule above: *device and a few words saying why
 * (why, n bytes: "local rank 1", "TORUS_LOCAL_GPU=2", "the only visible
 * GPU"). Returns 0, or TTRAIN_EDEVICE after TORUS_FAIL (torus_error.h) naming
 * the rank; *device is then -1. */
int ttrain_device_pick(const ttrain_device_in *in, int *device, char *why,
                       size_t n);

/* Sets in->local_gpu and in->cvd from the environment. */
void ttrain_device_getenv(ttrain_device_in *in);

#endif
