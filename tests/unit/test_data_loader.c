/* test_data_loader.c: the prefetching pipeline end to end on a dataset
 * packed in the test (JPEGs written by TurboJPEG, packed by the packing
 * engine): slices of ranks are disjoint and cover the epoch, epochs differ,
 * the global-block order serves one process's batches on any number of
 * ranks,
 * a resumed loader replays the same batches, eval outputs the right
 * normalised pixels in every layout and dtype, batches are ready ahead of
 * the trainer, and corrupt samples are skipped, counted and bounded by
 * max_bad. */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_share.h"
#include "data/pack/pack.h"
#include "data/read/read.h"
#include "data/read/tdata_norm.h"
#include "tests/unit/test_data_main.h"

#define NIMG 60
static char _dir[256], _out[300];

static void _color(int i, int label, uint8_t *rgb)
{
    rgb[0] = (uint8_t)(label * 80 + 20);
    rgb[1] = (uint8_t)(255 - i * 3);
    rgb[2] = (uint8_t)((i * 37) % 256);
}

/* Textured pixel (x, y) of a w x h image: stripes of ~40 px in red, ramps
 * in green and blue, so that a crop off by a few pixels shows. */
static void _texture(int x, int y, int w, int h, uint8_t *rgb)
{
    rgb[0] = (uint8_t)(128 + 100 * sin(x / 6.5) * cos(y / 9.0));
    rgb[1] = (uint8_t)(x * 255 / w);
    rgb[2] = (uint8_t)(y * 255 / h);
}

/* NIMG JPEGs in SRC/c0..c2 (constant colours of varied sizes, or large
 * textured ones), packed into 3 shards in OUT. */
static void _make_dataset(const char *src, const char *out, int textured)
{
    tjhandle tj = tjInitCompress();
    mkdir(src, 0755);
    for (int c = 0; c < 3; c++) {
        char d[400];
        snprintf(d, sizeof d, "%s/c%d", src, c);
        mkdir(d, 0755);
    }
    for (int i = 0; i < NIMG; i++) {
        int label = i % 3;
        int w = textured ? 700 + (i * 37) % 500 : 120 + (i * 13) % 200;
        int h = textured ? 600 + (i * 53) % 400 : 100 + (i * 29) % 150;
        uint8_t *px = malloc((size_t)w * h * 3), rgb[3];
        _color(i, label, rgb);
        for (int k = 0; k < w * h; k++) {
            if (textured)
                _texture(k % w, k / w, w, h, rgb);
            memcpy(px + k * 3, rgb, 3);
        }
        unsigned char *jb = NULL;
        unsigned long js = 0;
        ck_assert_int_eq(tjCompress2(tj, px, w, 0, h, TJPF_RGB, &jb, &js,
                                     textured ? TJSAMP_420 : TJSAMP_444, 98, 0),
                         0);
        char p[400];
        snprintf(p, sizeof p, "%s/c%d/img%02d.jpg", src, label, i);
        FILE *f = fopen(p, "wb");
        fwrite(jb, 1, js, f);
        fclose(f);
        tjFree(jb);
        free(px);
    }
    tjDestroy(tj);
    tdata_pack_opts o;
    memset(&o, 0, sizeof o);
    o.source = src;
    o.output = out;
    o.split = "train";
    o.shards = 3;
    o.range_hi = -1;
    o.threads = 2;
    o.quality = 95;
    o.creator = "test";
    tdata_pack_summary s;
    ck_assert_int_eq(tdata_pack_run(&o, &s), 0);
    ck_assert_uint_eq(s.packed, NIMG);
    ck_assert_int_eq(s.index_written, 1);
}

static void _setup(void)
{
    snprintf(_dir, sizeof _dir, "/tmp/test_data_loader.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(_dir));
    char src[300];
    snprintf(src, sizeof src, "%s/src", _dir);
    snprintf(_out, sizeof _out, "%s/out", _dir);
    _make_dataset(src, _out, 0);
}

static void _teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", _dir);
    ck_assert_int_eq(system(cmd), 0);
}

static tdata_loader *_loader(tdata_dataset *ds, tdata_loader_opts *o)
{
    tdata_loader *l;
    ck_assert_int_eq(tdata_loader_create(ds, o, &l), 0);
    return l;
}

