/* read/loader.c: the prefetching input pipeline.
 *
 * A ring of `prefetch` batch slots, each with its own preallocated output
 * buffer, labels, ids and raw-byte arena. Batches are numbered in the
 * order the trainer consumes them; batch s always lives in slot s % depth.
 *   I/O threads:    take the next batch number whose slot is free, list its
 *                   samples (this rank's slice of the epoch permutation),
 *                   sort them by shard and offset, merge neighbours into
 *                   few large pread()s into the slot's arena.
 *   decode threads: take samples of the oldest batch being decoded, check
 *                   the CRC32C, pick the crop, ROI/DCT-scaled decode,
 *                   resize, flip, normalise straight into the slot.
 *   trainer:        tdata_loader_next() hands out the slot itself (no
 *                   copy) and frees the previous one for the I/O threads.
 * So up to `prefetch` batches are read/decoded ahead while a step runs.
 * The random crop/flip of a sample depends only on (seed, epoch, sample
 * id), never on thread timing, so a resumed run is bit-identical.
 * One mutex guards the slot states; it is taken once per sample and per
 * batch, far below the cost of decoding a JPEG. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "common/torus_share.h"
#include "data/read/read.h"

enum { _FREE = 0, _READING, _DECODING, _READY };

typedef struct _slot {
    int state;
    uint64_t seq;
    int n; /* samples in the batch */
    int next_job, remaining;
    uint64_t epoch, step;
    tdata_batch b;
    void *data;
    int32_t *labels;
    uint64_t *ids;
    uint8_t *ok;
    uint8_t *flips;
    uint8_t *raw;
    size_t raw_cap;
    uint64_t *raw_off, *raw_len;
} _slot;

typedef struct _read {
    int shard;
    uint64_t lo, hi;
    int i; /* sample position in the batch */
} _read;

struct tdata_loader {
    tdata_dataset *ds;
    tdata_loader_opts o;
    const tdata_dataset_info *info;
    int c; /* output channels */
    size_t sample_bytes;
    float scale[3], bias[3];
    float norm_scale[3], norm_bias[3]; /* tdata_loader_norm */
    uint64_t n_all;
    /* This rank's slice and the stream position. */
    uint64_t slice_begin, slice_len, spe;
    int blocks; /* the global-block order (opts.global_batch) */
    uint64_t epoch0, step0;
    uint64_t limit; /* batches to produce (eval); UINT64_MAX train */
    /* Epoch permutations, two cached (the stream can straddle an epoch);
     * perm_ok says which hold one (every epoch value is a valid key). */
    uint64_t perm_epoch[2];
    uint64_t *perm[2];
    int perm_ok[2];
    _slot *slots;
    int depth;
    pthread_mutex_t mu;
    pthread_cond_t cv_io, cv_dec, cv_ready;
    pthread_t *threads;
    int nthreads, running, quit;
    uint64_t next_read, next_consume;
    int held;
    int fatal;
    char fatal_msg[2048];
    tdata_loader_stats st;
};

void tdata_loader_opts_default(tdata_loader_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mode = TDATA_TRAIN;
    o->batch_size = 32;
    o->out_h = o->out_w = 224;
    o->eval_resize = 256;
    o->scale_min = 0.08;
    o->scale_max = 1.0;
    o->ratio_min = 3.0 / 4.0;
    o->ratio_max = 4.0 / 3.0;
    o->flip = 1;
    o->order = TDATA_NCHW;
    o->dtype = TDATA_F32;
    o->normalize = 1;
    o->rank = 0;
    o->world = 1;
    o->drop_remainder = 1;
    o->io_threads = 1;
    o->decode_threads = 2;
    o->prefetch = 2;
    o->coalesce_gap = 256 * 1024;
    o->max_bad = -1;
    o->reduced_dct = 1;
    o->roi_decode = 1;
}

void tdata_loader_opts_trainer(tdata_loader_opts *o, int mode, int batch,
                               int size)
{
    tdata_loader_opts_default(o);
    o->mode = mode;
    o->batch_size = batch;
    o->out_h = o->out_w = size;
    o->eval_resize = size;
    o->scale_min = 0.64;
    o->scale_max = 1.0;
    o->order = TDATA_NCHW;
    o->dtype = TDATA_F32;
    o->normalize = 1;
    o->io_threads = 1;
    o->decode_threads = 1;
    o->prefetch = 3;
}

