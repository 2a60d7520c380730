/* ttrain_gpu_exchange.h: torus-train's gradient exchange for a backend
 * whose gradients live in device memory (the cuda backends), with several
 * ranks: libtcomm's tcomm_gpu (NCCL on the device, or the MPI path staged
 * through pinned host memory where ranks share a GPU). Host-memory
 * backends keep the host fusion in torus-train.c.
 *
 * Every param's gradient is registered in backward order (params lie in
 * forward order, so the reverse); the engine's per-layer hook marks a
 * layer's params ready right after its backward launch; wait() ends the
 * step's exchange and leaves the backend's stream waiting (on the device)
 * for the sums, so the update enqueued next runs after them. Errors:
 * TORUS_FAIL, message in torus_error_msg(). Built into torus-train (not
 * libtorustrain: it links libtcomm), which links no CUDA library: the
 * exchange itself is in the cuda backend's module (gpu_exchange_cuda.c,
 * the table ttrain_gx_ops), and these functions forward to it; without a
 * loaded module, open says so. */
#ifndef TORUS_TRAINER_TRAIN_GPU_EXCHANGE_H
#define TORUS_TRAINER_TRAIN_GPU_EXCHANGE_H

#include "trainer/comm/tcomm.h"
#include "trainer/engine/teng.h"

typedef struct ttrain_gx ttrain_gx;

/* 1 when bk keeps its arenas in device memory: the GPU exchange must be
 * used (host code must not touch those gradients). */
int ttrain_gx_wanted(const teng_backend *bk);
/* Collective on world, after the net is compiled. */
int ttrain_gx_open(tcomm_t *c, teng_net *net, teng_backend *bk, tcomm_algo algo,
                   tcomm_wire wire, int bucket_kb, ttrain_gx **out);
/* The engine's gradient hook (teng_grad_hook) with x as its context. */
int ttrain_gx_ready(void *x, teng_net *net, int layer);
/* Ends the step's exchange: *nonfinite = inf/nan in the sums (the same on
 * every rank), *wait_s += the host time spent. */
int ttrain_gx_wait(ttrain_gx *x, size_t *nonfinite, double *wait_s);
/* ttrain_gx_wait in two halves for a step that a CUDA graph records
 * (tcomm_gpu.h): finish_device queues the end of the exchange with no
 * host wait (nccl path), finish_host waits for the inf/nan count.
 * capturable: 1 when finish_device queues device work only (nccl; the
 * staged path's host sums are never recorded). abandon: after a failed
 * recording. */
int ttrain_gx_capturable(const ttrain_gx *x);
int ttrain_gx_finish_device(ttrain_gx *x);
int ttrain_gx_finish_host(ttrain_gx *x, size_t *nonfinite, double *wait_s);
void ttrain_gx_abandon(ttrain_gx *x);
/* The BN running statistics averaged over ranks (fp32 wire). */
int ttrain_gx_stats_average(ttrain_gx *x, teng_net *net, tcomm_algo algo);
size_t ttrain_gx_buckets(const ttrain_gx *x);
/* Seconds the reductions took so far: on the nccl path their device time
 * (per-bucket CUDA events, read after each step's count wait, which has
 * already waited for them), on the staged path the host fusion's. Steps
 * ended by finish_device alone (the device step, which counts inf/nan on
 * the device) are not counted. */
double ttrain_gx_comm_s(const ttrain_gx *x);
/* "nccl" or "staged". */
const char *ttrain_gx_path(const ttrain_gx *x);
void ttrain_gx_close(ttrain_gx *x);

/* The implementation in the cuda module, found by this symbol name
 * (tbackends_module_symbol); each entry is the function above of the same
 * name on the module's own state. */
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