static tdata_dataset *_open(void)
{
    tdata_dataset *ds;
    ck_assert_int_eq(tdata_dataset_open(_out, &ds), 0);
    ck_assert_uint_eq(tdata_dataset_get_info(ds)->num_images, NIMG);
    return ds;
}

static int32_t _label_of(tdata_dataset *ds, uint64_t id)
{
    uint8_t *b = NULL;
    size_t cap = 0, len;
    int32_t lab;
    ck_assert_int_eq(tdata_dataset_read(ds, id, &b, &cap, &len, &lab, NULL), 0);
    free(b);
    return lab;
}

START_TEST(test_ranks_cover_epoch_and_epochs_differ)
{
    tdata_dataset *ds = _open();
    uint8_t seen[NIMG] = {0};
    uint64_t order0[NIMG] = {0}, order1[NIMG] = {0};
    int k0 = 0, k1 = 0;
    for (int r = 0; r < 3; r++) {
        tdata_loader_opts o;
        tdata_loader_opts_default(&o);
        o.batch_size = 4;
        o.out_h = o.out_w = 32;
        o.world = 3;
        o.rank = r;
        o.seed = 11;
        tdata_loader *l = _loader(ds, &o);
        ck_assert_uint_eq(tdata_loader_steps_per_epoch(l), 5);
        ck_assert_int_eq(tdata_loader_start(l, 0, 0), 0);
        for (int s = 0; s < 10; s++) {
            int err;
            const tdata_batch *b = tdata_loader_next(l, &err);
            ck_assert_ptr_nonnull(b);
            ck_assert_int_eq(b->n, 4);
            ck_assert_uint_eq(b->epoch, (uint64_t)s / 5);
            ck_assert_uint_eq(b->step, (uint64_t)s % 5);
            for (int i = 0; i < 4; i++) {
                ck_assert_int_eq(b->labels[i], _label_of(ds, b->ids[i]));
                if (s < 5) {
                    ck_assert_uint_eq(seen[b->ids[i]], 0);
                    seen[b->ids[i]] = 1;
                    order0[k0++] = b->ids[i];
                } else {
                    order1[k1++] = b->ids[i];
                }
            }
        }
        tdata_loader_destroy(l);
    }
    for (int i = 0; i < NIMG; i++)
        ck_assert_uint_eq(seen[i], 1);
    ck_assert_int_eq(k1, NIMG);
    int same = 0;
    for (int i = 0; i < NIMG; i++)
        same += order0[i] == order1[i];
    ck_assert_int_lt(same, 10);
    tdata_dataset_close(ds);
}
END_TEST

/* The ids of steps [from, 4) of epoch 0 in the global-block order
 * (global batch 14, 4 steps of the 60 images), rank by rank in rank
 * order, from world loaders started at step from. */
static void _block_ids(tdata_dataset *ds, int world, int from, uint64_t *ids)
{
    for (int r = 0; r < world; r++) {
        tdata_loader_opts o;
        int first, n = torus_share(14, world, r, &first);
        tdata_loader_opts_default(&o);
        o.out_h = o.out_w = 32;
        o.world = world;
        o.rank = r;
        o.seed = 5;
        o.global_batch = 14;
        o.batch_size = n + 1; /* not its share: refused */
        tdata_loader *l = NULL;
        ck_assert_int_eq(tdata_loader_create(ds, &o, &l), TDATA_EINVAL);
        o.batch_size = n;
        l = _loader(ds, &o);
        ck_assert_uint_eq(tdata_loader_steps_per_epoch(l), 4);
        ck_assert_int_eq(tdata_loader_start(l, 0, (uint64_t)(from * n)), 0);
        for (int s = from; s < 4; s++) {
            int err;
            const tdata_batch *b = tdata_loader_next(l, &err);
            ck_assert_ptr_nonnull(b);
            ck_assert_int_eq(b->n, n);
            ck_assert_uint_eq(b->step, (uint64_t)s);
            memcpy(ids + s * 14 + first, b->ids, (size_t)n * sizeof *ids);
        }
        tdata_loader_destroy(l);
    }
}

/* The global-block order: any number of ranks, even or uneven shares,
 * serves each step's global batch exactly as one process does, also when
 * started mid-epoch (a resume on another number of ranks). */