static double _now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *_alloc(tdata_loader *l, size_t n)
{
    if (l->o.alloc)
        return l->o.alloc(n, l->o.alloc_ctx);
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64) != 0)
        return NULL;
    return p;
}

static void _free(tdata_loader *l, void *p)
{
    if (!p)
        return;
    if (l->o.free)
        l->o.free(p, l->o.alloc_ctx);
    else if (!l->o.alloc)
        free(p);
}

static int _check_opts(const tdata_loader_opts *o, const tdata_dataset_info *in)
{
    if (o->batch_size < 1 || o->out_h < 1 || o->out_w < 1 || o->out_w > 4096 ||
        o->out_h > 4096 || o->world < 1 || o->rank < 0 || o->rank >= o->world ||
        o->io_threads < 1 || o->decode_threads < 1 || o->prefetch < 2 ||
        o->scale_min <= 0 || o->scale_max < o->scale_min || o->ratio_min <= 0 ||
        o->ratio_max < o->ratio_min)
        return TORUS_FAIL(TDATA_EINVAL,
                          "bad loader options (batch %d, "
                          "out %dx%d, rank %d of %d, threads %d+%d, "
                          "prefetch %d (>= 2))",
                          o->batch_size, o->out_h, o->out_w, o->rank, o->world,
                          o->io_threads, o->decode_threads, o->prefetch);
    if (in->channels != 1 && in->channels != 3)
        return TORUS_FAIL(TDATA_EINVAL,
                          "%d-channel images are not "
                          "supported (1 or 3)",
                          in->channels);
    return TDATA_OK;
}

/* The prefetch slots and their batch buffers. */
static int _alloc_slots(tdata_loader *l)
{
    int B = l->o.batch_size;
    l->depth = l->o.prefetch;
    l->slots = calloc(l->depth, sizeof *l->slots);
    if (!l->slots)
        return TORUS_FAIL(TDATA_ENOMEM, "no memory for %d prefetch slots",
                          l->depth);
    for (int s = 0; s < l->depth; s++) {
        _slot *sl = &l->slots[s];
        sl->data = _alloc(l, l->sample_bytes * B);
        sl->labels = malloc(B * sizeof *sl->labels);
        sl->ids = malloc(B * sizeof *sl->ids);
        sl->ok = malloc(B);
        sl->flips = calloc(B, 1);
        sl->raw_off = malloc(B * sizeof *sl->raw_off);
        sl->raw_len = malloc(B * sizeof *sl->raw_len);
        if (!sl->data || !sl->labels || !sl->ids || !sl->ok || !sl->flips ||
            !sl->raw_off || !sl->raw_len)
            return TORUS_FAIL(TDATA_ENOMEM,
                              "cannot allocate %zu-byte batch "
                              "buffers",
                              l->sample_bytes * B);
        /* Touch now: first-touch page faults would otherwise land in the
         * decode threads during the first steps. */
        memset(sl->data, 0, l->sample_bytes * B);
    }
    return TDATA_OK;
}

static int _slice_blocks(tdata_loader *l)
{
    const tdata_loader_opts *o = &l->o;
    int first, n = torus_share(o->global_batch, o->world, o->rank, &first);
    if (n != o->batch_size || n < 1)
        return TORUS_FAIL(TDATA_EINVAL,
                          "rank %d of %d: batch %d is not its share (%d) of "
                          "the global batch %d",
                          o->rank, o->world, o->batch_size, n,
                          o->global_batch);
    l->blocks = 1;
    l->slice_begin = (uint64_t)first;
    l->slice_len = (uint64_t)n;
    l->spe = l->n_all / (uint64_t)o->global_batch;
    if (l->spe == 0)
        return TORUS_FAIL(TDATA_EINVAL,
                          "%llu samples are less than one global batch of "
                          "%d",
                          (unsigned long long)l->n_all, o->global_batch);
    return TDATA_OK;
}

/* This rank's slice: equal sizes for training (every rank runs the same
 * number of steps), full coverage for evaluation; or, in the global-block
 * order, its offset into each step's block (slice_begin) and the epoch's
 * whole blocks. */
