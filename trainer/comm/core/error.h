/* core/error.h: how libtcomm reports a failure (layer core, lowest of the
 * library). Every function that can fail returns a tcomm_rc and, where it
 * detects the failure, records the message with TORUS_FAIL (the project's
 * one convention, common/torus_error.h); callers read it with
 * torus_error_msg(). */
#ifndef TORUS_TCOMM_CORE_ERROR_H
#define TORUS_TCOMM_CORE_ERROR_H

#include "common/torus_error.h"
#include "trainer/comm/tcomm.h"

/* For the CUDA parts (transport/nccl.c, fusion/gpu_fusion.c): return
 * TCOMM_ERR_TRANSPORT naming the rank, the call and CUDA's reason. The
 * caller includes the CUDA runtime header. */
#define TC_CUDA_TRY(rank, call)                                               \
    do {                                                                      \
        cudaError_t _e = (call);                                              \
        if (_e != cudaSuccess)                                                \
            return TORUS_FAIL(TCOMM_ERR_TRANSPORT, "rank %d: %s: %s", (rank), \
                              #call, cudaGetErrorString(_e));                 \
    } while (0)

#endif
