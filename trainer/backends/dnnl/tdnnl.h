/* tdnnl.h: the oneDNN (f32, CPU) backend's entry point: its descriptor for
 * the backend registry (trainer/backends/registry.c). Nothing else of the
 * backend is visible above it. */
#ifndef TORUS_TRAINER_BACKENDS_DNNL_H
#define TORUS_TRAINER_BACKENDS_DNNL_H

#include "trainer/engine/backend.h"

extern const teng_backend_desc tdnnl_backend_desc;

#endif
