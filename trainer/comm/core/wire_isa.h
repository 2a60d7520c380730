/* core/wire_isa.h: the SIMD variants of the wire kernels and the scalar
 * reference conversions, exposed so the unit tests can compare every
 * variant against the reference on the same inputs. */
#ifndef TORUS_TCOMM_WIRE_ISA_H
#define TORUS_TCOMM_WIRE_ISA_H

#include <stdint.h>

enum { TC_ISA_SCALAR = 0, TC_ISA_F16C = 1, TC_ISA_AVX512 = 2 };

/* The variant in use (chosen from cpuid and TCOMM_SIMD on first call). */
int tc_wire_isa(void);
/* Force a variant; -1 if this CPU lacks it. */
int tc_wire_set_isa(int isa);

uint16_t tc_half_from_float(float f);
float tc_float_from_half(uint16_t h);
uint16_t tc_bf16_from_float(float f);

#endif
