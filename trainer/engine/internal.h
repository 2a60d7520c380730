/* internal.h: helpers shared by the engine's source files (not public). */
#ifndef TORUS_TRAINER_ENGINE_INTERNAL_H
#define TORUS_TRAINER_ENGINE_INTERNAL_H

#include <stdio.h>

#include "trainer/engine/backend.h"
#include "trainer/engine/engine.h"

/* Records "file:line: message" in net->err and evaluates to code. */
#define TENG_FAIL(net, code, ...) \
    _teng_fail((net), (code), __FILE__, __LINE__, __VA_ARGS__)

int _teng_fail(teng_net *net, int code, const char *file, int line,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Bytes are rounded up to this in every arena: a cache line, and enough
 * for the widest vector loads of any backend. */
#define TENG_ALIGN 64
static inline size_t _teng_align(size_t n)
{
    return (n + TENG_ALIGN - 1) & ~(size_t)(TENG_ALIGN - 1);
}

#endif
