/* trainer/backends/cuda/tcuda.h: the cuDNN/cuBLAS GPU backend (prefix
 * tcuda_) as the registry (trainer/backends/registry.c) sees it.
 *
 * The backend is a loadable module, torus_cuda.so, installed in
 * $(pkglibdir) (the torus-cuda package): torus-train and its libraries link
 * no CUDA library, and the registry dlopens the module only when a cuda
 * backend is asked for. The module's undefined symbols (the engine,
 * libtcomm, the error convention) resolve against the program that loads
 * it, which is linked with --export-dynamic. The module exports one
 * object, TCUDA_MODULE_SYMBOL, of type tcuda_module; everything else the
 * registry needs goes through it. Built when configure found CUDA, cuDNN
 * and cuBLAS (TORUS_HAVE_CUDNN). */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_H
#define TORUS_TRAINER_BACKENDS_CUDA_H

#include <stddef.h>

#include "trainer/backends/cuda/tcuda_fastpath.h"
#include "trainer/engine/backend.h"

/* The module's file name, looked for in each folder of TORUS_BACKEND_PATH
 * and then in $(pkglibdir). */
#define TCUDA_MODULE_FILE   "torus_cuda.so"
#define TCUDA_MODULE_SYMBOL "tcuda_module_entry"
/* Bumped when tcuda_module changes shape. */
#define TCUDA_MODULE_ABI 3

typedef struct tcuda_module {
    int abi;             /* TCUDA_MODULE_ABI of the module's build */
    const char *version; /* the torus PACKAGE_VERSION it was built from */
    /* "cuda" (alias "gpu"); its probe is 1 when a device is found. */
    const teng_backend_desc *fp32;
    /* "cuda-fp16": fp16 activations and working copies, fp32 masters (see
     * cuda_internal.h); never chosen by "auto". */
    const teng_backend_desc *fp16;
    /* Devices this process sees (cudaGetDeviceCount; 0 when CUDA fails). */
    int (*device_count)(void);
    /* Device memory in use and in all on bk's device (cudaMemGetInfo:
     * every process's use). 0, or -1 when the query fails. */
    int (*device_memory)(const teng_backend *bk, size_t *used, size_t *total);
    /* Whether the driver and the libraries the module loaded can run it:
     * 0, or -1 with one sentence in why naming what is missing or too old
     * (the driver, libcudnn.so.9, a version). */
    int (*check)(char *why, size_t n);
    /* One line: each CUDA library the module loaded, its file and version,
     * and the driver's CUDA version. */
    const char *(*versions)(void);
    /* bk's fast-path counters (tcuda_fastpath.h) into *out: 0, or -1
     * when bk is not one of the module's backends. */
    int (*fastpath)(const teng_backend *bk, tcuda_fastpath *out);
    /* The convolution algorithms bk measured or read (the tune cache
     * file's text, cuda_tune.h) into *text, malloc'ed, *len bytes: 0, or
     * -1 when bk is not one of the module's backends or memory ran out.
     * tune_import: another rank's text as bk's tune cache, checked as a
     * file is (a foreign device's is said and ignored): 0, or -1 when bk
     * is not the module's. Together, one rank measures and every rank
     * runs its algorithms (torus-train). */
    int (*tune_export)(const teng_backend *bk, char **text, size_t *len);
    int (*tune_import)(teng_backend *bk, const char *text, size_t len);
} tcuda_module;

/* The module's entry (cuda_module.c), TCUDA_MODULE_SYMBOL. */
extern const tcuda_module tcuda_module_entry;
/* The module's own descriptors and queries (cuda_backend.c). */
extern const teng_backend_desc tcuda_backend_desc;
extern const teng_backend_desc tcuda_backend_fp16_desc;
int tcuda_device_count(void);
int tcuda_device_memory(const teng_backend *bk, size_t *used, size_t *total);
int tcuda_fastpath_get(const teng_backend *bk, tcuda_fastpath *out);
int tcuda_tune_export(const teng_backend *bk, char **text, size_t *len);
int tcuda_tune_import(teng_backend *bk, const char *text, size_t len);

#endif
