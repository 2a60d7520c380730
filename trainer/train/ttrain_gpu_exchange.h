/* ttrain_gpu_exchange.h: the contract between torus-train's gradient
 * exchange (exchange.c, its device implementation) and the cuda backend's
 * module, which exports it (gpu_exchange_cuda.c): libtcomm's tcomm_gpu
 * functions themselves (tcomm_gpu.h), as a table of pointers. torus-train
 * links no CUDA library, so it cannot call tcomm_gpu_* by name; it finds
 * this table in the loaded module by its symbol name and calls each
 * function through it, with no function of the module in between. So the
 * device walk of a gradient reaches tcomm_gpu_ready in as many hops as
 * the host walk reaches tcomm_fusion_ready (docs/ARCHITECTURE.md, "One
 * gradient"). Every entry is the tcomm_gpu function of its name, with its
 * contract and its errors (TORUS_FAIL, tcomm_rc, torus_error_msg()). */
#ifndef TORUS_TRAINER_TRAIN_GPU_EXCHANGE_H
#define TORUS_TRAINER_TRAIN_GPU_EXCHANGE_H

#include "trainer/comm/tcomm_gpu.h"

/* The cuda module's table, found by this symbol name
 * (tbackends_module_symbol). */
#define TTRAIN_GX_OPS_SYMBOL "ttrain_gx_cuda_ops"
typedef struct ttrain_gx_ops {
    tcomm_rc (*create)(tcomm_t *c, const tcomm_gpu_options *o,
                       void *compute_stream, tcomm_gpu_t **out);
    tcomm_rc (*add)(tcomm_gpu_t *g, float *grad, size_t count, int *index);
    tcomm_rc (*seal)(tcomm_gpu_t *g);
    tcomm_rc (*ready)(tcomm_gpu_t *g, int index);
    int (*capturable)(const tcomm_gpu_t *g);
    tcomm_rc (*finish_device)(tcomm_gpu_t *g);
    tcomm_rc (*finish_host)(tcomm_gpu_t *g, tcomm_fusion_stats *st);
    void (*abandon)(tcomm_gpu_t *g);
    tcomm_rc (*allreduce)(tcomm_gpu_t *g, float *dev, size_t count,
                          tcomm_wire wire, unsigned flags);
    size_t (*bucket_count)(const tcomm_gpu_t *g);
    int (*plan_text)(const tcomm_gpu_t *g, char *buf, size_t n);
    const char *(*path)(const tcomm_gpu_t *g);
    void (*destroy)(tcomm_gpu_t *g);
} ttrain_gx_ops;

#endif
