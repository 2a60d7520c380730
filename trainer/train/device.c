/* device.c: the GPU of a rank (see ttrain_device.h for the rule). */
#include "trainer/train/ttrain_device.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_env.h"
#include "common/torus_error.h"
#include "trainer/train/ttrain_error.h"

/* The devices this process sees, for messages. */
static const char *_seen(const ttrain_device_in *in, char *buf, size_t n)
{
    snprintf(buf, n, "CUDA_VISIBLE_DEVICES=%.100s",
             in->cvd ? in->cvd : "(unset)");
    return buf;
}

/* Rule 1: TORUS_LOCAL_GPU, a decimal index into the visible devices. */
static int _from_env(const ttrain_device_in *in, int *device, char *why,
                     size_t n)
{
    char seen[160], *end;
    errno = 0;
    long v = strtol(in->local_gpu, &end, 10);
    if (!isdigit((unsigned char)in->local_gpu[0]) || *end || errno ||
        v >= in->visible)
        return TORUS_FAIL(TTRAIN_EDEVICE,
                          "rank %d: " TORUS_ENV_LOCAL_GPU
                          "='%.32s' is not a device index in [0, %d) (%s)",
                          in->rank, in->local_gpu, in->visible,
                          _seen(in, seen, sizeof(seen)));
    *device = (int)v;
    snprintf(why, n, TORUS_ENV_LOCAL_GPU "=%d", *device);
    return 0;
}

int ttrain_device_pick(const ttrain_device_in *in, int *device, char *why,
                       size_t n)
{
    char seen[160];
    *device = -1;
    if (in->visible < 1)
        return TORUS_FAIL(TTRAIN_EDEVICE, "rank %d: no GPU visible (%s)",
                          in->rank, _seen(in, seen, sizeof(seen)));
    if (in->local_gpu)
        return _from_env(in, device, why, n);
    if (in->visible == 1) {
        *device = 0;
        snprintf(why, n, "the only visible GPU");
        return 0;
    }
    if (in->local_rank < 0 || in->local_rank >= in->local_size)
        return TORUS_FAIL(TTRAIN_EDEVICE,
                          "rank %d: local rank %d is not in [0, %d) (%s)",
                          in->rank, in->local_rank, in->local_size,
                          _seen(in, seen, sizeof(seen)));
    if (in->local_size <= in->visible) {
        *device = in->local_rank;
        snprintf(why, n, "local rank %d", in->local_rank);
        return 0;
    }
    /* A subset per task (--gpu-bind=closest, map_gpu): the step holds a
     * GPU per rank, this task sees some of them. */
    if (in->node_gpus >= in->local_size) {
        *device = in->local_rank % in->visible;
        snprintf(why, n, "local rank %d of %d, %d visible", in->local_rank,
                 in->local_size, in->visible);
        return 0;
    }
    return TORUS_FAIL(
        TTRAIN_EDEVICE,
        "rank %d: local rank %d of %d ranks on this node, but %d GPUs "
        "are visible (%s) and the step was granted %d on this node: run at "
        "most %d ranks per node, give each rank its own GPU (srun "
        "--gpus-per-task=1) or set " TORUS_ENV_LOCAL_GPU,
        in->rank, in->local_rank, in->local_size, in->visible,
        _seen(in, seen, sizeof(seen)), in->node_gpus, in->visible);
}

/* Devices named by a list like "0,1,3" (Slurm's and CUDA's form); 0 for
 * the values that mean none. */
static int _list_count(const char *v)
{
    if (!*v || !strcmp(v, "-1") || !strcmp(v, "NoDevFiles"))
        return 0;
    int count = 1;
    for (const char *p = v; *p; p++)
        count += *p == ',';
    return count;
}

int ttrain_device_granted(const char *(*getenv_fn)(const char *), char *what,
                          size_t n)
{
    static const char *const names[] = {"SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE",
                                        "CUDA_VISIBLE_DEVICES"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv_fn(names[i]);
        if (!v)
            continue;
        int count = i == 1 ? atoi(v) : _list_count(v);
        if (count > 0) {
            snprintf(what, n, "%s=%.64s", names[i], v);
            return count;
        }
    }
    snprintf(what, n, "no GPU granted");
    return 0;
}

static const char *_getenv(const char *name)
{
    return getenv(name);
}

void ttrain_device_getenv(ttrain_device_in *in)
{
    in->local_gpu = getenv(TORUS_ENV_LOCAL_GPU);
    in->cvd = getenv("CUDA_VISIBLE_DEVICES");
    char what[96];
    in->node_gpus = ttrain_device_granted(_getenv, what, sizeof what);
}

int ttrain_device_unused_grant(int rank, const char *auto_why)
{
    char what[96];
    if (!ttrain_device_granted(_getenv, what, sizeof what))
        return 0;
    return TORUS_FAIL(TTRAIN_EDEVICE,
                      "rank %d: Slurm granted this step GPUs (%s), but "
                      "--backend auto cannot use them: %.900s. Stopping "
                      "rather than training on the CPU: fix the GPU set-up, "
                      "or ask for no GPU (sbatch --gpus-per-task=0) or pass "
                      "--backend cpu",
                      rank, what, auto_why);
}
