/* pack/pack.c: torus-pack's engine: plan the shards, pack a range of them with
 * threads, resume, report, and write the index.
 * The plan depends only on the source listing and --seed: items sorted by
 * name, shuffled by the seed (so every shard mixes all classes), then cut
 * into N runs of about equal input bytes. Every job-array task computes
 * the same plan and packs only its --shard-range; a shard appears under
 * its final name only when complete, so a rerun skips finished shards. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "data/pack/pack.h"

static int _cmpitem(const void *a, const void *b)
{
    return strcmp(((const tdata_pack_item *)a)->name,
                  ((const tdata_pack_item *)b)->name);
}

static double _now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Shared state of one shard being packed. */
typedef struct _job {
    const tdata_pack_opts *o;
    const tdata_pack_src *src;
    const tdata_pack_item *items;
    uint64_t n;
    tdata_pack_out *out;
    uint64_t next;        /* atomic work counter */
    uint64_t *done_total; /* atomic, across shards, for progress */
    uint64_t range_total;
    double t0;
    pthread_mutex_t plock;
    double last_print;
    int progress;
    int dense;
    size_t img_bytes;
} _job;

static void _progress(_job *j, int final)
{
    uint64_t done = __atomic_load_n(j->done_total, __ATOMIC_RELAXED);
    double t = _now() - j->t0;
    double rate = t > 0 ? done / t : 0;
    double eta = rate > 0 ? (j->range_total - done) / rate : 0;
    torus_progress(final, "%llu/%llu images  %.0f img/s  ETA %dm%02ds ",
                   (unsigned long long)done, (unsigned long long)j->range_total,
                   rate, (int)(eta / 60), (int)eta % 60);
}

static int _read_file(const char *path, uint8_t **buf, size_t *cap, size_t *len,
                      char *why, size_t n)
{
    /* Non-blocking open and fstat: the walk saw a regular file, but what
     * is there now may be a FIFO, which would block this thread. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, n, "cannot open: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, n, "%s, not a regular file", tdata_file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    size_t sz = (size_t)st.st_size;
    if (*cap < sz + 1) {
        free(*buf);
        *cap = sz + sz / 4 + 1;
        *buf = malloc(*cap);
    }
    size_t got = 0;
    while (got < sz) {
        ssize_t r = read(fd, *buf + got, sz - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    *len = got;
    if (got != sz) {
        snprintf(why, n, "short read (%zu of %zu bytes)", got, sz);
        return -1;
    }
    return 0;
}

static void *_worker(void *arg)
{
    _job *j = arg;
    tdata_pack_worker *w =
        j->dense && j->src->idx_pixels ? NULL : tdata_pack_worker_new(j->o);
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        uint64_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (i >= j->n)
            break;
        const tdata_pack_item *it = &j->items[i];
        tdata_pack_out *out = &j->out[i];
        memset(out, 0, sizeof *out);
        if (j->src->idx_pixels && !(out->data = malloc(j->img_bytes))) {
            snprintf(out->why, sizeof out->why, "no memory for %zu bytes",
                     (size_t)j->img_bytes);
        } else if (j->src->idx_pixels) {
            out->len = j->img_bytes;
            memcpy(out->data, j->src->idx_pixels + it->rec * j->img_bytes,
                   out->len);
            uint64_t s = 0, q = 0;
            for (size_t k = 0; k < out->len; k++) {
                s += out->data[k];
                q += (uint32_t)out->data[k] * out->data[k];
            }
            for (int c = 0; c < 3; c++) { /* one channel, shown as three */
                out->sum[c] = s / 255.0;
                out->sumsq[c] = q / (255.0 * 255.0);
            }
            out->count = (double)out->len;
        } else if (!w) {
            /* Rejected with the reason, like any image the packer cannot
             * take: never a NULL dereference. */
            snprintf(out->why, sizeof out->why,
                     "no memory for a decoder in this thread");
        } else if (_read_file(it->path, &buf, &cap, &len, out->why,
                              sizeof out->why) == 0) {
            tdata_pack_image(w, buf, len, out);
        }
        __atomic_fetch_add(j->done_total, 1, __ATOMIC_RELAXED);
        if (j->progress && pthread_mutex_trylock(&j->plock) == 0) {
            double t = _now();
            if (t - j->last_print > 0.5) {
                j->last_print = t;
                _progress(j, 0);
            }
            pthread_mutex_unlock(&j->plock);
        }
    }
    free(buf);
    tdata_pack_worker_free(w);
    return NULL;
}