START_TEST(test_global_blocks_any_world)
{
    tdata_dataset *ds = _open();
    uint64_t one[56], got[56];
    uint8_t seen[NIMG] = {0};
    _block_ids(ds, 1, 0, one);
    for (int i = 0; i < 56; i++) {
        ck_assert_uint_eq(seen[one[i]], 0);
        seen[one[i]] = 1;
    }
    for (int world = 2; world <= 5; world++) {
        memset(got, 0xff, sizeof got);
        _block_ids(ds, world, 1, got);
        for (int i = 14; i < 56; i++)
            ck_assert_msg(got[i] == one[i], "world %d: position %d: %llu vs %llu",
                          world, i, (unsigned long long)got[i],
                          (unsigned long long)one[i]);
    }
    tdata_dataset_close(ds);
}
END_TEST

static uint32_t _batch_crc(const tdata_batch *b, size_t sample_bytes)
{
    return tdata_crc32c(tdata_crc32c(0, b->ids, b->n * sizeof *b->ids), b->data,
                        sample_bytes * b->n);
}

START_TEST(test_resume_replays)
{
    tdata_dataset *ds = _open();
    tdata_loader_opts o;
    tdata_loader_opts_default(&o);
    o.batch_size = 6;
    o.out_h = o.out_w = 24;
    o.seed = 3;
    o.decode_threads = 3;
    size_t sb = 3 * 24 * 24 * 4;
    tdata_loader *l = _loader(ds, &o);
    ck_assert_uint_eq(tdata_loader_steps_per_epoch(l), 10);
    ck_assert_int_eq(tdata_loader_start(l, 0, 0), 0);
    uint32_t crc[14];
    for (int s = 0; s < 14; s++) {
        int err;
        const tdata_batch *b = tdata_loader_next(l, &err);
        ck_assert_ptr_nonnull(b);
        crc[s] = _batch_crc(b, sb);
    }
    tdata_loader_destroy(l);
    /* Resume at epoch 1, sample 12 (= step 2): batches 12.. again. */
    o.decode_threads = 1;
    l = _loader(ds, &o);
    ck_assert_int_eq(tdata_loader_start(l, 1, 12), 0);
    for (int s = 12; s < 14; s++) {
        int err;
        const tdata_batch *b = tdata_loader_next(l, &err);
        ck_assert_uint_eq(b->epoch, 1);
        ck_assert_uint_eq(b->step, (uint64_t)s - 10);
        ck_assert_uint_eq(_batch_crc(b, sb), crc[s]);
    }
    /* Restarting the same loader at the start replays batch 0. */
    ck_assert_int_eq(tdata_loader_start(l, 0, 0), 0);
    int err;
    ck_assert_uint_eq(_batch_crc(tdata_loader_next(l, &err), sb), crc[0]);
    tdata_loader_destroy(l);
    tdata_dataset_close(ds);
}
END_TEST

/* Epochs: 2^64 - 1 (a caller's -1 as unsigned) once matched the "no
 * permutation cached" marker and crashed an I/O thread; now it is refused
 * with an error naming it, and every epoch up to TDATA_EPOCH_MAX,
 * the largest included, streams permuted batches, across the epoch change. */
START_TEST(test_epoch_range)
{
    tdata_dataset *ds = _open();
    tdata_loader_opts o;
    tdata_loader_opts_default(&o);
    o.batch_size = 20;
    o.out_h = o.out_w = 16;
    tdata_loader *l = _loader(ds, &o);
    ck_assert_int_eq(tdata_loader_start(l, UINT64_MAX, 0), TDATA_EINVAL);
    ck_assert_ptr_nonnull(
        strstr(torus_error_msg(), "epoch 18446744073709551615"));
    ck_assert_int_eq(tdata_loader_start(l, TDATA_EPOCH_MAX + 1, 0),
                     TDATA_EINVAL);
    int err;
    ck_assert_ptr_null(tdata_loader_next(l, &err));
    ck_assert_int_eq(err, TDATA_EINVAL); /* not started */
    uint64_t last = TDATA_EPOCH_MAX;
    ck_assert_int_eq(tdata_loader_start(l, last, 20), 0);
    uint64_t perm[NIMG];
    tdata_perm(o.seed, last, NIMG, perm);
    for (int s = 1; s < 5; s++) { /* steps 1, 2 of `last`, then 0, 1 */
        const tdata_batch *b = tdata_loader_next(l, &err);
        ck_assert_msg(b != NULL, "step %d: %s", s, torus_error_msg());
        ck_assert_uint_eq(b->epoch, s < 3 ? last : last + 1);
        ck_assert_uint_eq(b->step, (uint64_t)s % 3);
        if (s < 3)
            for (int i = 0; i < b->n; i++)
                ck_assert_uint_eq(b->ids[i], perm[20 * s + i]);
    }
    tdata_loader_destroy(l);
    tdata_dataset_close(ds);
}
END_TEST

