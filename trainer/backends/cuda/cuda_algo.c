/* trainer/backends/cuda/cuda_algo.c: the convolution algorithm cache
 * (see cuda_algo.h): open addressing with linear probing, at most half
 * full, keys compared field by field (never by bytes: padding). */
#include "trainer/backends/cuda/cuda_algo.h"

#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/engine/teng.h"

#define _NFIELDS 14

static void _fields(const tcuda_algo_key *k, int f[_NFIELDS])
{
    int v[_NFIELDS] = {k->dir, k->n,  k->c,  k->h,  k->w,  k->k,     k->kh,
                       k->kw,  k->sh, k->sw, k->ph, k->pw, k->dtype, k->layout};
    memcpy(f, v, sizeof(v));
}

uint64_t tcuda_algo_hash(const tcuda_algo_key *k)
{
    int f[_NFIELDS];
    uint64_t h = 0xcbf29ce484222325ULL;
    _fields(k, f);
    for (int i = 0; i < _NFIELDS; i++)
        for (int b = 0; b < 4; b++) {
            h ^= (uint64_t)(((unsigned)f[i] >> (8 * b)) & 0xffu);
            h *= 0x100000001b3ULL;
        }
    return h;
}

int tcuda_algo_key_equal(const tcuda_algo_key *a, const tcuda_algo_key *b)
{
    int fa[_NFIELDS], fb[_NFIELDS];
    _fields(a, fa);
    _fields(b, fb);
    return !memcmp(fa, fb, sizeof(fa));
}

/* The slot of key, or of the first free slot on its probe path. */
static size_t _slot(const tcuda_algo_cache *c, const tcuda_algo_key *key)
{
    size_t i = (size_t)(tcuda_algo_hash(key) & (c->cap - 1));
    while (c->used[i] && !tcuda_algo_key_equal(&c->key[i], key))
        i = (i + 1) & (c->cap - 1);
    return i;
}

int tcuda_algo_get(tcuda_algo_cache *c, const tcuda_algo_key *key,
                   tcuda_algo_val *out)
{
    if (c->cap) {
        size_t i = _slot(c, key);
        if (c->used[i]) {
            *out = c->val[i];
            c->hits++;
            return 1;
        }
    }
    c->misses++;
    return 0;
}

static int _grow(tcuda_algo_cache *c)
{
    tcuda_algo_cache big = {0};
    big.cap = c->cap ? 2 * c->cap : 64;
    big.key = calloc(big.cap, sizeof(*big.key));
    big.val = calloc(big.cap, sizeof(*big.val));
    big.used = calloc(big.cap, 1);
    if (!big.key || !big.val || !big.used) {
        tcuda_algo_free(&big);
        return TORUS_FAIL(TENG_ENOMEM, "convolution algorithm cache: out "
                                       "of memory");
    }
    for (size_t i = 0; i < c->cap; i++)
        if (c->used[i]) {
            size_t j = _slot(&big, &c->key[i]);
            big.key[j] = c->key[i];
            big.val[j] = c->val[i];
            big.used[j] = 1;
        }
    big.n = c->n;
    big.hits = c->hits;
    big.misses = c->misses;
    tcuda_algo_free(c);
    *c = big;
    return TENG_OK;
}

int tcuda_algo_put(tcuda_algo_cache *c, const tcuda_algo_key *key,
                   const tcuda_algo_val *val)
{
    int rc;
    /* At most half full: probe paths stay short. */
    if (2 * (c->n + 1) > c->cap && (rc = _grow(c)))
        return rc;
    size_t i = _slot(c, key);
    if (!c->used[i]) {
        c->used[i] = 1;
        c->key[i] = *key;
        c->n++;
    }
    c->val[i] = *val;
    return TENG_OK;
}

void tcuda_algo_free(tcuda_algo_cache *c)
{
    free(c->key);
    free(c->val);
    free(c->used);
    memset(c, 0, sizeof(*c));
}