/* Byte-balanced contiguous cut of the shuffled items into N shards, each
 * non-empty: shard s ends where the running total passes (s+1)/N. */
static void _cut(const tdata_pack_item *it, uint64_t n, int N, uint64_t *b)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += it[i].bytes;
    uint64_t acc = 0, i = 0;
    b[0] = 0;
    for (int s = 0; s < N; s++) {
        if (s == N - 1) {
            i = n;
        } else {
            long double goal = (long double)total * (s + 1) / N;
            uint64_t max_end = n - (uint64_t)(N - s - 1);
            acc += it[i++].bytes; /* at least one item per shard */
            while (i < max_end && acc + it[i].bytes / 2.0L < goal)
                acc += it[i++].bytes;
        }
        b[s + 1] = i;
    }
}

static int _mkdirs(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return TORUS_FAIL(TDATA_EIO, "%s: %s", dir, strerror(errno));
    return TDATA_OK;
}

/* The shard's attributes, before the per-image sums are added. */
static void _shard_meta(const tdata_pack_opts *o, const tdata_pack_src *src,
                        const _job *j, int s, int N, tdata_shard_meta *m)
{
    memset(m, 0, sizeof *m);
    m->layout = j->dense ? TDATA_LAYOUT_DENSE : TDATA_LAYOUT_ENCODED;
    m->shard_index = s;
    m->num_shards = N;
    m->num_classes = src->num_classes;
    m->split = o->split;
    m->creator = o->creator;
    if (j->dense) {
        m->height = src->idx_pixels ? src->idx_h : o->dec_h;
        m->width = src->idx_pixels ? src->idx_w : o->dec_w;
        m->channels = src->idx_pixels ? 1 : 3;
    }
    m->class_ids = (const char *const *)src->class_ids;
    m->class_words = (const char *const *)src->class_words;
}

/* Say what happened to image i (stderr and --report); 1 if it is kept. */
static int _report_item(const _job *j, uint64_t i, FILE *rep,
                        tdata_shard_meta *m)
{
    const tdata_pack_out *r = &j->out[i];
    /* Escaped: a newline or tab in a file name must not add a line or a
     * field to the report. */
    char *src = tdata_name_escape(
        j->items[i].path ? j->items[i].path : j->items[i].name, 0);
    const char *s = src ? src : "(no memory for the name)";
    int kept = r->data != NULL;
    if (!kept) {
        m->num_rejected++;
        torus_note("rejected %s: %s", s, r->why);
        if (rep)
            fprintf(rep, "rejected\t%s\t%s\n", s, r->why);
    } else if (r->reencoded) {
        m->num_reencoded++;
        if (rep)
            fprintf(rep, "reencoded\t%s\tCMYK/YCCK or PNG stored as RGB JPEG\n",
                    s);
    }
    free(src);
    return kept;
}

/* The kept images back to back, with their offsets, labels and names, in
 * the arrays tdata_shard_write takes. */
typedef struct _gathered {
    uint8_t *data;
    uint64_t *off;
    int32_t *lab;
    const char **names;
    uint64_t good;
} _gathered;

static void _gather(const _job *j, FILE *rep, tdata_shard_meta *m, _gathered *g)
{
    uint64_t total = 0, good = 0;
    for (uint64_t i = 0; i < j->n; i++)
        if (j->out[i].data) {
            total += j->out[i].len;
            good++;
        }
    g->data = malloc(total ? total : 1);
    g->off = malloc((good + 1) * sizeof *g->off);
    g->lab = malloc((good ? good : 1) * sizeof *g->lab);
    g->names = malloc((good ? good : 1) * sizeof *g->names);
    uint64_t k = 0, pos = 0;
    for (uint64_t i = 0; i < j->n; i++) {
        if (!_report_item(j, i, rep, m))
            continue;
        const tdata_pack_out *r = &j->out[i];
        memcpy(g->data + pos, r->data, r->len);
        g->off[k] = pos;
        pos += r->len;
        g->lab[k] = j->items[i].label;
        g->names[k] = j->items[i].name;
        for (int c = 0; c < 3; c++) {
            m->pixel_sum[c] += r->sum[c];
            m->pixel_sumsq[c] += r->sumsq[c];
        }
        m->pixel_count += r->count;
        k++;
    }
    g->off[k] = pos;
    g->good = good;
}