START_TEST(test_eval_pixels_layouts_dtypes)
{
    tdata_dataset *ds = _open();
    const tdata_dataset_info *in = tdata_dataset_get_info(ds);
    const int order[3] = {TDATA_NCHW, TDATA_NHWC, TDATA_NCHW};
    const int dtype[3] = {TDATA_F32, TDATA_F32, TDATA_F16};
    for (int v = 0; v < 3; v++) {
        uint8_t seen[NIMG] = {0};
        for (int r = 0; r < 2; r++) {
            tdata_loader_opts o;
            tdata_loader_opts_default(&o);
            o.mode = TDATA_EVAL;
            o.batch_size = 7;
            o.out_h = 20;
            o.out_w = 28;
            o.eval_resize = 32;
            o.world = 2;
            o.rank = r;
            o.order = order[v];
            o.dtype = dtype[v];
            tdata_loader *l = _loader(ds, &o);
            ck_assert_int_eq(tdata_loader_start(l, 0, 0), 0);
            const tdata_batch *b;
            int err, batches = 0;
            while ((b = tdata_loader_next(l, &err))) {
                batches++;
                for (int i = 0; i < b->n; i++) {
                    uint64_t id = b->ids[i];
                    seen[id]++;
                    /* Which source image: recover from the label and the
                     * stored name "cL/imgNN.jpg". */
                    char name[64];
                    ck_assert_int_eq(
                        tdata_dataset_name(ds, id, name, sizeof name), 0);
                    int idx = atoi(name + 6);
                    uint8_t rgb[3];
                    _color(idx, b->labels[i], rgb);
                    for (int c = 0; c < 3; c++) {
                        float want = (float)((rgb[c] / 255.0 - in->mean[c]) /
                                             in->std[c]);
                        for (int p = 0; p < 20 * 28; p += 37) {
                            size_t at = order[v] == TDATA_NCHW
                                            ? ((size_t)i * 3 + c) * 20 * 28 + p
                                            : ((size_t)i * 20 * 28 + p) * 3 + c;
                            float got = dtype[v] == TDATA_F16
                                            ? tdata_f16_to_f32(
                                                  ((uint16_t *)b->data)[at])
                                            : ((float *)b->data)[at];
                            ck_assert_msg(fabsf(got - want) <
                                              3.0f / 255 / in->std[c] + 0.01f,
                                          "%s c%d p%d: %f vs %f", name, c, p,
                                          got, want);
                        }
                    }
                }
            }
            ck_assert_int_eq(err, 0);
            ck_assert_int_eq(batches, 5); /* 30 per rank, batches of 7 */
            tdata_loader_destroy(l);
        }
        for (int i = 0; i < NIMG; i++)
            ck_assert_int_eq(seen[i], 1);
    }
    tdata_dataset_close(ds);
}
END_TEST

START_TEST(test_prefetch_ahead)
{
    tdata_dataset *ds = _open();
    tdata_loader_opts o;
    tdata_loader_opts_default(&o);
    o.batch_size = 4;
    o.out_h = o.out_w = 64;
    o.prefetch = 3;
    tdata_loader *l = _loader(ds, &o);
    ck_assert_int_eq(tdata_loader_start(l, 0, 0), 0);
    usleep(1000 * 1000); /* a (long) "training step", even on a busy node */
    int err;
    const tdata_batch *b1 = tdata_loader_next(l, &err);
    const void *d1 = b1->data;
    const tdata_batch *b2 = tdata_loader_next(l, &err);
    const tdata_batch *b3 = tdata_loader_next(l, &err);
    /* All three were decoded during the sleep: no waiting. */
    ck_assert(b1->wait_s < 0.005 && b2->wait_s < 0.005 && b3->wait_s < 0.005);
    /* Zero copy: batches are the ring's buffers, reused in turn. */
    const tdata_batch *b4 = tdata_loader_next(l, &err);
    ck_assert_ptr_eq(b4->data, d1);
    tdata_loader_stats st;
    tdata_loader_get_stats(l, &st);
    ck_assert_uint_ge(st.batches, 4);
    tdata_loader_destroy(l);
    tdata_dataset_close(ds);
}
END_TEST

