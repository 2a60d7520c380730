/* ttrain_gpu_exchange.h: the contract between torus-train's gradient
 * exchange (exchange.c, its device implementation) and the cuda backend's
 * module, which implements it (gpu_exchange_cuda.c) over libtcomm's
 * tcomm_gpu: NCCL on the device, or the MPI path staged through pinned
 * host memory where ranks share a GPU. torus-train links no CUDA library:
 * it finds the table below in the loaded module by name.
 *
 * Every param's gradient is registered in backward order (params lie in
 * forward order, so the reverse); ready marks a layer's params ready right
 * after its backward launch; finish_device queues the end of the step's
 * exchange and leaves the backend's stream waiting (on the device) for the
 * sums, so the update enqueued next runs after them, with no host wait
 * (capturable: 1 when that is device work only, nccl, so a CUDA graph may
 * record it); finish_host waits for the inf/nan count of the sums (the
 * same on every rank) and adds the host time spent to *wait_s; abandon:
 * after a failed recording. stats_average: the BN running statistics
 * averaged over ranks (fp32 wire). comm_s: seconds the reductions took so
 * far (nccl: per-bucket CUDA events, read after each count wait; staged:
 * the host fusion's). path: "nccl" or "staged". Errors: TORUS_FAIL,
 * message in torus_error_msg(). */
#ifndef TORUS_TRAINER_TRAIN_GPU_EXCHANGE_H
#define TORUS_TRAINER_TRAIN_GPU_EXCHANGE_H

#include "trainer/comm/tcomm.h"
#include "trainer/engine/teng.h"

/* The cuda module's table, found by this symbol name
 * (tbackends_module_symbol); every entry works on the module's own state
 * (impl, made by open). */
#define TTRAIN_GX_OPS_SYMBOL "ttrain_gx_cuda_ops"
typedef struct ttrain_gx_ops {
    int (*open)(tcomm_t *c, teng_net *net, teng_backend *bk, tcomm_algo algo,
                tcomm_wire wire, int bucket_kb, void **impl);
    int (*ready)(void *impl, teng_net *net, int layer);
    int (*capturable)(const void *impl);
    int (*finish_device)(void *impl);
    int (*finish_host)(void *impl, size_t *nonfinite, double *wait_s);
    void (*abandon)(void *impl);
    int (*stats_average)(void *impl, teng_net *net);
    size_t (*buckets)(const void *impl);
    double (*comm_s)(const void *impl);
    const char *(*path)(const void *impl);
    void (*close)(void *impl);
} ttrain_gx_ops;

#endif
