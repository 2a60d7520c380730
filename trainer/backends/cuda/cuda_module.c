/* cuda_module.c: the one object torus_cuda.so exports (tcuda_module, see
 * tcuda.h): the backend descriptors and the checks that turn "the module
 * did not load" or "CUDA failed" into a sentence naming what is missing,
 * the driver, a library or a version, and the line of library files and
 * versions a GPU run prints first. */
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "trainer/backends/cuda/tcuda.h"
#ifdef TORUS_HAVE_NCCL
#include <nccl.h>
#endif

/* The file that holds symbol sym, or "?" when dladdr cannot tell. */
static const char *_file_of(const void *sym)
{
    Dl_info di;
    return dladdr(sym, &di) && di.dli_fname ? di.dli_fname : "?";
}

static int _check_driver(char *why, size_t n)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_LAZY);
    if (!h) {
        snprintf(why, n, "no NVIDIA driver: libcuda.so.1 cannot be loaded (%s)",
                 dlerror());
        return -1;
    }
    int drv = 0;
    /* Minor version compatibility: a driver of the same major runs it. */
    if (cudaDriverGetVersion(&drv) != cudaSuccess ||
        drv / 1000 < CUDART_VERSION / 1000) {
        snprintf(why, n,
                 "the NVIDIA driver supports CUDA %d.%d, but the cuda module "
                 "was built with CUDA %d.%d: update the driver",
                 drv / 1000, drv % 1000 / 10, CUDART_VERSION / 1000,
                 CUDART_VERSION % 1000 / 10);
        return -1;
    }
    return 0;
}

static int _check(char *why, size_t n)
{
    if (_check_driver(why, n))
        return -1;
    size_t dnn = cudnnGetVersion();
    if (dnn / 10000 != CUDNN_MAJOR) {
        snprintf(why, n,
                 "%s is cuDNN %zu.%zu, the cuda module needs cuDNN %d (%s)",
                 _file_of((const void *)cudnnGetVersion), dnn / 10000,
                 dnn % 10000 / 100, CUDNN_MAJOR, "libcudnn.so.9");
        return -1;
    }
#ifdef TORUS_HAVE_NCCL
    int nv = 0;
    if (ncclGetVersion(&nv) != ncclSuccess || nv / 10000 != NCCL_MAJOR) {
        snprintf(why, n, "%s is NCCL %d, the cuda module needs NCCL %d",
                 _file_of((const void *)ncclGetVersion), nv / 10000,
                 NCCL_MAJOR);
        return -1;
    }
#endif
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(why, n, "the NVIDIA driver sees no GPU (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return -1;
    }
    return 0;
}

static const char *_versions(void)
{
    static char line[2048];
    int rt = 0, drv = 0, bmaj = 0, bmin = 0, bpat = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    cublasGetProperty(MAJOR_VERSION, &bmaj);
    cublasGetProperty(MINOR_VERSION, &bmin);
    cublasGetProperty(PATCH_LEVEL, &bpat);
    size_t dnn = cudnnGetVersion();
    int len = snprintf(
        line, sizeof line,
        "driver CUDA %d.%d; cudart %d.%d %s; cuBLAS %d.%d.%d %s; "
        "cuDNN %zu.%zu.%zu %s",
        drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10,
        _file_of((const void *)cudaRuntimeGetVersion), bmaj, bmin, bpat,
        _file_of((const void *)cublasGetProperty), dnn / 10000,
        dnn % 10000 / 100, dnn % 100, _file_of((const void *)cudnnGetVersion));
#ifdef TORUS_HAVE_NCCL
    int nv = 0;
    ncclGetVersion(&nv);
    if (len > 0 && (size_t)len < sizeof line)
        snprintf(line + len, sizeof line - (size_t)len, "; NCCL %d.%d.%d %s",
                 nv / 10000, nv % 10000 / 100, nv % 100,
                 _file_of((const void *)ncclGetVersion));
#else
    (void)len;
#endif
    return line;
}

const tcuda_module tcuda_module_entry = {
    .abi = TCUDA_MODULE_ABI,
    .version = PACKAGE_VERSION,
    .fp32 = &tcuda_backend_desc,
    .fp16 = &tcuda_backend_fp16_desc,
    .device_count = tcuda_device_count,
    .device_memory = tcuda_device_memory,
    .check = _check,
    .versions = _versions,
    .fastpath = tcuda_fastpath_get,
    .tune_export = tcuda_tune_export,
    .tune_import = tcuda_tune_import,
};