/* Flip one byte of sample `id` in its shard file. */
static void _corrupt(tdata_dataset *ds, uint64_t id, char *path, size_t n)
{
    int s;
    uint64_t idx;
    tdata_dataset_locate(ds, id, &s, &idx);
    tdata_shard *sh = tdata_dataset_shard(ds, s);
    uint64_t lo =
        sh->offsets[idx] + (sh->offsets[idx + 1] - sh->offsets[idx]) / 2;
    uint64_t addr = sh->chunk_addr[lo / sh->chunk_bytes] + lo % sh->chunk_bytes;
    snprintf(path, n, "%s", sh->path);
    int fd = open(sh->path, O_RDWR);
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, (off_t)addr), 1);
    b ^= 0x40;
    ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)addr), 1);
    close(fd);
}

START_TEST(test_bad_samples_skipped_and_bounded)
{
    tdata_dataset *ds = _open();
    char path[4096];
    _corrupt(ds, 5, path, sizeof path);
    _corrupt(ds, 40, path, sizeof path);
    tdata_loader_opts o;
    tdata_loader_opts_default(&o);
    o.mode = TDATA_EVAL;
    o.batch_size = 8;
    o.out_h = o.out_w = 16;
    char logp[400];
    snprintf(logp, sizeof logp, "%s/bad.log", _dir);
    o.log = fopen(logp, "w");
    tdata_loader *l = _loader(ds, &o);
    ck_assert_int_eq(tdata_loader_start(l, 0, 0), 0);
    const tdata_batch *b;
    int err, total = 0;
    while ((b = tdata_loader_next(l, &err))) {
        for (int i = 0; i < b->n; i++)
            ck_assert(b->ids[i] != 5 && b->ids[i] != 40);
        total += b->n;
    }
    ck_assert_int_eq(err, 0);
    ck_assert_int_eq(total, NIMG - 2);
    tdata_loader_stats st;
    tdata_loader_get_stats(l, &st);
    ck_assert_uint_eq(st.bad, 2);
    ck_assert_uint_eq(st.bad_crc, 2);
    tdata_loader_destroy(l);
    fclose(o.log);
    /* The log names the shard, the index and the source file. */
    FILE *f = fopen(logp, "r");
    char line[2048];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    ck_assert_ptr_nonnull(strstr(line, "CRC32C mismatch"));
    ck_assert_ptr_nonnull(strstr(line, "train-0000"));
    ck_assert_ptr_nonnull(strstr(line, ".jpg"));

    /* --max-bad=1: the second bad sample fails the run, clearly. */
    o.max_bad = 1;
    o.log = fopen("/dev/null", "w");
    l = _loader(ds, &o);
    ck_assert_int_eq(tdata_loader_start(l, 0, 0), 0);
    while ((b = tdata_loader_next(l, &err)))
        ;
    ck_assert_int_eq(err, TDATA_ETOOMANYBAD);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "max-bad=1"));
    tdata_loader_destroy(l);
    fclose(o.log);
    tdata_dataset_close(ds);
}
END_TEST

/* A dataset of large textured images (where a crop or a mirror shows),
 * packed in the test's folder, opened. */
static tdata_dataset *_open_textured(void)
{
    char src[300], out[300];
    snprintf(src, sizeof src, "%s/tex", _dir);
    snprintf(out, sizeof out, "%s/texout", _dir);
    _make_dataset(src, out, 1);
    tdata_dataset *ds;
    ck_assert_int_eq(tdata_dataset_open(out, &ds), 0);
    return ds;
}

/* Mean absolute difference in levels of two u8 batches. */
static double _mad(const uint8_t *a, const uint8_t *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d += abs(a[i] - b[i]);
    return d / n;
}

