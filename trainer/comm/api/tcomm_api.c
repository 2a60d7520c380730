/* api/tcomm_api.c: libtoruscomm's exported functions (api/tcomm_api.h),
 * thin checks in front of core/wire.c's kernels. Each call converts the
 * whole range in the calling thread; ctypes releases the GIL around it, so
 * a Python hook's thread converts while the backward pass goes on. */
#include <stdint.h>

#include "trainer/comm/api/tcomm_api.h"
#include "trainer/comm/core/wire.h"
#include "trainer/comm/core/wire_isa.h"

unsigned tcomm_api_version(void)
{
    return TCOMM_API_VERSION;
}

const char *tcomm_api_isa(void)
{
    switch (tc_wire_isa()) {
    case TC_ISA_AVX512:
        return "avx512";
    case TC_ISA_F16C:
        return "f16c";
    default:
        return "scalar";
    }
}

static int _bad(int wire, const void *a, const void *b, size_t n)
{
    if (wire < TCOMM_WIRE_FP32 || wire >= TCOMM_WIRE_COUNT)
        return 1;
    return n > 0 && (!a || !b);
}

int tcomm_api_encode(int wire, const float *src, void *dst, size_t n)
{
    if (_bad(wire, src, dst, n))
        return TCOMM_API_EINVAL;
    tc_encode((tcomm_wire)wire, src, dst, n);
    return 0;
}

int tcomm_api_decode(int wire, const void *src, float *dst, size_t n)
{
    if (_bad(wire, src, dst, n))
        return TCOMM_API_EINVAL;
    tc_decode((tcomm_wire)wire, src, dst, n);
    return 0;
}

int tcomm_api_decode_add(int wire, const void *src, float *acc, size_t n)
{
    if (_bad(wire, src, acc, n))
        return TCOMM_API_EINVAL;
    tc_decode_add((tcomm_wire)wire, src, acc, n);
    return 0;
}

int tcomm_api_scale_round(int wire, float *x, size_t n, float scale)
{
    if (_bad(wire, x, x, n))
        return TCOMM_API_EINVAL;
    /* Block by block, so each block is scaled, encoded and decoded while
     * it is in cache: one pass over memory. */
    enum { BLOCK = 4096 };
    uint16_t tmp[BLOCK];
    for (size_t k = 0; k < n; k += BLOCK) {
        size_t m = n - k < BLOCK ? n - k : BLOCK;
        if (scale != 1.0f)
            tc_scale(x + k, m, scale);
        tc_round_to_wire((tcomm_wire)wire, x + k, m, tmp);
    }
    return 0;
}
