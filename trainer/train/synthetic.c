/* synthetic.c: the synthetic data source (see ttrain_source.h), float
 * batches, or 8-bit ones for the production input path. */
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "common/torus_share.h"
#include "trainer/engine/rng.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_source.h"

typedef struct {
    float *pool; /* max_batch images */
    int32_t *labels;
    /* 8-bit batches (ttrain_synthetic_use_u8): max_batch images H x W x C
     * and their flips, in the backend's host memory */
    teng_backend *bk;
    uint8_t *px, *flips;
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
     * global batch is split over ranks. Without a global batch set (the
     * engine tests) the ranks' batches are even. */
    int gb = s->global_batch ? s->global_batch : n * p->world, first;
    if (torus_share(gb, p->world, p->rank, &first) != n)
        return TORUS_FAIL(TTRAIN_EDATA,
                          "rank %d: batch %d is not its share of the global "
                          "batch %d",
                          p->rank, n, gb);
    uint64_t g = s->samples + (uint64_t)first;
    for (int i = 0; i < n; i++)
        p->labels[i] = (int32_t)(teng_hash64(p->base + g + (uint64_t)i) %
                                 (uint64_t)p->classes);
    s->samples += (uint64_t)gb;
    *out = (ttrain_batch){.x = p->pool, .y = p->labels, .n = n};
    if (p->px) {
        /* The ImageNet mean and std, as a packed dataset's index has them. */
        static const float mean[3] = {0.485f, 0.456f, 0.406f},
                           sd[3] = {0.229f, 0.224f, 0.225f};
        out->x = NULL;
        out->px = p->px;
        out->flips = p->flips;
        for (int c = 0; c < 3; c++) {
            out->scale[c] = 1.0f / (255.0f * sd[c]);
            out->bias[c] = -mean[c] / sd[c];
        }
    }
    return 0;
}

static void _close(ttrain_source *s)
{
    _synth *p = s->impl;
    if (p) {
        free(p->pool);
        free(p->labels);
        if (p->px)
            teng_backend_host_free(p->bk, p->px);
        if (p->flips)
            teng_backend_host_free(p->bk, p->flips);
    }
    free(p);
    s->impl = NULL;
}

int ttrain_synthetic_open(ttrain_source *s, const tmodel_spec *m, int max_batch,
                          int first, uint64_t seed, int rank, int world)
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
    size_t skip = n / (size_t)max_batch * (size_t)first;
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

int ttrain_synthetic_use_u8(ttrain_source *s, const tmodel_spec *m,
                            teng_backend *bk, uint64_t seed)
{
    _synth *p = s->impl;
    if (m->in_channels != 3)
        return TORUS_FAIL(TTRAIN_EDATA,
                          "8-bit synthetic batches need 3 channels, model "
                          "has %d",
                          m->in_channels);
    size_t n = (size_t)m->image_size * m->image_size * 3 * (size_t)p->max_batch;
    p->bk = bk;
    p->px = teng_backend_host_alloc(bk, n);
    p->flips = teng_backend_host_alloc(bk, (size_t)p->max_batch);
    if (!p->px || !p->flips)
        return TORUS_FAIL(TTRAIN_ENOMEM,
                          "no memory for %zu bytes of 8-bit synthetic "
                          "images",
                          n);
    /* Random pixels and half the images mirrored, like a decoded batch:
     * the backend normalises and mirrors them as it would real ones. */
    for (size_t i = 0; i < n; i++)
        p->px[i] = (uint8_t)(teng_hash64(seed ^ (uint64_t)i) >> 56);
    for (int i = 0; i < p->max_batch; i++)
        p->flips[i] = (uint8_t)(teng_hash64(~seed ^ (uint64_t)i) & 1);
    return 0;
}