START_TEST(test_roi_and_dct_match_full_decode)
{
    /* Large textured images: crops are decoded at 1/2 or 1/4 scale and
     * only their region. ROI decoding must give the full decode's pixels
     * (a crop off by one source pixel costs ~10 levels here); DCT scaling
     * changes the effective prefilter a little, and ROI on top of it again
     * changes nothing. */
    tdata_dataset *ds = _open_textured();
    const size_t n = 20 * 3 * 64 * 64;
    for (int mode = TDATA_TRAIN; mode <= TDATA_EVAL; mode++) {
        uint8_t *v[4]; /* bit 0: ROI, bit 1: DCT scaling */
        for (int k = 0; k < 4; k++) {
            tdata_loader_opts o;
            tdata_loader_opts_default(&o);
            o.mode = mode;
            o.batch_size = 20;
            o.out_h = o.out_w = 64;
            o.eval_resize = 80;
            o.scale_min = 0.3;
            o.seed = 9;
            o.dtype = TDATA_U8;
            o.roi_decode = k & 1;
            o.reduced_dct = k >> 1;
            tdata_loader *l = _loader(ds, &o);
            ck_assert_int_eq(tdata_loader_start(l, 0, 0), 0);
            int err;
            const tdata_batch *b = tdata_loader_next(l, &err);
            ck_assert_int_eq(b->n, 20);
            v[k] = malloc(n);
            memcpy(v[k], b->data, n);
            tdata_loader_destroy(l);
        }
        ck_assert_msg(_mad(v[1], v[0], n) < 0.5, "ROI: %.2f",
                      _mad(v[1], v[0], n));
        ck_assert_msg(_mad(v[2], v[0], n) < 8, "DCT: %.2f",
                      _mad(v[2], v[0], n));
        ck_assert_msg(_mad(v[3], v[2], n) < 0.5, "ROI+DCT: %.2f",
                      _mad(v[3], v[2], n));
        for (int k = 0; k < 4; k++)
            free(v[k]);
    }
    tdata_dataset_close(ds);
}
END_TEST

/* A stand-in for cudaHostAlloc: counts and remembers the blocks. */
typedef struct {
    int allocs, frees;
    void *blocks[8];
} _pinned;

static void *_pin_alloc(size_t n, void *ctx)
{
    _pinned *p = ctx;
    void *b = malloc(n);
    p->blocks[p->allocs++] = b;
    return b;
}

static void _pin_free(void *b, void *ctx)
{
    _pinned *p = ctx;
    p->frees++;
    free(b);
}

START_TEST(test_caller_allocated_buffers)
{
    tdata_dataset *ds = _open();
    _pinned pin = {0};
    tdata_loader_opts o;
    tdata_loader_opts_default(&o);
    o.batch_size = 5;
    o.out_h = o.out_w = 16;
    o.prefetch = 3;
    o.alloc = _pin_alloc;
    o.free = _pin_free;
    o.alloc_ctx = &pin;
    tdata_loader *l = _loader(ds, &o);
    ck_assert_int_eq(pin.allocs, 3);
    ck_assert_int_eq(tdata_loader_start(l, 0, 0), 0);
    for (int k = 0; k < 6; k++) {
        int err;
        const tdata_batch *b = tdata_loader_next(l, &err);
        ck_assert_ptr_nonnull(b);
        /* Every batch is handed out in one of the caller's buffers. */
        ck_assert(b->data == pin.blocks[0] || b->data == pin.blocks[1] ||
                  b->data == pin.blocks[2]);
    }
    tdata_loader_destroy(l);
    ck_assert_int_eq(pin.frees, 3);
    tdata_dataset_close(ds);
}
END_TEST

START_TEST(test_bad_options_and_staging)
{
    tdata_dataset *ds = _open();
    tdata_loader_opts o;
    tdata_loader_opts_default(&o);
    o.prefetch = 1;
    tdata_loader *l;
    ck_assert_int_eq(tdata_loader_create(ds, &o, &l), TDATA_EINVAL);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "prefetch 1"));
    tdata_loader_opts_default(&o);
    o.batch_size = 100; /* more than a rank's slice */
    ck_assert_int_eq(tdata_loader_create(ds, &o, &l), TDATA_EINVAL);
    /* Staging copies the shards and re-points the dataset at them. */
    char st[400];
    snprintf(st, sizeof st, "%s/stage", _dir);
    ck_assert_int_eq(tdata_stage(ds, st), 0);
    ck_assert_ptr_nonnull(strstr(tdata_dataset_shard_path(ds, 0), "/stage/"));
    uint8_t *b = NULL;
    size_t cap = 0, len;
    uint32_t crc;
    ck_assert_int_eq(tdata_dataset_read(ds, 7, &b, &cap, &len, NULL, &crc), 0);
    ck_assert_uint_eq(tdata_crc32c(0, b, len), crc);
    free(b);
    /* A second stage finds the copies and does not copy again. */
    ck_assert_int_eq(tdata_stage(ds, st), 0);
    tdata_dataset_close(ds);
}
END_TEST