static int _write_shard(const tdata_pack_opts *o, const tdata_pack_src *src,
                        _job *j, int s, int N, const char *path, FILE *rep,
                        tdata_pack_summary *sum)
{
    tdata_shard_meta m;
    _shard_meta(o, src, j, s, N, &m);
    _gathered g;
    _gather(j, rep, &m, &g);
    int rc = TDATA_OK;
    if (g.good == 0)
        torus_note("shard %d: every image was rejected; no shard written", s);
    else
        rc = tdata_shard_write(path, &m, g.good, g.data, g.off, g.lab, g.names);
    if (rc == TDATA_OK && g.good) {
        sum->shards_written++;
        sum->packed += g.good;
    }
    sum->rejected += (uint64_t)m.num_rejected;
    sum->reencoded += (uint64_t)m.num_reencoded;
    free(g.data);
    free(g.off);
    free(g.lab);
    free(g.names);
    return g.good == 0
               ? TORUS_FAIL(TDATA_EDECODE, "shard %d: no good images", s)
               : rc;
}

/* The items to pack: a saved listing if there is one (it spares the
 * metadata server a walk of the tree), else a walk, saved when asked. */
static int _load_source(const tdata_pack_opts *o, tdata_pack_src *src)
{
    int rc;
    if (o->listing && access(o->listing, F_OK) == 0) {
        rc = tdata_listing_read(o->listing, o->source, src);
    } else {
        rc = tdata_pack_scan(o, src);
        if (rc == TDATA_OK && o->listing && !src->idx_pixels)
            rc = tdata_listing_write(o->listing, src);
    }
    if (rc)
        tdata_pack_src_free(src);
    return rc;
}

/* The plan: name order, then a seeded shuffle, then N byte-balanced runs
 * (*b, N+1 bounds, malloc'd). */
static int _plan(const tdata_pack_opts *o, tdata_pack_src *src, int *N_out,
                 uint64_t **b)
{
    qsort(src->items, src->n, sizeof *src->items, _cmpitem);
    tdata_rng rng = {tdata_mix64(o->seed ^ 0x7061636bull)};
    for (uint64_t i = src->n; i > 1; i--) {
        uint64_t k = tdata_rng_next(&rng) % i;
        tdata_pack_item t = src->items[i - 1];
        src->items[i - 1] = src->items[k];
        src->items[k] = t;
    }
    uint64_t total = 0;
    for (uint64_t i = 0; i < src->n; i++)
        total += src->items[i].bytes;
    uint64_t N = o->shards > 0 ? (uint64_t)o->shards
                               : (total + o->shard_bytes - 1) / o->shard_bytes;
    if (N < 1)
        N = 1;
    if (N > src->n)
        N = src->n;
    if (N > 99999)
        return TORUS_FAIL(TDATA_EINVAL, "%llu shards is too many (max 99999)",
                          (unsigned long long)N);
    *b = malloc((N + 1) * sizeof **b);
    _cut(src->items, src->n, (int)N, *b);
    *N_out = (int)N;
    return TDATA_OK;
}

static void _shard_path(const tdata_pack_opts *o, int s, int N, char *path,
                        size_t n)
{
    char name[512];
    tdata_shard_filename(name, sizeof name, o->split, s, N);
    snprintf(path, n, "%s/%s", o->output, name);
}

/* Resume: 1 when PATH is already shard s of this plan with its n items
 * (counted into sum), 0 when it must be packed (again). */
static int _already_packed(const char *path, int s, int N, uint64_t n,
                           tdata_pack_summary *sum)
{
    if (access(path, F_OK) != 0)
        return 0;
    tdata_shard sh;
    int orc = tdata_shard_open(path, &sh, 0);
    int done = orc == TDATA_OK && sh.shard_index == s && sh.num_shards == N &&
               sh.n + (uint64_t)sh.num_rejected == n;
    if (done) {
        sum->skipped_shards++;
        sum->packed += sh.n;
        sum->rejected += (uint64_t)sh.num_rejected;
        sum->reencoded += (uint64_t)sh.num_reencoded;
    }
    tdata_shard_close(&sh);
    if (!done)
        torus_note("%s exists but does not match the plan; packing it again",
                   path);
    return done;
}

/* Process items [b[s], b[s+1]) with T threads and write shard s. */
static int _pack_shard(_job *j, const uint64_t *b, int s, int N,
                       const char *path, FILE *rep, tdata_pack_summary *sum)
{
    int T = j->o->threads > 0 ? j->o->threads : 1;
    uint64_t n = b[s + 1] - b[s];
    j->items = j->src->items + b[s];
    j->n = n;
    j->next = 0;
    j->out = calloc(n, sizeof *j->out);
    pthread_t *th = malloc(T * sizeof *th);
    for (int t = 1; t < T; t++)
        pthread_create(&th[t], NULL, _worker, j);
    _worker(j);
    for (int t = 1; t < T; t++)
        pthread_join(th[t], NULL);
    free(th);
    int rc = _write_shard(j->o, j->src, j, s, N, path, rep, sum);
    for (uint64_t i = 0; i < n; i++)
        free(j->out[i].data);
    free(j->out);
    return rc;
}

