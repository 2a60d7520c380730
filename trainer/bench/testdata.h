/* trainer/bench/testdata.h: reproducible all-reduce inputs and their exact
 * expectation. Rank r's element i is a hash of (seed, r, i) mapped to [-1, 1],
 * so any rank can compute the double-precision reference sum of every element
 * without exchanging data, and check its own result against it. Used by
 * torus-bench's #wrong column and by the comm tests; a tool's helper,
 * not part of libtcomm. */
#ifndef TORUS_BENCH_TESTDATA_H
#define TORUS_BENCH_TESTDATA_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/comm/tcomm.h"

void bench_testdata_fill(float *x, size_t count, int rank, uint64_t seed);

/* Count the elements of a result of an all-reduce over P ranks (scaled by
 * scale, 1/P for an average) that differ from the double reference by more
 * than the error bound of the wire: (P + 3) roundings of eps times the sum
 * of magnitudes. The first bad index goes to *first (if not NULL). */
size_t bench_testdata_wrong(const float *x, size_t count, int P, uint64_t seed,
                            double scale, tcomm_wire wire, size_t *first);

#endif
