/* tbackends.h: the registry of compute backends (prefix tbackends_).
 *
 * The engine knows backends only through the teng_backend_desc each one
 * exports (trainer/engine/backend.h); this layer, above the engine and the
 * backends, lists the descriptors linked in (oneDNN) and those of the
 * loadable cuda module (torus_cuda.so, dlopened from TORUS_BACKEND_PATH or
 * $(pkglibdir) when first needed), and opens one by name, so that adding a
 * backend touches this layer and nothing in the engine. Names: "auto" is
 * the first backend whose probe succeeds (cuda when its module loads and
 * sees a GPU, else dnnl); every other name is a backend's name or one of
 * its aliases ("cpu" for "dnnl", "gpu" for "cuda").
 */
#ifndef TORUS_TRAINER_BACKENDS_H
#define TORUS_TRAINER_BACKENDS_H

#include "trainer/backends/cuda/tcuda.h"
#include "trainer/engine/teng.h"

/* Opens the backend called name. Returns TENG_OK, or TENG_EINVAL (unknown
 * or not built in) or the backend's own code, with the message in
 * torus_error_msg(). */
int tbackends_open(const char *name, const teng_backend_opts *opts,
                   teng_backend **out);
/* The GPUs that backend `name` chooses from: the devices this
 * process sees when name resolves ("auto" as tbackends_open does) to a GPU
 * backend, 0 for a CPU backend, an unknown name or without CUDA. */
int tbackends_gpus(const char *name);
/* Device memory in use and in all on a GPU backend's device (the whole
 * device's, every process's); -1 for a CPU backend. */
int tbackends_device_memory(const teng_backend *bk, size_t *used,
                            size_t *total);
/* A cuda backend's fast-path counters (tcuda_fastpath.h): 0, or -1 for
 * any other backend. */
int tbackends_fastpath(const teng_backend *bk, tcuda_fastpath *out);
/* A cuda backend's convolution algorithms as text, and another rank's
 * taken as its own (tcuda_module.tune_export/import): 0, or -1 for any
 * other backend (or TCUDA_TUNE=0 for the import). */
int tbackends_tune_export(const teng_backend *bk, char **text, size_t *len);
int tbackends_tune_import(teng_backend *bk, const char *text, size_t len);
/* 1 if name is "auto" or names a backend linked in or of the cuda module
 * (loaded or not), else 0. */
int tbackends_known(const char *name);
/* Names of the backends, the linked ones first, separated by ", ". */
const char *tbackends_list(void);
/* A symbol of the loaded cuda module (dlsym), NULL when no module is
 * loaded and checked or it lacks the symbol: how layers above reach the
 * module's other parts (the GPU gradient exchange). */
void *tbackends_module_symbol(const char *name);
/* The loaded module's file, and its line of CUDA library files and
 * versions; NULL when no module is loaded and checked. */
const char *tbackends_module_path(void);
const char *tbackends_module_versions(void);
/* Why the cuda module is not usable (the sentence tbackends_open reports),
 * "" when it is. */
const char *tbackends_module_error(void);
/* Why "auto" chose what it chose, one sentence: the cuda module's reason
 * when it is unusable (not installed, does not load, no driver), "no GPU
 * visible" when it loaded but sees none, or the GPUs it sees. */
const char *tbackends_auto_why(void);
/* For a program that links the cuda backend in (the GPU checks): use m as
 * the module, with no file to load; its check runs now. */
void tbackends_use_module(const tcuda_module *m);

#endif
