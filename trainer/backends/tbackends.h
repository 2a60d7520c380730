/* tbackends.h: the registry of compute backends (prefix tbackends_).
 *
 * The engine knows backends only through the teng_backend_desc each one
 * exports (trainer/engine/backend.h); this layer, above the engine and the
 * backends, lists the descriptors compiled in and opens one by name, so
 * that adding a backend (cuDNN next) touches this table and nothing in
 * the engine. Names: "auto" is the first listed backend whose probe
 * succeeds (the table is ordered best first); every other name is a
 * backend's name or one of its aliases ("cpu" for "dnnl").
 */
#ifndef TORUS_TRAINER_BACKENDS_H
#define TORUS_TRAINER_BACKENDS_H

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
/* 1 if name is "auto" or names a backend compiled in, else 0. */
int tbackends_known(const char *name);
/* Names of the backends compiled in, best first, separated by ", " ("" when
 * none). */
const char *tbackends_list(void);

#endif
