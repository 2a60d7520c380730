/* tests/fuzz/fuzz_input.h: the fuzz targets' reader of their input bytes
 * (a byte, a big-endian 64-bit word; zeros once the input is spent), shared
 * by the HDF5 mutators of fuzz_shard.c and fuzz_ckpt.c. */
#ifndef TORUS_TESTS_FUZZ_INPUT_H
#define TORUS_TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct _in {
    const uint8_t *p;
    size_t n;
} _in;

static inline uint8_t _u8(_in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint64_t _u64(_in *in)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v = v << 8 | _u8(in);
    return v;
}

#endif
