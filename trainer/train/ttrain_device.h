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
 *   4. Fewer devices than ranks, but Slurm granted the step at least one
 *      GPU per rank on this node (SLURM_STEP_GPUS, else SLURM_GPUS_ON_NODE):
 *      each task sees its own subset (--gpu-bind=closest shows a task the
 *      GPUs of its socket), so the local rank modulo the visible count;
 *      ranks laid out in order over the sockets then get distinct GPUs.
 *   5. Otherwise (1 < visible < local ranks, no such grant) an error on
 *      every rank of the node, naming this one, its local rank and the
 *      devices it sees.
 *
 * And the other side: a step that Slurm granted GPUs but that cannot use
 * them (no cuda module, no driver, no device) must stop, not train on the
 * CPU in silence; ttrain_device_granted says whether it was granted any.
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
    int node_gpus;         /* GPUs Slurm granted the step on this node; 0 when
                              unknown (ttrain_device_granted) */
} ttrain_device_in;

/* Picks the device by the rule above: *device and a few words saying why
 * (why, n bytes: "local rank 1", "TORUS_LOCAL_GPU=2", "the only visible
 * GPU"). Returns 0, or TTRAIN_EDEVICE after TORUS_FAIL (torus_error.h) naming
 * the rank; *device is then -1. */
int ttrain_device_pick(const ttrain_device_in *in, int *device, char *why,
                       size_t n);

/* Sets in->local_gpu, in->cvd and in->node_gpus from the environment. */
void ttrain_device_getenv(ttrain_device_in *in);

/* The GPUs this process was granted, by the first of SLURM_STEP_GPUS (a
 * list of indices), SLURM_GPUS_ON_NODE (a count) and CUDA_VISIBLE_DEVICES
 * (a list) that is set and names a device (not "", "-1", "NoDevFiles" or
 * "0" for the count). Returns the count (0: none granted) and writes the
 * variable that says so into what, n bytes ("SLURM_STEP_GPUS=0,1"), for
 * messages. getenv is the lookup (getenv itself, or a table in tests). */
int ttrain_device_granted(const char *(*getenv_fn)(const char *), char *what,
                          size_t n);

/* For --backend auto resolved to a CPU backend (auto_why: why, from
 * tbackends_auto_why): 0 when no GPU was granted, else TTRAIN_EDEVICE
 * after TORUS_FAIL naming the rank, the grant and the reason. */
int ttrain_device_unused_grant(int rank, const char *auto_why);

#endif
