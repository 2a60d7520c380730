/* ttrain_exchange.h: torus-train's gradient exchange, one interface over
 * two implementations (exchange.c), chosen at open by where the backend
 * keeps its gradients:
 * - host: libtcomm's fusion (tcomm_fusion.h) over host memory; with one
 *   rank nothing is exchanged and the step only checks its own gradients;
 * - device: libtcomm's tcomm_gpu through the cuda module
 *   (ttrain_gpu_exchange.h: NCCL, or staged through pinned host memory).
 * Both walk one gradient alike: the engine's per-layer hook
 * (ttrain_exchange_ready) marks a layer's params ready and the
 * implementation starts every complete bucket's all-reduce while backward
 * goes on; ttrain_exchange_wait ends the step's exchange. The loss is
 * already divided by the global batch, so the all-reduce is a plain sum,
 * and each rank's share is cast to the wire (--wire) before it is summed
 * in fp32: the cast cannot overflow where the sum would not. The inf/nan
 * count of the sums is the same on every rank, so every rank skips alike.
 * The collectives that the run needs besides (the BN average, the state
 * agreement, sums and the max that agrees a stop) go through here too.
 * Built into torus-train (it links libtcomm). Errors: TORUS_FAIL, message
 * in torus_error_msg(), named by rank. */
#ifndef TORUS_TRAINER_TRAIN_EXCHANGE_H
#define TORUS_TRAINER_TRAIN_EXCHANGE_H

#include <stdio.h>

#include "common/torus_error.h"

#include "trainer/comm/tcomm.h"
#include "trainer/engine/teng.h"
#include "trainer/train/ttrain_trace.h"

typedef struct ttrain_exchange ttrain_exchange;

typedef struct {
    tcomm_t *comm; /* NULL with one process */
    int rank, world;
    tcomm_algo algo;
    tcomm_wire wire;
    int bucket_kb;       /* <0: auto (host), 0: the device default */
    ttrain_trace *trace; /* per-layer and per-bucket events; may be NULL */
} ttrain_exchange_config;

/* Collective on world, after the net is compiled; registers the gradient
 * hook on net. */
TORUS_MUST_CHECK int ttrain_exchange_open(const ttrain_exchange_config *c,
                                          teng_net *net, teng_backend *bk,
                                          ttrain_exchange **out);

/* Ends the step's exchange. replayed: a step graph ran the step (and the
 * exchange's device end with it); dstep: the device counts inf/nan and
 * decides, so the host waits for nothing. */
TORUS_MUST_CHECK int ttrain_exchange_wait(ttrain_exchange *ex, teng_net *net,
                                          int replayed, int dstep);
/* inf/nan in this step's summed gradients (after wait), and whether that
 * is a count of values (1) or only "some" (0: one rank's own check). */
size_t ttrain_exchange_nonfinite(const ttrain_exchange *ex, int *counted);
/* Host seconds blocked in wait since the last call; restarts the count. */
double ttrain_exchange_wait_s(ttrain_exchange *ex, int restart);

/* For a step recorded as a CUDA graph: 1 when the exchange does no host
 * work inside the step; finish_device queues its end (recorded), abandon
 * drops it after a failed recording, and sync waits on the host, under
 * the exchange's deadline, for what the device ended (a lost peer is
 * then named, not waited for). */
int ttrain_exchange_capturable(const ttrain_exchange *ex);
TORUS_MUST_CHECK int ttrain_exchange_finish_device(ttrain_exchange *ex);
void ttrain_exchange_abandon(ttrain_exchange *ex);
TORUS_MUST_CHECK int ttrain_exchange_sync(ttrain_exchange *ex);

/* The BN running statistics averaged over ranks (fp32 on the wire). */
TORUS_MUST_CHECK int ttrain_exchange_stats_average(ttrain_exchange *ex,
                                                   teng_net *net);
/* Every rank holds the same weights and BN statistics, else the first
 * rank that differs is named (TTRAIN_ERANKS). */
TORUS_MUST_CHECK int ttrain_exchange_check_agreement(ttrain_exchange *ex,
                                                     teng_net *net);
/* n doubles summed over ranks in place; one double's max. */
TORUS_MUST_CHECK int ttrain_exchange_sum(ttrain_exchange *ex, double *v, int n);
TORUS_MUST_CHECK int ttrain_exchange_max(ttrain_exchange *ex, double *v);

/* The fusion bucket size in KiB: the host fusion's (auto resolved), the
 * device's (its default where auto), 0 with one rank. */
int ttrain_exchange_bucket_kb(const ttrain_exchange *ex);
/* Buckets a step (0 with one rank). */
size_t ttrain_exchange_buckets(const ttrain_exchange *ex);
/* Host gradients: the buckets cut again at kb KiB between steps, checked
 * on every rank (tcomm_fusion_set_theta; collective). Changes nothing on
 * the device path (its buckets are cut once) or with one rank. */
TORUS_MUST_CHECK int ttrain_exchange_set_bucket_kb(ttrain_exchange *ex, int kb);

/* The banner's lines about the exchange (verbose: --bucket-kb auto's
 * reason in full), and the summary's (dstep: the device step ran, so the
 * reductions were not timed). */
void ttrain_exchange_describe(const ttrain_exchange *ex, const tcomm_info *info,
                              int verbose, FILE *f);
void ttrain_exchange_summary(const ttrain_exchange *ex, int dstep, FILE *f);
void ttrain_exchange_close(ttrain_exchange *ex);

#endif
