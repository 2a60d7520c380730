/* internal.h: helpers shared by the engine's source files (not public). */
#ifndef TORUS_TRAINER_ENGINE_INTERNAL_H
#define TORUS_TRAINER_ENGINE_INTERNAL_H

#include <stdio.h>

#include "common/torus_error.h"
#include "trainer/engine/backend.h"
#include "trainer/engine/teng.h"

/* Bytes are rounded up to this in every arena: a cache line, and enough
 * for the widest vector loads of any backend. */
#define TENG_ALIGN 64
static inline size_t _teng_align(size_t n)
{
    return (n + TENG_ALIGN - 1) & ~(size_t)(TENG_ALIGN - 1);
}

#endif
