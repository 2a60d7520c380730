/* api/tdata_api.c: libtorusdata, the versioned C API over libtdata's
 * reader (see tdata_api.h). Thin: every option that the caller leaves at 0
 * takes torus-train's value (tdata_loader_opts_trainer), so a Python
 * training loop sees the trainer's transforms and shuffle. */
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "data/api/tdata_api.h"
#include "data/read/tdata_read.h"

struct tdata_api_set {
    tdata_dataset *ds;
};

struct tdata_api_loader {
    tdata_loader *l;
    size_t elem; /* bytes per value: 1 (u8) or 4 (f32) */
};

unsigned tdata_api_version(void)
{
    return TDATA_API_VERSION;
}

const char *tdata_api_errmsg(void)
{
    return torus_error_msg();
}

/* A struct from the caller must be at least as large as this version's. */
static int _size_ok(uint32_t got, size_t want, const char *what)
{
    if (got < want)
        return TORUS_FAIL(TDATA_EINVAL,
                          "%s of %u bytes, libtorusdata %d needs %zu "
                          "(the caller is older than the library's API)",
                          what, got, TDATA_API_VERSION, want);
    return 0;
}

int tdata_api_open(const char *index, tdata_api_set **out)
{
    *out = NULL;
    if (!index || !*index)
        return TORUS_FAIL(TDATA_EINVAL, "no dataset index given");
    tdata_api_set *s = calloc(1, sizeof *s);
    if (!s)
        return TORUS_FAIL(TDATA_ENOMEM, "%s: out of memory", index);
    int rc = tdata_dataset_open(index, &s->ds);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void tdata_api_close(tdata_api_set *set)
{
    if (!set)
        return;
    tdata_dataset_close(set->ds);
    free(set);
}

int tdata_api_info_get(const tdata_api_set *set, tdata_api_info *out)
{
    int rc = _size_ok(out->size, sizeof *out, "tdata_api_info");
    if (rc)
        return rc;
    const tdata_dataset_info *in = tdata_dataset_get_info(set->ds);
    *out = (tdata_api_info){.size = sizeof *out,
                            .num_shards = in->num_shards,
                            .num_classes = in->num_classes,
                            .num_images = in->num_images,
                            .dense = in->layout == TDATA_LAYOUT_DENSE};
    if (out->dense) {
        out->height = in->height;
        out->width = in->width;
        out->channels = in->channels;
    }
    memcpy(out->mean, in->mean, sizeof out->mean);
    memcpy(out->std, in->std, sizeof out->std);
    return 0;
}

const char *tdata_api_class_name(const tdata_api_set *set, int cls)
{
    const tdata_dataset_info *in = tdata_dataset_get_info(set->ds);
    if (cls < 0 || cls >= in->num_classes)
        return NULL;
    return tdata_dataset_class_name(set->ds, cls);
}

/* torus-train's options, then what the caller set. */
static void _opts(const tdata_api_opts *a, tdata_loader_opts *o)
{
    tdata_loader_opts_trainer(o, a->train ? TDATA_TRAIN : TDATA_EVAL,
                              a->batch_size, a->out_size);
    if (a->u8_nhwc) {
        o->order = TDATA_NHWC;
        o->dtype = TDATA_U8;
        o->normalize = 0;
    }
    o->rank = a->rank;
    o->world = a->world;
    o->seed = a->seed;
    o->max_bad = a->max_bad;
    /* The trainer evaluates every test image (no dropped tail). */
    o->drop_remainder =
        a->drop_remainder >= 0 ? a->drop_remainder : (a->train ? 1 : 0);
    if (a->io_threads > 0)
        o->io_threads = a->io_threads;
    if (a->decode_threads > 0)
        o->decode_threads = a->decode_threads;
    if (a->eval_resize > 0)
        o->eval_resize = a->eval_resize;
    if (a->scale_min > 0)
        o->scale_min = a->scale_min;
    if (a->scale_max > 0)
        o->scale_max = a->scale_max;
}

int tdata_api_loader_new(tdata_api_set *set, const tdata_api_opts *a,
                         tdata_api_loader **out)
{
    *out = NULL;
    int rc = _size_ok(a->size, sizeof *a, "tdata_api_opts");
    if (rc)
        return rc;
    tdata_loader_opts o;
    _opts(a, &o);
    tdata_api_loader *l = calloc(1, sizeof *l);
    if (!l)
        return TORUS_FAIL(TDATA_ENOMEM, "out of memory for a loader");
    l->elem = a->u8_nhwc ? 1 : 4;
    rc = tdata_loader_create(set->ds, &o, &l->l);
    if (!rc)
        rc = tdata_loader_start(l->l, a->epoch, a->sample_offset);
    if (rc) {
        tdata_api_loader_free(l);
        return rc;
    }
    *out = l;
    return 0;
}

int tdata_api_loader_next(tdata_api_loader *l, tdata_api_batch *b)
{
    int rc = _size_ok(b->size, sizeof *b, "tdata_api_batch");
    if (rc)
        return rc;
    int err = 0;
    const tdata_batch *t = tdata_loader_next(l->l, &err);
    if (!t)
        return err ? err : 1;
    size_t px = (size_t)t->c * (size_t)t->h * (size_t)t->w;
    *b = (tdata_api_batch){.size = sizeof *b,
                           .n = t->n,
                           .c = t->c,
                           .h = t->h,
                           .w = t->w,
                           .epoch = t->epoch,
                           .step = t->step,
                           .data = t->data,
                           .labels = t->labels,
                           .ids = t->ids};
    b->bytes = (uint64_t)t->n * px * l->elem;
    return 0;
}

uint64_t tdata_api_loader_steps(const tdata_api_loader *l)
{
    return tdata_loader_steps_per_epoch(l->l);
}

void tdata_api_loader_stats(const tdata_api_loader *l, uint64_t stats[4])
{
    tdata_loader_stats s;
    tdata_loader_get_stats(l->l, &s);
    stats[0] = s.samples;
    stats[1] = s.bad;
    stats[2] = s.bad_crc;
    stats[3] = s.bad_decode;
}

void tdata_api_loader_norm(const tdata_api_loader *l, float scale[3],
                           float bias[3])
{
    tdata_loader_norm(l->l, scale, bias);
}

void tdata_api_loader_free(tdata_api_loader *l)
{
    if (!l)
        return;
    if (l->l)
        tdata_loader_destroy(l->l);
    free(l);
}

void tdata_api_perm(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm)
{
    tdata_perm(seed, epoch, n, perm);
}

void tdata_api_partition(uint64_t n, int32_t k, int32_t r, int32_t even,
                         uint64_t *begin, uint64_t *end)
{
    tdata_partition(n, k, r, even, begin, end);
}
