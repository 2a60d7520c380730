/* dnnl_backend.h: the oneDNN (f32, CPU) backend's entry point. */
#ifndef TORUS_TRAINER_DNNL_BACKEND_H
#define TORUS_TRAINER_DNNL_BACKEND_H

#include <stddef.h>

#include "trainer/engine/backend.h"

int tdnnl_backend_create(const teng_backend_opts *opts, teng_backend **out,
                         char *err, size_t errlen);

#endif
