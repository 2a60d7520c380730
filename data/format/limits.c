/* format/limits.c: the process-wide decompression-bomb limits
 * (format/tdata_format.h). Atomics, because decode threads read them while
 * the program that set them may still be starting others; a value set by a
 * program's option is marked explicit so the environment never undoes it. */
#include <errno.h>
#include <stdlib.h>

#include "common/torus_error.h"
#include "data/format/tdata_format.h"

/* 0 means "not set": the getters then return the default. */
static uint64_t _max_pixels, _max_idx;
static int _pixels_explicit, _idx_explicit;

static uint64_t _get(uint64_t *v, uint64_t dflt)
{
    uint64_t x = __atomic_load_n(v, __ATOMIC_RELAXED);
    return x ? x : dflt;
}

uint64_t tdata_max_pixels(void)
{
    return _get(&_max_pixels, TDATA_MAX_PIXELS_DEFAULT);
}

uint64_t tdata_max_idx_bytes(void)
{
    return _get(&_max_idx, TDATA_MAX_IDX_BYTES_DEFAULT);
}

void tdata_set_max_pixels(uint64_t n)
{
    __atomic_store_n(&_max_pixels, n, __ATOMIC_RELAXED);
    __atomic_store_n(&_pixels_explicit, 1, __ATOMIC_RELAXED);
}

void tdata_set_max_idx_bytes(uint64_t n)
{
    __atomic_store_n(&_max_idx, n, __ATOMIC_RELAXED);
    __atomic_store_n(&_idx_explicit, 1, __ATOMIC_RELAXED);
}

/* Environment variable VAR into *v unless a program set it explicitly. */
static int _env(const char *var, uint64_t *v, const int *expl)
{
    const char *s = getenv(var);
    if (!s || !*s || __atomic_load_n(expl, __ATOMIC_RELAXED))
        return TDATA_OK;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end || x == 0 || s[0] == '-')
        return TORUS_FAIL(TDATA_EINVAL, "%s=%s: not a positive integer", var,
                          s);
    __atomic_store_n(v, (uint64_t)x, __ATOMIC_RELAXED);
    return TDATA_OK;
}

int tdata_limits_env(void)
{
    int rc = _env("TDATA_MAX_PIXELS", &_max_pixels, &_pixels_explicit);
    return rc ? rc : _env("TDATA_MAX_IDX_BYTES", &_max_idx, &_idx_explicit);
}
