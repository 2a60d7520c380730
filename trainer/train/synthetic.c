/* synthetic.c: the synthetic data source (see source.h). */
#include <stdlib.h>
#include <string.h>

#include "trainer/engine/rng.h"
#include "trainer/train/source.h"

typedef struct {
    float *pool;     /* pool_n images */
    size_t img;      /* floats per image */
    int pool_n, classes, next;
    uint64_t served;
} _synth;

static int _next(ttrain_source *s, float *x, int32_t *y, int n)
{
    _synth *p = s->impl;
    for (int i = 0; i < n; i++) {
        memcpy(x + (size_t)i * p->img, p->pool + (size_t)p->next * p->img,
               p->img * sizeof(float));
        /* Labels from a hash of the sample counter: fixed per sample, so a
         * model can fit them, and balanced over the classes. */
        y[i] = (int32_t)(teng_hash64(p->served++) % (uint64_t)p->classes);
        p->next = (p->next + 1) % p->pool_n;
    }
    return 0;
}

static void _close(ttrain_source *s)
{
    _synth *p = s->impl;
    if (p)
        free(p->pool);
    free(p);
    s->impl = NULL;
}

int ttrain_synthetic_open(ttrain_source *s, const tmodel_spec *m,
                          int max_batch, uint64_t seed)
{
    _synth *p = calloc(1, sizeof(*p));
    teng_rng r;
    memset(s, 0, sizeof(*s));
    if (!p)
        return -1;
    p->img = (size_t)m->in_channels * m->image_size * m->image_size;
    p->pool_n = max_batch;
    p->classes = m->classes;
    p->pool = malloc(p->img * (size_t)p->pool_n * sizeof(float));
    if (!p->pool) {
        free(p);
        return -1;
    }
    teng_rng_seed(&r, seed ^ 0x5eed5eedULL);
    for (size_t i = 0; i < p->img * (size_t)p->pool_n; i++)
        p->pool[i] = teng_rng_normal(&r);
    s->next = _next;
    s->close = _close;
    s->impl = p;
    return 0;
}