/* Batch b of two loaders on one seed: *fa of the float loader (order
 * `order`, mirrored on the CPU), *ub of the u8 NHWC loader with deferred
 * flips. */
static void _two_batches(tdata_loader *f, tdata_loader *u,
                         const tdata_batch **fa, const tdata_batch **ub)
{
    int err;
    ck_assert_ptr_nonnull(*fa = tdata_loader_next(f, &err));
    ck_assert_ptr_nonnull(*ub = tdata_loader_next(u, &err));
    ck_assert_int_eq((*fa)->n, (*ub)->n);
    for (int i = 0; i < (*fa)->n; i++) {
        ck_assert_uint_eq((*fa)->ids[i], (*ub)->ids[i]);
        ck_assert_uint_eq((*fa)->flips[i], (*ub)->flips[i]);
    }
}

/* The GPU input path's maths (data/read/tdata_norm.h) on the CPU: u8 NHWC
 * batches with deferred flips, normalised and mirrored element by element,
 * give the loader's own float batches bit for bit, in NCHW and NHWC, on
 * textured JPEGs (a mirror shows); ignoring the flips does not. */
START_TEST(test_deferred_flip_matches_cpu_transform)
{
    tdata_dataset *ds = _open_textured();
    const int H = 12, W = 16, B = 10;
    int flipped = 0, kept = 0;
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        tdata_loader_opts o;
        tdata_loader_opts_default(&o);
        o.batch_size = B;
        o.out_h = H;
        o.out_w = W;
        o.seed = 11;
        o.order = nhwc ? TDATA_NHWC : TDATA_NCHW;
        tdata_loader *f = _loader(ds, &o);
        o.order = TDATA_NHWC;
        o.dtype = TDATA_U8;
        o.defer_flip = 1;
        tdata_loader *u = _loader(ds, &o);
        float scale[3], bias[3];
        tdata_loader_norm(u, scale, bias);
        ck_assert_int_eq(tdata_loader_start(f, 0, 0), 0);
        ck_assert_int_eq(tdata_loader_start(u, 0, 0), 0);
        for (int step = 0; step < 2; step++) {
            const tdata_batch *fa, *ub;
            _two_batches(f, u, &fa, &ub);
            const uint8_t none[16] = {0};
            size_t n = (size_t)fa->n * 3 * H * W, differ = 0;
            for (size_t i = 0; i < n; i++) {
                int ch, ch0;
                size_t at = tdata_norm_src(i, 3, H, W, nhwc, ub->flips, &ch);
                float v = tdata_norm_px(((const uint8_t *)ub->data)[at],
                                        scale[ch], bias[ch]),
                      want = ((const float *)fa->data)[i];
                ck_assert_msg(!memcmp(&v, &want, sizeof v),
                              "nhwc %d element %zu: %a vs %a", nhwc, i, v,
                              want);
                size_t at0 = tdata_norm_src(i, 3, H, W, nhwc, none, &ch0);
                differ += ((const uint8_t *)ub->data)[at0] !=
                          ((const uint8_t *)ub->data)[at];
            }
            for (int i = 0; i < fa->n; i++)
                fa->flips[i] ? flipped++ : kept++;
            ck_assert(differ > n / 20); /* the mirror is visible */
        }
        tdata_loader_destroy(f);
        tdata_loader_destroy(u);
    }
    ck_assert_int_gt(flipped, 0);
    ck_assert_int_gt(kept, 0);
    tdata_dataset_close(ds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data_loader");
    TCase *tc = tcase_create("loader");
    tcase_add_checked_fixture(tc, _setup, _teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ranks_cover_epoch_and_epochs_differ);
    tcase_add_test(tc, test_resume_replays);
    tcase_add_test(tc, test_global_blocks_any_world);
    tcase_add_test(tc, test_epoch_range);
    tcase_add_test(tc, test_eval_pixels_layouts_dtypes);
    tcase_add_test(tc, test_prefetch_ahead);
    tcase_add_test(tc, test_bad_samples_skipped_and_bounded);
    tcase_add_test(tc, test_roi_and_dct_match_full_decode);
    tcase_add_test(tc, test_bad_options_and_staging);
    tcase_add_test(tc, test_caller_allocated_buffers);
    tcase_add_test(tc, test_deferred_flip_matches_cpu_transform);
    suite_add_tcase(s, tc);
    return tdata_test_run(s);
}
