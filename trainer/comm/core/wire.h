/* core/wire.h: the wire conversion kernels of libtcomm (layer core,
 * wire.c): fp32 to and from the fp16/bf16 wire formats, the fused
 * decode-and-add of a reduction step, and the inf/nan counts. Each
 * dispatches once to AVX-512, F16C or scalar code (wire_isa.h). */
#ifndef TORUS_TCOMM_CORE_WIRE_H
#define TORUS_TCOMM_CORE_WIRE_H

#include <stddef.h>

#include "trainer/comm/tcomm.h"

void tc_encode(tcomm_wire w, const float *src, void *dst, size_t n);
/* tc_encode of s * src (the bits tc_scale then tc_encode give), in one
 * pass over src. */
void tc_encode_scaled(tcomm_wire w, const float *src, void *dst, size_t n,
                      float s);
/* tc_encode that also returns how many values are inf/nan. */
size_t tc_encode_count(tcomm_wire w, const float *src, void *dst, size_t n);
void tc_decode(tcomm_wire w, const void *src, float *dst, size_t n);
void tc_decode_add(tcomm_wire w, const void *src, float *acc, size_t n);
/* tc_decode that also returns how many values are inf/nan. */
size_t tc_decode_count(tcomm_wire w, const void *src, float *dst, size_t n);
void tc_scale(float *x, size_t n, float s);
size_t tc_count_nonfinite(const float *x, size_t n);
/* Round fp32 values to what the wire can carry, in place. */
void tc_round_to_wire(tcomm_wire w, float *x, size_t n, void *tmp);

#endif
