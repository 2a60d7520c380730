/* api/tcomm_api.h: libtoruscomm, the narrow and versioned C API of
 * libtcomm's wire kernels for callers outside C (the Python package's DDP
 * hooks, python/torus/distributed.py, through ctypes). The hooks move the
 * buckets with torch.distributed; what they take from here are the passes
 * over every gradient value that torus-train's collectives run: fp32 to the
 * fp16/bf16 wire, back, the fused decode-and-add of a reduction hop, and
 * the scale-and-round of a rank's own values, each dispatched once to
 * AVX-512, F16C or scalar code (core/wire.c).
 * Nothing else of libtcomm is in the shared library, so loading it pulls
 * in no MPI or PMIx.
 *
 * Versioning as libtorusdata's (data/api/tdata_api.h): TCOMM_API_VERSION
 * grows when a function is added; a changed meaning is a new soname.
 * Wire codes are tcomm_wire's (tcomm.h): 0 fp32, 1 fp16, 2 bf16; the
 * functions return 0, or TCOMM_API_EINVAL for an unknown code or a NULL
 * buffer with a count above 0, and then touch nothing. Includes no torus
 * header (tcomm_api.c reaches core/wire.h). */
#ifndef TORUS_TCOMM_API_TCOMM_API_H
#define TORUS_TCOMM_API_TCOMM_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TCOMM_API_VERSION 1
#define TCOMM_API_EINVAL 22

unsigned tcomm_api_version(void);
/* The kernels in use: "avx512", "f16c" or "scalar" (TCOMM_SIMD forces a
 * lower one, as for torus-train). */
const char *tcomm_api_isa(void);
/* dst[i] = src[i] on the wire (round to nearest even). */
int tcomm_api_encode(int wire, const float *src, void *dst, size_t n);
/* dst[i] = src[i] widened to fp32. */
int tcomm_api_decode(int wire, const void *src, float *dst, size_t n);
/* acc[i] += src[i] widened to fp32: one hop of a reduction. */
int tcomm_api_decode_add(int wire, const void *src, float *acc, size_t n);
/* x[i] = x[i] * scale, rounded to what the wire carries (widened back to
 * fp32), in place, in one pass: a rank's own contribution made what its
 * peers will receive of it, so a sum does not depend on which rank adds
 * it. fp32 wire: the scale alone. */
int tcomm_api_scale_round(int wire, float *x, size_t n, float scale);

#ifdef __cplusplus
}
#endif

#endif
