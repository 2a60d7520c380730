/* synthetic.c: the synthetic data source (see ttrain_source.h). */
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/engine/rng.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_source.h"

typedef struct {
    float *pool; /* max_batch images */
    int32_t *labels;
    int max_batch, classes;
    int rank, world;
    uint64_t base; /* label stream of this seed */
} _synth;

static int _next(ttrain_source *s, int n, ttrain_batch *out)
{
    _synth *p = s->impl;
    if (n > p->max_batch)
        return TORUS_FAIL(TTRAIN_EDATA,
                          "batch %d is larger than the synthetic pool (%d)", n,
                          p->max_batch);
    /* Labels are a hash of the sample's global index: balanced over the
     * classes, reproducible from the seed, and independent of how the
     * global batch is split over ranks. With one rank the index is the
     * sample counter. */
    uint64_t g = s->samples / (uint64_t)n * (uint64_t)n * (uint64_t)p->world +
                 (uint64_t)p->rank * (uint64_t)n;
    for (int i = 0; i < n; i++)
        p->labels[i] = (int32_t)(teng_hash64(p->base + g + (uint64_t)i) %
                                 (uint64_t)p->classes);
    s->samples += (uint64_t)n;
    *out = (ttrain_batch){.x = p->pool, .y = p->labels, .n = n};
    return 0;
}

static void _close(ttrain_source *s)
{
    _synth *p = s->impl;
    if (p) {
        free(p->pool);
        free(p->labels);
    }
    free(p);
    s->impl = NULL;
}

int ttrain_synthetic_open(ttrain_source *s, const tmodel_spec *m, int max_batch,
                          uint64_t seed, int rank, int world)
{
    _synth *p = calloc(1, sizeof(*p));
    teng_rng r;
    memset(s, 0, sizeof(*s));
    if (!p)
        return -1;
    size_t n = (size_t)m->in_channels * m->image_size * m->image_size *
               (size_t)max_batch;
    p->max_batch = max_batch;
    p->rank = rank;
    p->world = world;
    p->classes = m->classes;
    p->base = seed << 32;
    p->pool = malloc(n * sizeof(float));
    p->labels = malloc(sizeof(int32_t) * (size_t)max_batch);
    s->impl = p;
    if (!p->pool || !p->labels) {
        _close(s);
        return -1;
    }
    /* One stream over the global positions; this rank skips to its own
     * (rank 0 draws exactly what a single process draws). */
    size_t skip = n * (size_t)rank;
    teng_rng_seed(&r, seed ^ 0x5eed5eedULL);
    for (size_t i = 0; i < skip; i++)
        (void)teng_rng_normal(&r);
    for (size_t i = 0; i < n; i++)
        p->pool[i] = teng_rng_normal(&r);
    s->next = _next;
    s->seek = ttrain_source_seek_counter;
    s->close = _close;
    return 0;
}