/* Pack shards [lo, hi) of the plan, skipping finished ones. */
static int _pack_range(const tdata_pack_opts *o, const tdata_pack_src *src,
                       const uint64_t *b, int N, int lo, int hi, FILE *rep,
                       tdata_pack_summary *sum)
{
    _job j;
    memset(&j, 0, sizeof j);
    j.o = o;
    j.src = src;
    j.dense = src->idx_pixels != NULL || o->dec_h > 0;
    j.img_bytes = src->idx_pixels ? (size_t)src->idx_h * src->idx_w
                                  : (size_t)o->dec_h * o->dec_w * 3;
    j.progress = o->progress < 0 ? isatty(2) : o->progress;
    j.range_total = b[hi] - b[lo];
    uint64_t done_total = 0;
    j.done_total = &done_total;
    j.t0 = _now();
    pthread_mutex_init(&j.plock, NULL);
    int rc = TDATA_OK;
    for (int s = lo; s < hi && rc == TDATA_OK; s++) {
        char path[4096 + 512];
        _shard_path(o, s, N, path, sizeof path);
        uint64_t n = b[s + 1] - b[s];
        sum->seen += n;
        if (_already_packed(path, s, N, n, sum))
            done_total += n;
        else
            rc = _pack_shard(&j, b, s, N, path, rep, sum);
    }
    if (j.progress)
        _progress(&j, 1);
    pthread_mutex_destroy(&j.plock);
    return rc;
}

/* The index, once every shard of the plan exists (other array tasks may
 * still be packing theirs). */
static int _maybe_index(const tdata_pack_opts *o, int N,
                        tdata_pack_summary *sum)
{
    for (int s = 0; s < N; s++) {
        char path[4096 + 512];
        _shard_path(o, s, N, path, sizeof path);
        if (access(path, F_OK) != 0)
            return TDATA_OK;
    }
    int rc = tdata_index_build(o->output, o->split, N, sum->index_path,
                               sizeof sum->index_path);
    sum->index_written = rc == TDATA_OK;
    return rc;
}

/* Check --shard-range against the plan and open the output and report. */
static int _prepare(const tdata_pack_opts *o, int N, int *lo, int *hi,
                    FILE **rep)
{
    *lo = o->range_lo;
    *hi = o->range_hi < 0 ? N : o->range_hi;
    if (*hi > N)
        *hi = N;
    if (*lo < 0 || *lo > *hi)
        return TORUS_FAIL(TDATA_EINVAL, "--shard-range=%d:%d outside 0:%d",
                          o->range_lo, o->range_hi, N);
    int rc = _mkdirs(o->output);
    if (rc)
        return rc;
    if (!o->report)
        return TDATA_OK;
    /* O_NONBLOCK: a FIFO with no reader fails here instead of blocking. */
    struct stat st;
    int fd =
        open(o->report,
             O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
             0644);
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        return TORUS_FAIL(TDATA_EIO, "--report=%s: not a regular file",
                          o->report);
    }
    *rep = fd < 0 ? NULL : fdopen(fd, "a");
    if (!*rep) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return TORUS_FAIL(TDATA_EIO, "--report=%s: %s", o->report, strerror(e));
    }
    return TDATA_OK;
}

int tdata_pack_run(const tdata_pack_opts *o, tdata_pack_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    tdata_pack_src src;
    int rc = _load_source(o, &src);
    if (rc)
        return rc;
    int N = 0, lo, hi;
    uint64_t *b = NULL;
    FILE *rep = NULL;
    sum->skipped_sources = src.skipped;
    rc = _plan(o, &src, &N, &b);
    if (rc == TDATA_OK)
        rc = _prepare(o, N, &lo, &hi, &rep);
    if (rc == TDATA_OK)
        rc = _pack_range(o, &src, b, N, lo, hi, rep, sum);
    if (rep)
        fclose(rep);
    if (rc == TDATA_OK && !o->no_index)
        rc = _maybe_index(o, N, sum);
    free(b);
    tdata_pack_src_free(&src);
    return rc;
}
