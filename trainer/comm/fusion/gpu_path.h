/* fusion/gpu_path.h: the seam between the device fusion (gpu_fusion.c:
 * the bucket plan, the agreement on a path, the step's bookkeeping) and
 * the two ways a bucket of device gradients is reduced: NCCL on the
 * device (gpu_nccl.c, built only where configure finds NCCL) or the MPI
 * transport through pinned host memory (gpu_staged.c, wherever CUDA is).
 * Every rank agrees on one path at create (tc_gpu_choose); its table is
 * chosen then and every later call goes through it, so no other file of
 * the fusion asks whether NCCL was built. Private to fusion/. */
#ifndef TORUS_TCOMM_FUSION_GPU_PATH_H
#define TORUS_TCOMM_FUSION_GPU_PATH_H

#include <cuda_runtime_api.h>

#include "config.h"
#include "trainer/comm/core/comm.h"
#include "trainer/comm/fusion/plan.h"
#include "trainer/comm/tcomm_gpu.h"

typedef struct tc_gpu_ops tc_gpu_ops;

struct tcomm_gpu {
    tcomm_t *c;
    tcomm_gpu_options o;
    int path; /* TC_GPU_NCCL or TC_GPU_STAGED */
    const tc_gpu_ops *ops; /* the path's; NULL until it is agreed */
    void *impl;            /* the path's own state (its open) */
    int device;
    int gpu_id; /* the device's PCI bus id, hashed: the same GPU on a node
                 * whatever CUDA_VISIBLE_DEVICES numbers it */
    cudaStream_t compute;
    tc_plan plan;
    int sealed;
    tcomm_fusion_stats pending; /* finish_device's, for finish_host */
};

/* One path. Each returns a code with its message set (TORUS_FAIL), as
 * the public calls of tcomm_gpu.h that run them. */
struct tc_gpu_ops {
    /* After the agreement: the path's state in g->impl. */
    tcomm_rc (*open)(tcomm_gpu_t *g);
    /* After the plan is cut, spanned and checked alike on every rank;
     * max_floats: the largest bucket's span. */
    tcomm_rc (*seal)(tcomm_gpu_t *g, size_t max_floats);
    /* The plan in one line (tcomm_gpu_plan_text), after seal. */
    int (*plan_text)(const tcomm_gpu_t *g, char *buf, size_t n);
    /* Bucket b is complete on the compute stream: start its reduction. */
    tcomm_rc (*launch)(tcomm_gpu_t *g, int b);
    /* After launches: whatever can move on without waiting (NULL:
     * nothing). */
    tcomm_rc (*progress)(tcomm_gpu_t *g);
    /* Every bucket launched: the compute stream waits for their sums;
     * st gets the path's part of the step's statistics. */
    tcomm_rc (*finish_device)(tcomm_gpu_t *g, tcomm_fusion_stats *st);
    /* On this thread: wait for the sums and complete st (NULL: nothing
     * left to wait for). */
    tcomm_rc (*finish_host)(tcomm_gpu_t *g, tcomm_fusion_stats *st);
    /* A new step, after a finished or an abandoned one (NULL: nothing
     * to do). */
    void (*reset)(tcomm_gpu_t *g);
    /* Frees the path's state. */
    void (*close)(tcomm_gpu_t *g);
    /* A CUDA graph may record the step (no host wait inside it). */
    int capturable;
};

#define TC_GPU_CUDA_TRY(call) TC_CUDA_TRY(g->c->info.rank, call)

extern const tc_gpu_ops tc_gpu_staged_ops;
/* The one place that knows whether NCCL was built: its table, or none. */
#ifdef TORUS_HAVE_NCCL
extern const tc_gpu_ops tc_gpu_nccl_ops;
enum { TC_GPU_HAVE_NCCL = 1 };
#define TC_GPU_NCCL_OPS (&tc_gpu_nccl_ops)
#else
enum { TC_GPU_HAVE_NCCL = 0 };
#define TC_GPU_NCCL_OPS ((const tc_gpu_ops *)NULL)
#endif

#endif
