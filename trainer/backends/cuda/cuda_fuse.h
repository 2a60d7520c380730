/* trainer/backends/cuda/cuda_fuse.h: which BN -> residual add -> ReLU
 * chains the cuda backend runs as one cuDNN call (prefix tcuda_fuse_),
 * decided on the engine's layer graph in plain C, so that it is tested
 * without a GPU (tests/unit/test_cuda_host.c).
 *
 * A chain is fused when the backend runs in FP16 NHWC (the layout cuDNN's
 * cudnnBatchNormalizationForwardTrainingEx with
 * CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION needs), the residual add has its
 * ReLU, its first input (the one it writes in place over) comes from a BN
 * layer without its own ReLU whose output nothing else reads, the add's
 * two inputs differ, and the channels are a multiple of 4 (cuDNN's
 * fp16 NHWC kernels). ResNet-50 has 16 such chains, one per bottleneck
 * block; the projection shortcut's BN (the add's second input) is not
 * fused. In training, the BN's forward is then deferred to the add's:
 * y = ReLU(BN(x) + z) in one call, the BN's own output never written;
 * backward and evaluation are unchanged. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_FUSE_H
#define TORUS_TRAINER_BACKENDS_CUDA_FUSE_H

#include "trainer/engine/graph.h"

/* For each layer li of net: bn_of[li] = the BN layer that the residual
 * add li runs fused, else -1; deferred[li] = 1 for that BN layer, else 0
 * (both arrays of net->nl). half_nhwc: the backend's FP16 NHWC mode (0:
 * nothing is fused). Returns the number of fused chains. */
int tcuda_fuse_plan(const teng_net *net, int half_nhwc, int *bn_of,
                    unsigned char *deferred);

#endif
