/* cuda_util.c: the cuda backend's error helpers, which every one of its
 * files calls through the TCUDA_RT / TCUDA_DNN / TCUDA_BLAS / TCUDA_K
 * checks of cuda_internal.h: a failed CUDA runtime, cuDNN or cuBLAS call
 * recorded the project's way (TORUS_FAIL at the caller's file:line, the
 * library's own text for the status) and returned as TENG_EBACKEND. A
 * file below all the others, as dnnl_util.c is for the dnnl backend, so
 * that cuda_backend.c calls down into cuda_layers.c, cuda_exec.c and the
 * rest and none of them calls back into it. */
#include "common/torus_error.h"
#include "trainer/backends/cuda/cuda_internal.h"

int _tcuda_fail_rt(const char *file, int line, const char *what, int err)
{
    return torus_error_set_(TENG_EBACKEND, file, line, "%s: %s", what,
                            cudaGetErrorString((cudaError_t)err));
}

int _tcuda_fail_dnn(const char *file, int line, const char *what, int st)
{
    return torus_error_set_(TENG_EBACKEND, file, line, "%s: %s", what,
                            cudnnGetErrorString((cudnnStatus_t)st));
}

int _tcuda_fail_blas(const char *file, int line, const char *what, int st)
{
    return torus_error_set_(TENG_EBACKEND, file, line, "%s: %s", what,
                            cublasGetStatusString((cublasStatus_t)st));
}