static int _slice(tdata_loader *l)
{
    const tdata_loader_opts *o = &l->o;
    uint64_t b, e, B = (uint64_t)o->batch_size;
    int train = o->mode == TDATA_TRAIN;
    if (train && o->global_batch > 0)
        return _slice_blocks(l);
    tdata_partition(l->n_all, o->world, o->rank, train && o->drop_remainder, &b,
                    &e);
    l->slice_begin = b;
    l->slice_len = e - b;
    l->spe = train ? l->slice_len / B : (l->slice_len + B - 1) / B;
    if (l->spe == 0)
        return TORUS_FAIL(TDATA_EINVAL,
                          "rank %d of %d gets %llu samples, "
                          "less than one batch of %d",
                          o->rank, o->world, (unsigned long long)(e - b),
                          o->batch_size);
    return TDATA_OK;
}

int tdata_loader_create(tdata_dataset *ds, const tdata_loader_opts *o,
                        tdata_loader **out)
{
    *out = NULL;
    const tdata_dataset_info *in = tdata_dataset_get_info(ds);
    int rc = _check_opts(o, in);
    if (rc)
        return rc;
    tdata_loader *l = calloc(1, sizeof *l);
    if (!l)
        return TORUS_FAIL(TDATA_ENOMEM, "no memory for the loader");
    l->ds = ds;
    l->o = *o;
    l->info = in;
    l->c = in->channels;
    l->n_all = in->num_images;
    l->sample_bytes =
        (size_t)l->c * o->out_h * o->out_w * tdata_dtype_size(o->dtype);
    for (int c = 0; c < 3; c++) {
        double sd = in->std[c] > 0 ? in->std[c] : 1;
        l->norm_scale[c] = (float)(1.0 / (255.0 * sd));
        l->norm_bias[c] = (float)(-in->mean[c] / sd);
        l->scale[c] = o->normalize ? l->norm_scale[c] : 1.0f;
        l->bias[c] = o->normalize ? l->norm_bias[c] : 0.0f;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_io, NULL);
    pthread_cond_init(&l->cv_dec, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    rc = _alloc_slots(l);
    if (rc == TDATA_OK)
        rc = _slice(l);
    if (rc) {
        tdata_loader_destroy(l);
        return rc;
    }
    *out = l;
    return TDATA_OK;
}

uint64_t tdata_loader_steps_per_epoch(const tdata_loader *l)
{
    return l->spe;
}

void tdata_loader_norm(const tdata_loader *l, float scale[3], float bias[3])
{
    for (int c = 0; c < 3; c++) {
        scale[c] = l->norm_scale[c];
        bias[c] = l->norm_bias[c];
    }
}

/* Sample ids of batch `seq`; called with the mutex held. */
static int _batch_ids(tdata_loader *l, uint64_t seq, _slot *sl)
{
    int B = l->o.batch_size;
    uint64_t g = l->step0 + seq;
    uint64_t epoch =
        l->o.mode == TDATA_TRAIN ? l->epoch0 + g / l->spe : l->epoch0;
    uint64_t step = l->o.mode == TDATA_TRAIN ? g % l->spe : g;
    uint64_t first = step * (uint64_t)B;
    uint64_t n =
        l->slice_len - first < (uint64_t)B ? l->slice_len - first : (uint64_t)B;
    if (l->blocks) { /* this rank's share of the step's global block */
        first = step * (uint64_t)l->o.global_batch;
        n = (uint64_t)B;
    }
    sl->epoch = epoch;
    sl->step = step;
    sl->n = (int)n;
    if (l->o.mode != TDATA_TRAIN) {
        for (uint64_t i = 0; i < n; i++)
            sl->ids[i] = l->slice_begin + first + i;
        return TDATA_OK;
    }
    int k = l->perm_ok[0] && l->perm_epoch[0] == epoch   ? 0
            : l->perm_ok[1] && l->perm_epoch[1] == epoch ? 1
                                                         : -1;
    if (k < 0) {
        /* Epochs advance monotonically: fill an empty entry, else replace
         * the older one. */
        k = !l->perm_ok[0]                        ? 0
            : !l->perm_ok[1]                      ? 1
            : l->perm_epoch[0] < l->perm_epoch[1] ? 0
                                                  : 1;
        if (!l->perm[k])
            l->perm[k] = malloc(l->n_all * sizeof(uint64_t));
        if (!l->perm[k])
            return TORUS_FAIL(TDATA_ENOMEM, "no memory for the permutation");
        tdata_perm(l->o.seed, epoch, l->n_all, l->perm[k]);
        l->perm_epoch[k] = epoch;
        l->perm_ok[k] = 1;
    }
    for (uint64_t i = 0; i < n; i++)
        sl->ids[i] = l->perm[k][l->slice_begin + first + i];
    return TDATA_OK;
}

static int _cmp_read(const void *a, const void *b)
{
    const _read *x = a, *y = b;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Read the slot's samples: sorted by (shard, offset), neighbours within
 * coalesce_gap merged into one pread. No lock held. */
typedef struct _group {
    int first, last;
    uint64_t hi;
} _group;

static int _read_batch(tdata_loader *l, _slot *sl, _read *rd, _group *grp,
                       uint64_t *calls, uint64_t *bytes)
{
    for (int i = 0; i < sl->n; i++) {
        uint64_t idx;
        tdata_dataset_locate(l->ds, sl->ids[i], &rd[i].shard, &idx);
        tdata_shard *sh = tdata_dataset_shard(l->ds, rd[i].shard);
        rd[i].lo = sh->offsets[idx];
        rd[i].hi = sh->offsets[idx + 1];
        rd[i].i = i;
        sl->labels[i] = sh->labels[idx];
    }
    qsort(rd, sl->n, sizeof *rd, _cmp_read);
    /* Merge runs: rd[k].i of a run's first entry is kept, and each run's
     * end (last entry, highest byte) is noted in grp. */
    int ng = 0;
    size_t need = 0;
    for (int a = 0; a < sl->n; ng++) {
        int b = a;
        uint64_t hi = rd[a].hi;
        while (b + 1 < sl->n && rd[b + 1].shard == rd[a].shard &&
               rd[b + 1].lo <= hi + l->o.coalesce_gap) {
            b++;
            if (rd[b].hi > hi)
                hi = rd[b].hi;
        }
        grp[ng].first = a;
        grp[ng].last = b;
        grp[ng].hi = hi;
        need += hi - rd[a].lo;
        a = b + 1;
    }
    if (sl->raw_cap < need) {
        free(sl->raw);
        sl->raw_cap = need + need / 4;
        sl->raw = malloc(sl->raw_cap);
        if (!sl->raw) {
            sl->raw_cap = 0;
            return TORUS_FAIL(TDATA_ENOMEM, "no memory for %zu raw bytes",
                              need);
        }
    }
    size_t pos = 0;
    for (int g = 0; g < ng; g++) {
        const _read *r0 = &rd[grp[g].first];
        tdata_shard *sh = tdata_dataset_shard(l->ds, r0->shard);
        int rc = tdata_shard_pread(sh, r0->lo, grp[g].hi, sl->raw + pos);
        if (rc)
            return rc;
        (*calls)++;
        *bytes += grp[g].hi - r0->lo;
        for (int k = grp[g].first; k <= grp[g].last; k++) {
            sl->raw_off[rd[k].i] = pos + (rd[k].lo - r0->lo);
            sl->raw_len[rd[k].i] = rd[k].hi - rd[k].lo;
        }
        pos += grp[g].hi - r0->lo;
    }
    return TDATA_OK;
}

static void _set_fatal(tdata_loader *l, int code, const char *msg)
{
    if (!l->fatal) {
        l->fatal = code;
        snprintf(l->fatal_msg, sizeof l->fatal_msg, "%s", msg);
    }
    pthread_cond_broadcast(&l->cv_ready);
    pthread_cond_broadcast(&l->cv_io);
    pthread_cond_broadcast(&l->cv_dec);
}

static void *_io_main(void *arg)
{
    tdata_loader *l = arg;
    _read *rd = malloc(l->o.batch_size * sizeof *rd);
    _group *grp = malloc(l->o.batch_size * sizeof *grp);
    pthread_mutex_lock(&l->mu);
    if (!rd || !grp)
        _set_fatal(l, TDATA_ENOMEM, "I/O thread: no memory for its read list");
    for (;;) {
        while (!l->quit && !l->fatal &&
               !(l->next_read < l->limit &&
                 l->slots[l->next_read % l->depth].state == _FREE))
            pthread_cond_wait(&l->cv_io, &l->mu);
        if (l->quit || l->fatal)
            break;
        uint64_t seq = l->next_read++;
        _slot *sl = &l->slots[seq % l->depth];
        sl->state = _READING;
        sl->seq = seq;
        int rc = _batch_ids(l, seq, sl);
        if (rc) {
            _set_fatal(l, rc, torus_error_msg());
            break;
        }
        pthread_mutex_unlock(&l->mu);
        uint64_t calls = 0, bytes = 0;
        rc = _read_batch(l, sl, rd, grp, &calls, &bytes);
        pthread_mutex_lock(&l->mu);
        l->st.read_calls += calls;
        l->st.read_bytes += bytes;
        if (rc) {
            _set_fatal(l, rc, torus_error_msg());
            break;
        }
        sl->next_job = 0;
        sl->remaining = sl->n;
        sl->state = _DECODING;
        pthread_cond_broadcast(&l->cv_dec);
    }
    pthread_mutex_unlock(&l->mu);
    free(rd);
    free(grp);
    return NULL;
}

/* Per decode thread. */
typedef struct _dctx {
    tdata_jdec *jd;
    tdata_image im;
    tdata_scratch sc;
    uint8_t *out;
} _dctx;

/* The crop of sample i: RandomResizedCrop and flip drawn from (seed,
 * epoch, id), so a resumed run makes the same ones; or the eval centre
 * crop. */
static void _crop(const tdata_loader *l, const _slot *sl, int i, int W, int H,
                  tdata_crop *cr)
{
    const tdata_loader_opts *o = &l->o;
    if (o->mode != TDATA_TRAIN) {
        tdata_center_crop(W, H, o->eval_resize, o->out_w, o->out_h, cr);
        return;
    }
    tdata_rng r = {tdata_mix64(
        o->seed ^ tdata_mix64(sl->epoch * 0x9E3779B97F4A7C15ull + sl->ids[i]))};
    tdata_rrc(&r, W, H, o->scale_min, o->scale_max, o->ratio_min, o->ratio_max,
              cr);
    cr->flip = o->flip && (tdata_rng_next(&r) >> 63);
}

/* Pixels to resample: w x h, rows stride bytes apart, and the crop as a
 * box in them. */
typedef struct _region {
    const uint8_t *px;
    int w, h, stride;
    double bx0, by0, bx1, by1;
} _region;

/* Decode the part of the JPEG the crop needs, at the smallest DCT scale
 * that keeps it at least the output size; the box is then the crop in
 * the decoded (scaled, offset) pixels. */
static int _jpeg_region(const tdata_loader *l, _dctx *d, const uint8_t *raw,
                        size_t len, int W, int H, const tdata_crop *cr,
                        _region *rg)
{
    const tdata_loader_opts *o = &l->o;
    int n = o->reduced_dct ? tdata_dct_scale((int)ceil(cr->w), (int)ceil(cr->h),
                                             o->out_w, o->out_h)
                           : 8;
    int x0 = 0, y0 = 0, x1 = W, y1 = H;
    if (o->roi_decode) {
        x0 = (int)floor(cr->x);
        y0 = (int)floor(cr->y);
        x1 = (int)ceil(cr->x + cr->w);
        y1 = (int)ceil(cr->y + cr->h);
    }
    if (tdata_jpeg_decode_region(d->jd, raw, len, x0, y0, x1 - x0, y1 - y0, n,
                                 o->fast_upsample ? TDATA_DEC_FAST_UPSAMPLE : 0,
                                 &d->im))
        return TDATA_EDECODE;
    double fx = (double)d->im.full_w / W, fy = (double)d->im.full_h / H;
    *rg = (_region){d->im.px + d->im.off,
                    d->im.w,
                    d->im.h,
                    d->im.stride,
                    cr->x * fx - d->im.sx,
                    cr->y * fy - d->im.sy,
                    (cr->x + cr->w) * fx - d->im.sx,
                    (cr->y + cr->h) * fy - d->im.sy};
    if (rg->bx0 < 0)
        rg->bx0 = 0;
    if (rg->by0 < 0)
        rg->by0 = 0;
    if (rg->bx1 > rg->w)
        rg->bx1 = rg->w;
    if (rg->by1 > rg->h)
        rg->by1 = rg->h;
    return TDATA_OK;
}

/* Decode sample i of the slot into its place; 0 or an error code with
 * why set. */
static int _decode_one(tdata_loader *l, _dctx *d, _slot *sl, int i, char *why,
                       size_t whyn)
{
    const tdata_loader_opts *o = &l->o;
    const uint8_t *raw = sl->raw + sl->raw_off[i];
    size_t len = sl->raw_len[i];
    int shard;
    uint64_t idx;
    tdata_dataset_locate(l->ds, sl->ids[i], &shard, &idx);
    tdata_shard *sh = tdata_dataset_shard(l->ds, shard);
    if (tdata_crc32c(0, raw, len) != sh->crcs[idx]) {
        snprintf(why, whyn, "CRC32C mismatch");
        return TDATA_ECRC;
    }
    int W = l->info->width, H = l->info->height;
    int dense = l->info->layout == TDATA_LAYOUT_DENSE;
    /* The dataset checked every shard's shape against the index; a stored
     * size that still differs would make the resampler read past it. */
    if (dense && len != (size_t)W * H * l->c) {
        snprintf(why, whyn, "dense image of %zu bytes, expected %d x %d x %d",
                 len, H, W, l->c);
        return TDATA_EDECODE;
    }
    if (!dense && tdata_jpeg_header(d->jd, raw, len, &W, &H, NULL, NULL)) {
        snprintf(why, whyn, "JPEG header: %s", tdata_jdec_msg(d->jd));
        return TDATA_EDECODE;
    }
    tdata_crop cr;
    _crop(l, sl, i, W, H, &cr);
    _region rg = {raw, W, H, W * l->c, cr.x, cr.y, cr.x + cr.w, cr.y + cr.h};
    if (!dense && _jpeg_region(l, d, raw, len, W, H, &cr, &rg)) {
        snprintf(why, whyn, "JPEG decode: %s", tdata_jdec_msg(d->jd));
        return TDATA_EDECODE;
    }
    if (tdata_resize(rg.px, rg.w, rg.h, rg.stride, l->c, rg.bx0, rg.by0, rg.bx1,
                     rg.by1, d->out, o->out_w, o->out_h, &d->sc)) {
        snprintf(why, whyn, "no memory to resample a %d x %d region", rg.w,
                 rg.h);
        return TDATA_ENOMEM;
    }
    sl->flips[i] = (uint8_t)cr.flip;
    tdata_emit(d->out, o->out_w, o->out_h, l->c, cr.flip && !o->defer_flip,
               o->order, o->dtype, l->scale, l->bias,
               (uint8_t *)sl->data + (size_t)i * l->sample_bytes);
    return TDATA_OK;
}

/* All samples decoded: close the gaps left by bad ones, publish. */
static void _finish_slot(tdata_loader *l, _slot *sl)
{
    int j = 0;
    for (int i = 0; i < sl->n; i++) {
        if (!sl->ok[i])
            continue;
        if (j != i) {
            memmove((uint8_t *)sl->data + (size_t)j * l->sample_bytes,
                    (uint8_t *)sl->data + (size_t)i * l->sample_bytes,
                    l->sample_bytes);
            sl->labels[j] = sl->labels[i];
            sl->ids[j] = sl->ids[i];
            sl->flips[j] = sl->flips[i];
        }
        j++;
    }
    l->st.samples += (uint64_t)j;
    l->st.batches++;
    sl->b.data = sl->data;
    sl->b.labels = sl->labels;
    sl->b.ids = sl->ids;
    sl->b.flips = sl->flips;
    sl->b.n = j;
    sl->b.c = l->c;
    sl->b.h = l->o.out_h;
    sl->b.w = l->o.out_w;
    sl->b.epoch = sl->epoch;
    sl->b.step = sl->step;
    sl->state = _READY;
    pthread_cond_broadcast(&l->cv_ready);
}

static void _log_bad(tdata_loader *l, _slot *sl, int i, int code,
                     const char *why, char *msg, size_t n)
{
    int shard;
    uint64_t idx;
    tdata_dataset_locate(l->ds, sl->ids[i], &shard, &idx);
    char name[512];
    /* The line names the sample even when its source name cannot be read. */
    if (tdata_dataset_name(l->ds, sl->ids[i], name, sizeof name))
        snprintf(name, sizeof name, "?");
    /* The source name as the index writes names: a newline in it must not
     * make a second log line. */
    char *esc = tdata_name_escape(name, 0);
    snprintf(msg, n, "bad sample %llu: shard %s index %llu (%s): %s",
             (unsigned long long)sl->ids[i],
             tdata_dataset_shard_path(l->ds, shard), (unsigned long long)idx,
             esc ? esc : "?", why);
    free(esc);
    (void)code;
    /* The caller's own log, else the program's reporter: a library thread
     * has no stderr of its own to write to. */
    if (l->o.log)
        fprintf(l->o.log, "tdata: %s; skipped\n", msg);
    else
        torus_warn("tdata: %s; skipped", msg);
}

static void *_dec_main(void *arg)
{
    tdata_loader *l = arg;
    _dctx d;
    memset(&d, 0, sizeof d);
    d.jd = tdata_jdec_new();
    d.out = malloc((size_t)l->o.out_w * l->o.out_h * l->c);
    pthread_mutex_lock(&l->mu);
    if (!d.jd || !d.out)
        _set_fatal(l, TDATA_ENOMEM,
                   "decode thread: no memory for its decoder or output");
    for (;;) {
        _slot *sl = NULL;
        for (int s = 0; s < l->depth; s++) {
            _slot *c = &l->slots[s];
            if (c->state == _DECODING && c->next_job < c->n &&
                (!sl || c->seq < sl->seq))
                sl = c;
        }
        if (!sl || l->fatal) {
            if (l->quit || l->fatal)
                break;
            pthread_cond_wait(&l->cv_dec, &l->mu);
            continue;
        }
        int i = sl->next_job++;
        pthread_mutex_unlock(&l->mu);
        char why[256], msg[1024];
        int rc = _decode_one(l, &d, sl, i, why, sizeof why);
        sl->ok[i] = rc == TDATA_OK;
        if (rc == TDATA_ENOMEM)
            snprintf(msg, sizeof msg, "decode thread: %s", why);
        else if (rc)
            _log_bad(l, sl, i, rc, why, msg, sizeof msg);
        pthread_mutex_lock(&l->mu);
        if (rc == TDATA_ENOMEM) {
            /* Not the sample's fault: stop rather than skip good data. */
            _set_fatal(l, rc, msg);
        } else if (rc) {
            l->st.bad++;
            if (rc == TDATA_ECRC)
                l->st.bad_crc++;
            else
                l->st.bad_decode++;
            if (l->o.max_bad >= 0 && l->st.bad > (uint64_t)l->o.max_bad) {
                char m2[1200];
                snprintf(m2, sizeof m2,
                         "more than --max-bad=%ld bad samples; "
                         "last: %s",
                         l->o.max_bad, msg);
                _set_fatal(l, TDATA_ETOOMANYBAD, m2);
            }
        }
        if (--sl->remaining == 0)
            _finish_slot(l, sl);
    }
    pthread_mutex_unlock(&l->mu);
    tdata_jdec_free(d.jd);
    tdata_image_free(&d.im);
    tdata_scratch_free(&d.sc);
    free(d.out);
    return NULL;
}

static void _stop(tdata_loader *l)
{
    if (!l->running)
        return;
    pthread_mutex_lock(&l->mu);
    l->quit = 1;
    pthread_cond_broadcast(&l->cv_io);
    pthread_cond_broadcast(&l->cv_dec);
    pthread_mutex_unlock(&l->mu);
    for (int t = 0; t < l->nthreads; t++)
        pthread_join(l->threads[t], NULL);
    free(l->threads);
    l->threads = NULL;
    l->running = 0;
}

/* The I/O and decode threads. If one cannot be created, those already
 * running are stopped and joined, and the error names the thread. */
static int _start_threads(tdata_loader *l)
{
    int want = l->o.io_threads + l->o.decode_threads;
    l->threads = calloc(want, sizeof *l->threads);
    if (!l->threads)
        return TORUS_FAIL(TDATA_ENOMEM, "no memory for %d loader threads",
                          want);
    l->nthreads = 0;
    l->running = 1;
    for (int t = 0; t < want; t++) {
        int io = t < l->o.io_threads;
        int err =
            pthread_create(&l->threads[t], NULL, io ? _io_main : _dec_main, l);
        if (err) {
            _stop(l);
            return TORUS_FAIL(
                TDATA_ENOMEM, "cannot start loader thread %d of %d (%s): %s",
                t + 1, want, io ? "I/O" : "decode", strerror(err));
        }
        l->nthreads++;
    }
    return TDATA_OK;
}

int tdata_loader_start(tdata_loader *l, uint64_t epoch, uint64_t sample_offset)
{
    _stop(l);
    if (epoch > TDATA_EPOCH_MAX)
        return TORUS_FAIL(TDATA_EINVAL,
                          "epoch %llu is out of range 0..%llu (a negative "
                          "epoch?)",
                          (unsigned long long)epoch,
                          (unsigned long long)TDATA_EPOCH_MAX);
    uint64_t step = sample_offset / (uint64_t)l->o.batch_size;
    if (step >= l->spe)
        return TORUS_FAIL(TDATA_EINVAL,
                          "resume offset %llu is past the "
                          "epoch's %llu steps",
                          (unsigned long long)sample_offset,
                          (unsigned long long)l->spe);
    l->epoch0 = epoch;
    l->step0 = step;
    l->limit = l->o.mode == TDATA_TRAIN ? UINT64_MAX : l->spe - step;
    l->next_read = l->next_consume = 0;
    l->held = 0;
    l->quit = 0;
    l->fatal = 0;
    for (int s = 0; s < l->depth; s++)
        l->slots[s].state = _FREE;
    return _start_threads(l);
}

const tdata_batch *tdata_loader_next(tdata_loader *l, int *err)
{
    *err = TDATA_OK;
    if (!l->running) {
        *err = TORUS_FAIL(TDATA_EINVAL, "tdata_loader_next before "
                                        "tdata_loader_start");
        return NULL;
    }
    pthread_mutex_lock(&l->mu);
    if (l->held) {
        /* The trainer is done with the previous batch: recycle its slot. */
        l->slots[(l->next_consume - 1) % l->depth].state = _FREE;
        l->held = 0;
        pthread_cond_broadcast(&l->cv_io);
    }
    if (l->next_consume >= l->limit && !l->fatal) {
        pthread_mutex_unlock(&l->mu);
        return NULL; /* end of the evaluation epoch */
    }
    _slot *sl = &l->slots[l->next_consume % l->depth];
    double t0 = _now();
    while (!l->fatal && !(sl->state == _READY && sl->seq == l->next_consume))
        pthread_cond_wait(&l->cv_ready, &l->mu);
    if (l->fatal) {
        *err = TORUS_FAIL(l->fatal, "%s", l->fatal_msg);
        pthread_mutex_unlock(&l->mu);
        return NULL;
    }
    double w = _now() - t0;
    l->st.wait_s += w;
    sl->b.wait_s = w;
    l->next_consume++;
    l->held = 1;
    pthread_mutex_unlock(&l->mu);
    return &sl->b;
}

void tdata_loader_get_stats(const tdata_loader *l, tdata_loader_stats *s)
{
    pthread_mutex_lock((pthread_mutex_t *)&l->mu);
    *s = l->st;
    pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
}

void tdata_loader_destroy(tdata_loader *l)
{
    if (!l)
        return;
    _stop(l);
    for (int s = 0; l->slots && s < l->depth; s++) {
        _slot *sl = &l->slots[s];
        _free(l, sl->data);
        free(sl->labels);
        free(sl->ids);
        free(sl->flips);
        free(sl->ok);
        free(sl->raw);
        free(sl->raw_off);
        free(sl->raw_len);
    }
    free(l->slots);
    free(l->perm[0]);
    free(l->perm[1]);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_io);
    pthread_cond_destroy(&l->cv_dec);
    pthread_cond_destroy(&l->cv_ready);
    free(l);
}
