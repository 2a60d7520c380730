/* trainer/backends/cuda/cuda_algo.h: the convolution algorithm cache of
 * the cuda backend (prefix tcuda_algo_), plain C with no CUDA type, so
 * make check tests it without a GPU (tests/unit/test_cuda_host.c).
 *
 * Contract: a key is everything that decides which cuDNN algorithm is
 * best and how much workspace it needs: the direction (forward, backward
 * data, backward filter), the input shape, the filter, strides, padding,
 * the data type and the memory layout. Two keys that differ in any field
 * are different entries; a lookup of an equal key returns what was put.
 * The backend asks cuDNN once per key (at plan, since the scratch arena
 * that holds the workspace is sized there) and every later plan of the
 * same shape, a batch change back or another layer of the same geometry
 * (ResNet-50 repeats most of its convolutions), reuses the answer. The
 * table grows by doubling; it never forgets. Errors: TENG_ENOMEM after
 * TORUS_FAIL. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_ALGO_H
#define TORUS_TRAINER_BACKENDS_CUDA_ALGO_H

#include <stddef.h>
#include <stdint.h>

typedef enum { TCUDA_FWD, TCUDA_BWD_DATA, TCUDA_BWD_FILTER } tcuda_dir;

typedef struct {
    int dir;        /* tcuda_dir */
    int n, c, h, w; /* input */
    int k, kh, kw;  /* filter */
    int sh, sw, ph, pw;
    int dtype;  /* cudnnDataType_t */
    int layout; /* cudnnTensorFormat_t */
} tcuda_algo_key;

typedef struct {
    int algo;         /* the cuDNN algorithm enum of the direction */
    size_t workspace; /* bytes it needs */
    int math;         /* the cudnnMathType_t to run it with */
} tcuda_algo_val;

typedef struct {
    tcuda_algo_key *key;
    tcuda_algo_val *val;
    unsigned char *used;
    size_t cap, n;
    size_t hits, misses; /* lookups, for the verbose summary and tests */
} tcuda_algo_cache;

/* FNV-1a over the key's fields. */
uint64_t tcuda_algo_hash(const tcuda_algo_key *k);
int tcuda_algo_key_equal(const tcuda_algo_key *a, const tcuda_algo_key *b);
/* 1 and *out set if key is cached, else 0 (counts a hit or a miss). */
int tcuda_algo_get(tcuda_algo_cache *c, const tcuda_algo_key *key,
                   tcuda_algo_val *out);
/* Adds or replaces key's value. TENG_OK or TENG_ENOMEM. */
int tcuda_algo_put(tcuda_algo_cache *c, const tcuda_algo_key *key,
                   const tcuda_algo_val *val);
void tcuda_algo_free(tcuda_algo_cache *c);

#endif
