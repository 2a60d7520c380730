/* trainer/bench/testdata.c: see testdata.h. */
#include <math.h>

#include "trainer/bench/testdata.h"

/* splitmix64: cheap, well mixed, and the same on every machine. */
static inline uint64_t _mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline float _value(uint64_t seed, int rank, size_t i)
{
    uint64_t h =
        _mix(seed ^ _mix(((uint64_t)(uint32_t)rank << 40) ^ (uint64_t)i));
    /* 24 random bits: exact in fp32, uniform in [-1, 1). */
    return (float)((double)(h >> 40) / 8388608.0 - 1.0);
}

void bench_testdata_fill(float *x, size_t count, int rank, uint64_t seed)
{
    for (size_t i = 0; i < count; i++)
        x[i] = _value(seed, rank, i);
}

size_t bench_testdata_wrong(const float *x, size_t count, int P, uint64_t seed,
                            double scale, tcomm_wire wire, size_t *first)
{
    double eps = wire == TCOMM_WIRE_FP32   ? 0x1p-24
                 : wire == TCOMM_WIRE_FP16 ? 0x1p-11
                                           : 0x1p-8;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        double sum = 0, mag = 0;
        for (int r = 0; r < P; r++) {
            double v = _value(seed, r, i);
            sum += v;
            mag += fabs(v);
        }
        sum *= scale;
        mag *= fabs(scale);
        /* fp16 subnormals are spaced 2^-24 apart: an absolute floor. */
        double tol =
            (P + 3) * (eps * mag + (wire == TCOMM_WIRE_FP16 ? 0x1p-24 : 0)) +
            1e-30;
        if (!(fabs((double)x[i] - sum) <= tol)) {
            if (!bad && first)
                *first = i;
            bad++;
        }
    }
    return bad;
}
