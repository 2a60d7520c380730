/* train/gpu_exchange_cuda.c: the table ttrain_gx_ops
 * (ttrain_gpu_exchange.h) that the cuda backend's module exports for
 * torus-train's exchange.c (its device implementation): libtcomm's
 * tcomm_gpu functions themselves, so exchange.c calls them with no
 * function of the module in between. Built into the module only: it links
 * CUDA and NCCL through tcomm_gpu. */
#include "trainer/train/ttrain_gpu_exchange.h"

const ttrain_gx_ops ttrain_gx_cuda_ops = {
    .create = tcomm_gpu_create,
    .add = tcomm_gpu_add,
    .seal = tcomm_gpu_seal,
    .ready = tcomm_gpu_ready,
    .capturable = tcomm_gpu_capturable,
    .finish_device = tcomm_gpu_finish_device,
    .finish_host = tcomm_gpu_finish_host,
    .abandon = tcomm_gpu_abandon,
    .allreduce = tcomm_gpu_allreduce,
    .bucket_count = tcomm_gpu_bucket_count,
    .plan_text = tcomm_gpu_plan_text,
    .path = tcomm_gpu_path,
    .destroy = tcomm_gpu_destroy,
};
