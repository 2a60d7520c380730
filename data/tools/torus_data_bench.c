/* tools/torus_data_bench.c: the torus-data-bench command: images/s of the input
 * pipeline's stages on a packed dataset, by thread count:
 *   read    the shards' image streams with pread (what the I/O threads do),
 *           next to dd of the same files (the I/O limit);
 *   decode  full JPEG decode from memory, no crop (the decode cost alone);
 *   train   the whole training pipeline (loader, RandomResizedCrop, flip,
 *           normalise), optionally against a simulated step time to show
 *           the wait per step;
 *   eval    the evaluation pipeline (resize, centre crop);
 *   verify  every sample's CRC32C (jobs/stage: after --stage, the copies).
 * It is also the pipeline's command-line driver for tests (--max-bad,
 * exit status). */
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_cli.h"
#include "common/torus_error.h"
#include "config.h"
#include "data/read/read.h"
#include "data/tools/cli.h"

static const char _help[] =
    "NAME\n"
    "    torus-data-bench - measure the torus input pipeline, stage by stage\n"
    "\n"
    "SYNOPSIS\n"
    "    torus-data-bench [OPTION]... INDEX\n"
    "\n"
    "DESCRIPTION\n"
    "    Opens the packed dataset INDEX (a SPLIT-index.txt file or its\n"
    "    directory) and reports images/s for each selected stage and thread\n"
    "    count:\n"
    "      read    pread() of the shards' image streams in 8 MiB requests,\n"
    "              and dd (bs=8M) of the same files for comparison, both from\n"
    "              the page cache after a warm-up pass (the I/O limit); and\n"
    "              one read per sample in a shuffled epoch's order;\n"
    "      decode  full-size JPEG decode of every sample, from memory;\n"
    "      train   the training pipeline: shuffled slice, coalesced reads,\n"
    "              RandomResizedCrop with ROI and DCT-scaled decode, flip,\n"
    "              normalise into batch buffers;\n"
    "      eval    the evaluation pipeline: resize, centre crop, normalise;\n"
    "      verify  every stored sample read in shard order and its CRC32C\n"
    "              checked against the shard's (after --stage: the copies);\n"
    "              each mismatch is named, and any makes the exit status 1.\n"
    "    img/CPU-s is images per CPU-second of the whole process (all "
    "threads):\n"
    "    the rate per core, which other jobs on the node do not distort, for\n"
    "    comparison with other pipelines (tests/bench/data/run.sh compares it\n"
    "    with torchvision/PIL on the same JPEGs).\n"
    "\n"
    "OPTIONS\n"
    "    -m, --modes=LIST        stages to run, comma separated (default:\n"
    "                            read,decode,train,eval)\n"
    "    -t, --threads=LIST      decode thread counts to try (default: 1,2)\n"
    "        --io-threads=N      loader I/O threads (default: 1)\n"
    "    -b, --batch=N           batch size (default: 32)\n"
    "        --size=N            output size, square (default: 224)\n"
    "        --eval-resize=N     eval: shorter side before the crop; 0: the\n"
    "                            whole image is the crop (default 256)\n"
    "    -n, --images=N          images per measurement (default: the "
    "dataset,\n"
    "                            at least one batch; train may take more,\n"
    "                            over several epochs)\n"
    "        --prefetch=N        batches in flight (default: 2)\n"
    "        --step-ms=MS        train: sleep MS per step like a training "
    "step,\n"
    "                            and report the time each step waited for "
    "data\n"
    "        --dtype=f32|f16     output type (default: f32)\n"
    "        --layout=nchw|nhwc  output layout (default: nchw)\n"
    "        --no-roi            decode whole images (no jpeg_crop_scanline)\n"
    "        --no-dct-scale      decode at full size (no reduced DCT scaling)\n"
    "        --fast-upsample     plain instead of fancy chroma upsampling\n"
    "        --max-bad=N         fail once more than N samples are bad\n"
    "        --stage=DIR         copy the shards to DIR first (node-local "
    "disk)\n"
    "        --seed=N            shuffle seed (default: 0)\n"
    "        --no-dd             do not run dd\n"
    "    -h, --help              show this help\n"
    "    -V, --version           show the version\n"
    "\n"
    "ENVIRONMENT\n"
    "    TDATA_MAX_PIXELS  images (or dense shards) that declare more pixels\n"
    "                      (width x height) are refused as decompression "
    "bombs\n"
    "                      (default: 134217728)\n"
    "\n"
    "EXIT STATUS\n"
    "    0 on success; 1 if the dataset cannot be opened or the pipeline "
    "fails\n"
    "    (missing/truncated shard, mismatched index, more than --max-bad bad\n"
    "    samples, a CRC32C mismatch in verify), with a message naming the\n"
    "    file; 2 on usage errors.\n"
    "\n"
    "EXAMPLE\n"
    "    torus-data-bench -t 1,2 -b 64 /scratch/imagenet/train-index.txt\n"
    "    torus-data-bench --stage=/local/imagenet -m verify \\\n"
    "        /lustre/imagenet/train-index.txt   (jobs/stage runs this)\n";

static double _now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* CPU seconds used by this process (all threads): images per CPU-second
 * is the per-core rate, and unlike wall time it does not change when
 * other jobs share the cores. */
static double _cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

typedef struct _cfg {
    int threads[16], nthreads;
    int io_threads, batch, size, eval_resize, prefetch, step_ms;
    int dtype, layout, roi, dct, dd, fast_up;
    long max_bad;
    uint64_t images, seed;
    const char *stage;
    char modes[128]; /* comma separated stages */
} _cfg;

static void _row(const char *what, int threads, double imgs, double secs,
                 double bytes, double cpu)
{
    char th[16], pc[32];
    if (threads > 0)
        snprintf(th, sizeof th, "%d", threads);
    else
        snprintf(th, sizeof th, "-");
    if (cpu > 0)
        snprintf(pc, sizeof pc, "%.1f", imgs / cpu);
    else
        snprintf(pc, sizeof pc, "-");
    printf("%-14s %7s %12.1f %10.1f %14s\n", what, th, imgs / secs,
           bytes / secs / 1e6, pc);
    fflush(stdout);
}

/* pread of every shard's whole image stream in 8 MiB requests; pass 0 warms
 * the page cache, the best of the other two counts. Returns 0, or 1 after
 * the message. */
static int _read_streams(tdata_dataset *ds, double *best, double *bytes)
{
    const tdata_dataset_info *in = tdata_dataset_get_info(ds);
    size_t cap = 8u << 20;
    uint8_t *buf = malloc(cap);
    *best = 0;
    for (int pass = 0; pass < 3; pass++) {
        double t0 = _now();
        *bytes = 0;
        for (int s = 0; s < in->num_shards; s++) {
            tdata_shard *sh = tdata_dataset_shard(ds, s);
            uint64_t total = sh->offsets[sh->n];
            for (uint64_t lo = 0; lo < total; lo += cap) {
                uint64_t hi = lo + cap < total ? lo + cap : total;
                if (tdata_shard_pread(sh, lo, hi, buf)) {
                    fprintf(stderr, "torus-data-bench: %s\n",
                            torus_error_msg());
                    free(buf);
                    return 1;
                }
            }
            *bytes += (double)total;
        }
        double t = _now() - t0;
        if (pass > 0 && (*best == 0 || t < *best))
            *best = t;
    }
    free(buf);
    return 0;
}

/* What a training epoch's I/O does: one read per sample, in the order of
 * the epoch's global permutation (no neighbours to merge). */
static int _read_shuffled(tdata_dataset *ds, const _cfg *c)
{
    uint64_t n = tdata_dataset_get_info(ds)->num_images;
    uint64_t *perm = malloc(n * sizeof *perm);
    tdata_perm(c->seed, 0, n, perm);
    uint8_t *sb = NULL;
    size_t scap = 0, len;
    double sbytes = 0, t0 = _now();
    for (uint64_t i = 0; i < n; i++) {
        if (tdata_dataset_read(ds, perm[i], &sb, &scap, &len, NULL, NULL)) {
            fprintf(stderr, "torus-data-bench: %s\n", torus_error_msg());
            free(sb);
            free(perm);
            return 1;
        }
        sbytes += (double)len;
    }
    _row("read(shuffled)", 1, (double)n, _now() - t0, sbytes, 0);
    free(sb);
    free(perm);
    return 0;
}

/* dd of one file to /dev/null; 0 when it exited cleanly. */
static int _dd(const char *path)
{
    char arg[4200];
    snprintf(arg, sizeof arg, "if=%s", path);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr))
            _exit(127);
        execlp("dd", "dd", arg, "of=/dev/null", "bs=8M", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

/* dd of the same files: the whole file, as fast as the kernel serves it;
 * images/s scaled by the image bytes the pread pass read. */
static void _read_dd(tdata_dataset *ds, double image_bytes)
{
    const tdata_dataset_info *in = tdata_dataset_get_info(ds);
    double ddbest = 0, filebytes = 0;
    for (int pass = 0; pass < 2; pass++) {
        double t0 = _now();
        filebytes = 0;
        for (int s = 0; s < in->num_shards; s++) {
            if (_dd(tdata_dataset_shard_path(ds, s))) {
                fprintf(stderr, "torus-data-bench: dd failed; skipping it\n");
                return;
            }
            filebytes += (double)tdata_dataset_index(ds)->shards[s].bytes;
        }
        double t = _now() - t0;
        if (ddbest == 0 || t < ddbest)
            ddbest = t;
    }
    _row("read(dd)", 0, (double)in->num_images * image_bytes / filebytes,
         ddbest, filebytes, 0);
    printf("  (dd reads whole files, %.0f MB, incl. HDF5 metadata and chunk "
           "padding; "
           "images/s scaled to the image bytes)\n",
           filebytes / 1e6);
}

static int _bench_read(tdata_dataset *ds, const _cfg *c)
{
    double best, bytes;
    if (_read_streams(ds, &best, &bytes))
        return 1;
    _row("read(pread)", 1, (double)tdata_dataset_get_info(ds)->num_images, best,
         bytes, 0);
    if (_read_shuffled(ds, c))
        return 1;
    if (c->dd)
        _read_dd(ds, bytes);
    return 0;
}

typedef struct _dec_arg {
    uint8_t **raw;
    size_t *len;
    uint64_t n, next;
    int fails;
} _dec_arg;

static void *_dec_thread(void *p)
{
    _dec_arg *a = p;
    tdata_jdec *d = tdata_jdec_new();
    tdata_image im = {0};
    for (;;) {
        uint64_t i = __atomic_fetch_add(&a->next, 1, __ATOMIC_RELAXED);
        if (i >= a->n)
            break;
        int W, H;
        if (tdata_jpeg_header(d, a->raw[i], a->len[i], &W, &H, NULL, NULL) ||
            tdata_jpeg_decode_region(d, a->raw[i], a->len[i], 0, 0, W, H, 8, 0,
                                     &im))
            __atomic_fetch_add(&a->fails, 1, __ATOMIC_RELAXED);
    }
    tdata_image_free(&im);
    tdata_jdec_free(d);
    return NULL;
}

static int _bench_decode(tdata_dataset *ds, const _cfg *c, uint64_t n)
{
    if (tdata_dataset_get_info(ds)->layout != TDATA_LAYOUT_ENCODED) {
        printf("%-14s (dense dataset: nothing to decode)\n", "decode");
        return 0;
    }
    _dec_arg a = {0};
    a.raw = calloc(n, sizeof *a.raw);
    a.len = calloc(n, sizeof *a.len);
    a.n = n;
    double bytes = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t cap = 0;
        if (tdata_dataset_read(ds, i, &a.raw[i], &cap, &a.len[i], NULL, NULL)) {
            fprintf(stderr, "torus-data-bench: %s\n", torus_error_msg());
            for (uint64_t k = 0; k <= i; k++)
                free(a.raw[k]);
            free(a.raw);
            free(a.len);
            return 1;
        }
        bytes += (double)a.len[i];
    }
    for (int k = 0; k < c->nthreads; k++) {
        int T = c->threads[k];
        pthread_t th[64];
        a.next = 0;
        a.fails = 0;
        double t0 = _now(), c0 = _cpu();
        for (int t = 1; t < T; t++)
            pthread_create(&th[t], NULL, _dec_thread, &a);
        _dec_thread(&a);
        for (int t = 1; t < T; t++)
            pthread_join(th[t], NULL);
        _row("decode", T, (double)n, _now() - t0, bytes, _cpu() - c0);
        if (a.fails)
            printf("  (%d samples failed to decode)\n", a.fails);
    }
    for (uint64_t i = 0; i < n; i++)
        free(a.raw[i]);
    free(a.raw);
    free(a.len);
    return 0;
}

/* The loader's options for one measurement of the pipeline. */
static void _loader_opts(const _cfg *c, int mode, int threads,
                         tdata_loader_opts *o)
{
    tdata_loader_opts_default(o);
    o->mode = mode;
    o->batch_size = c->batch;
    o->out_h = o->out_w = c->size;
    o->eval_resize = c->eval_resize;
    o->decode_threads = threads;
    o->io_threads = c->io_threads;
    o->prefetch = c->prefetch;
    o->dtype = c->dtype;
    o->order = c->layout;
    o->roi_decode = c->roi;
    o->reduced_dct = c->dct;
    o->fast_upsample = c->fast_up;
    o->max_bad = c->max_bad;
    o->seed = c->seed;
}

static int _bench_pipeline(tdata_dataset *ds, const _cfg *c, int mode,
                           uint64_t n)
{
    for (int k = 0; k < c->nthreads; k++) {
        tdata_loader_opts o;
        _loader_opts(c, mode, c->threads[k], &o);
        tdata_loader *l;
        int rc = tdata_loader_create(ds, &o, &l);
        if (rc == TDATA_OK)
            rc = tdata_loader_start(l, 0, 0);
        if (rc) {
            fprintf(stderr, "torus-data-bench: %s\n", torus_error_msg());
            return 1;
        }
        uint64_t steps = (n + (uint64_t)c->batch - 1) / (uint64_t)c->batch;
        uint64_t spe = tdata_loader_steps_per_epoch(l);
        if (mode == TDATA_EVAL && steps > spe)
            steps = spe;
        int err = 0;
        /* The first batch includes thread start-up: not timed. */
        const tdata_batch *b = tdata_loader_next(l, &err);
        double t0 = _now(), c0 = _cpu(), waited = 0, maxwait = 0;
        uint64_t imgs = 0, done = 1;
        for (; b && done < steps; done++) {
            if (c->step_ms > 0)
                usleep((useconds_t)c->step_ms * 1000);
            b = tdata_loader_next(l, &err);
            if (b) {
                imgs += (uint64_t)b->n;
                waited += b->wait_s;
                if (b->wait_s > maxwait)
                    maxwait = b->wait_s;
            }
        }
        double t = _now() - t0, cpu = _cpu() - c0;
        tdata_loader_stats st;
        tdata_loader_get_stats(l, &st);
        tdata_loader_destroy(l);
        if (err) {
            fprintf(stderr, "torus-data-bench: %s\n", torus_error_msg());
            return 1;
        }
        if (done > 1)
            _row(mode == TDATA_TRAIN ? "train" : "eval", c->threads[k],
                 (double)imgs, t,
                 (double)st.read_bytes * imgs / (st.samples ? st.samples : 1),
                 cpu);
        printf("  steps %llu, wait/step mean %.2f ms max %.2f ms, reads %llu "
               "(%.1f samples/read), bad %llu\n",
               (unsigned long long)done,
               done > 1 ? waited / (double)(done - 1) * 1e3 : 0, maxwait * 1e3,
               (unsigned long long)st.read_calls,
               st.read_calls ? (double)(st.samples + st.bad) / st.read_calls
                             : 0,
               (unsigned long long)st.bad);
    }
    return 0;
}

static int _usage(const char *m, const char *a)
{
    return tdata_cli_usage("torus-data-bench", m, a);
}

enum {
    O_IO = 256,
    O_SIZE,
    O_EVR,
    O_PF,
    O_STEP,
    O_DT,
    O_LAY,
    O_NOROI,
    O_NODCT,
    O_MAXBAD,
    O_STAGE,
    O_SEED,
    O_NODD,
    O_FASTUP
};

static const struct option _opts[] = {
    {"modes", required_argument, 0, 'm'},
    {"threads", required_argument, 0, 't'},
    {"io-threads", required_argument, 0, O_IO},
    {"batch", required_argument, 0, 'b'},
    {"size", required_argument, 0, O_SIZE},
    {"eval-resize", required_argument, 0, O_EVR},
    {"images", required_argument, 0, 'n'},
    {"prefetch", required_argument, 0, O_PF},
    {"step-ms", required_argument, 0, O_STEP},
    {"dtype", required_argument, 0, O_DT},
    {"layout", required_argument, 0, O_LAY},
    {"no-roi", no_argument, 0, O_NOROI},
    {"no-dct-scale", no_argument, 0, O_NODCT},
    {"max-bad", required_argument, 0, O_MAXBAD},
    {"stage", required_argument, 0, O_STAGE},
    {"seed", required_argument, 0, O_SEED},
    {"no-dd", no_argument, 0, O_NODD},
    {"fast-upsample", no_argument, 0, O_FASTUP},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, 'V'},
    {0, 0, 0, 0}};

/* --threads=LIST: up to 16 counts in 1..64. */
static int _threads(const char *arg, _cfg *c)
{
    c->nthreads = 0;
    const char *s = arg;
    char *e;
    while (*s && c->nthreads < 16) {
        long v = strtol(s, &e, 10);
        if (e == s || v < 1 || v > 64)
            return _usage("--threads: want counts in 1..64, comma separated",
                          arg);
        c->threads[c->nthreads++] = (int)v;
        s = *e == ',' ? e + 1 : e;
        if (*e && *e != ',')
            return _usage("--threads: want counts in 1..64, comma separated",
                          arg);
    }
    return 0;
}

/* An integer option in [lo, hi]; else the usage line naming it. */
static int _int(const char *opt, const char *arg, long lo, long hi, int *v)
{
    long x;
    if (torus_cli_long(opt, arg, lo, hi, &x))
        return tdata_cli_fail("torus-data-bench", TORUS_CLI_USAGE);
    *v = (int)x;
    return 0;
}

/* Options that take a number. Returns 0, 2 after the usage line, or -1
 * when o is none of them. */
static int _opt_number(int o, const char *arg, void *ctx)
{
    _cfg *c = ctx;
    long v;
    switch (o) {
    case O_IO:
        return _int("--io-threads", arg, 1, 64, &c->io_threads);
    case 'b':
        return _int("--batch", arg, 1, 65536, &c->batch);
    case O_SIZE:
        return _int("--size", arg, 1, 8192, &c->size);
    case O_EVR:
        return _int("--eval-resize", arg, 0, 8192, &c->eval_resize);
    case 'n':
        if (torus_cli_long("--images", arg, 0, LONG_MAX, &v))
            return tdata_cli_fail("torus-data-bench", TORUS_CLI_USAGE);
        c->images = (uint64_t)v;
        return 0;
    case O_PF:
        return _int("--prefetch", arg, 2, 64, &c->prefetch);
    case O_STEP:
        return _int("--step-ms", arg, 0, 3600000, &c->step_ms);
    case O_MAXBAD:
        if (torus_cli_long("--max-bad", arg, 0, LONG_MAX, &c->max_bad))
            return tdata_cli_fail("torus-data-bench", TORUS_CLI_USAGE);
        return 0;
    case O_SEED:
        if (torus_cli_long("--seed", arg, 0, LONG_MAX, &v))
            return tdata_cli_fail("torus-data-bench", TORUS_CLI_USAGE);
        c->seed = (uint64_t)v;
        return 0;
    }
    return -1;
}

/* --modes=LIST: each a stage _run_modes knows, checked before anything
 * is opened or printed. */
static int _modes(const char *arg, _cfg *c)
{
    static const char *const known[] = {"read", "decode", "train", "eval",
                                        "verify"};
    if (strlen(arg) >= sizeof c->modes)
        return _usage("--modes: list too long", arg);
    char buf[sizeof c->modes], *save;
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *m = strtok_r(buf, ",", &save); m;
         m = strtok_r(NULL, ",", &save)) {
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(m, known[k]))
            k++;
        if (k == sizeof known / sizeof known[0]) {
            fprintf(stderr,
                    "torus-data-bench: --modes: unknown stage '%s' (read, "
                    "decode, train, eval, verify; see --help)\n",
                    m);
            return TORUS_CLI_USAGE;
        }
    }
    snprintf(c->modes, sizeof c->modes, "%s", arg);
    return 0;
}

/* Options that choose or switch. Returns 0, 2 after the usage line, or -1
 * when o is none of them. */
static int _opt_choice(int o, const char *arg, void *ctx)
{
    _cfg *c = ctx;
    switch (o) {
    case 'm':
        return _modes(arg, c);
    case 't':
        return _threads(arg, c);
    case O_DT:
        if (strcmp(arg, "f32") && strcmp(arg, "f16"))
            return _usage("--dtype: want f32 or f16", arg);
        c->dtype = strcmp(arg, "f32") ? TDATA_F16 : TDATA_F32;
        return 0;
    case O_LAY:
        if (strcmp(arg, "nchw") && strcmp(arg, "nhwc"))
            return _usage("--layout: want nchw or nhwc", arg);
        c->layout = strcmp(arg, "nchw") ? TDATA_NHWC : TDATA_NCHW;
        return 0;
    case O_NOROI:
        c->roi = 0;
        return 0;
    case O_NODCT:
        c->dct = 0;
        return 0;
    case O_STAGE:
        c->stage = arg;
        return 0;
    case O_NODD:
        c->dd = 0;
        return 0;
    case O_FASTUP:
        c->fast_up = 1;
        return 0;
    }
    return -1;
}

/* Fill c from argv. Returns -1 when main goes on, else the exit status
 * (0 after --help or --version, 2 on a usage error). */
static int _parse(int argc, char **argv, _cfg *c)
{
    *c = (_cfg){.threads = {1, 2},
                .nthreads = 2,
                .io_threads = 1,
                .batch = 32,
                .size = 224,
                .eval_resize = 256,
                .prefetch = 2,
                .dtype = TDATA_F32,
                .layout = TDATA_NCHW,
                .roi = 1,
                .dct = 1,
                .dd = 1,
                .max_bad = -1,
                .modes = "read,decode,train,eval"};
    static const tdata_cli_group groups[] = {_opt_number, _opt_choice};
    int rc = tdata_cli_parse(argc, argv, "torus-data-bench", _help,
                             "m:t:b:n:hV", _opts, groups, 2, c);
    if (rc >= 0)
        return rc;
    if (optind != argc - 1)
        return _usage("exactly one INDEX is required", NULL);
    return -1;
}

/* Open (and stage) the dataset and print the table's head. Returns 0, or
 * 1 after the message. */
static int _open(const char *index, const _cfg *c, tdata_dataset **ds)
{
    if (tdata_dataset_open(index, ds)) {
        fprintf(stderr, "torus-data-bench: %s\n", torus_error_msg());
        return 1;
    }
    if (c->stage && tdata_stage(*ds, c->stage)) {
        fprintf(stderr, "torus-data-bench: %s\n", torus_error_msg());
        tdata_dataset_close(*ds);
        return 1;
    }
    const tdata_dataset_info *in = tdata_dataset_get_info(*ds);
    printf("torus-data-bench: %s: %llu images, %d shards, %s, batch %d, "
           "output %dx%d %s %s\n",
           index, (unsigned long long)in->num_images, in->num_shards,
           in->layout == TDATA_LAYOUT_DENSE ? "dense" : "encoded", c->batch,
           c->size, c->size, c->dtype == TDATA_F16 ? "f16" : "f32",
           c->layout == TDATA_NHWC ? "NHWC" : "NCHW");
    printf("%-14s %7s %12s %10s %14s\n", "stage", "threads", "images/s", "MB/s",
           "img/CPU-s");
    return 0;
}

/* verify: one pass over every sample in storage order, each CRC32C
 * against the one the packer stored. dataset_open only compares the
 * shards' CRC-of-CRCs with the index, which a copy that garbled image
 * bytes passes; this reads the bytes themselves. Returns 0, or 1 after
 * naming every bad sample (at most 20 lines, then a count). */
static int _verify(tdata_dataset *ds)
{
    uint64_t n = tdata_dataset_get_info(ds)->num_images, bad = 0;
    uint8_t *buf = NULL;
    size_t cap = 0, len;
    uint32_t crc;
    double bytes = 0, t0 = _now(), c0 = _cpu();
    for (uint64_t id = 0; id < n; id++) {
        if (tdata_dataset_read(ds, id, &buf, &cap, &len, NULL, &crc)) {
            fprintf(stderr, "torus-data-bench: verify: %s\n",
                    torus_error_msg());
            free(buf);
            return 1;
        }
        bytes += (double)len;
        if (tdata_crc32c(0, buf, len) == crc)
            continue;
        if (++bad <= 20) {
            int s;
            uint64_t i;
            tdata_dataset_locate(ds, id, &s, &i);
            fprintf(stderr,
                    "torus-data-bench: verify: %s: sample %llu: CRC32C "
                    "mismatch\n",
                    tdata_dataset_shard_path(ds, s), (unsigned long long)i);
        }
    }
    free(buf);
    _row("verify", 1, (double)n, _now() - t0, bytes, _cpu() - c0);
    printf("torus-data-bench: verified %llu images, %llu CRC32C "
           "mismatches\n",
           (unsigned long long)n, (unsigned long long)bad);
    return bad ? 1 : 0;
}

/* Run the stages of --modes in order until one fails. */
static int _run_modes(tdata_dataset *ds, _cfg *c)
{
    const tdata_dataset_info *in = tdata_dataset_get_info(ds);
    uint64_t n = c->images ? c->images : in->num_images;
    /* train rolls over into the next epochs (a small sample timed long
     * enough on many cores); decode holds every image, eval is one epoch. */
    uint64_t n1 = n > in->num_images ? in->num_images : n;
    int rc = 0;
    char *save, *m = strtok_r(c->modes, ",", &save);
    for (; m && !rc; m = strtok_r(NULL, ",", &save)) {
        if (!strcmp(m, "read"))
            rc = _bench_read(ds, c);
        else if (!strcmp(m, "decode"))
            rc = _bench_decode(ds, c, n1);
        else if (!strcmp(m, "train"))
            rc = _bench_pipeline(ds, c, TDATA_TRAIN, n);
        else if (!strcmp(m, "eval"))
            rc = _bench_pipeline(ds, c, TDATA_EVAL, n1);
        else if (!strcmp(m, "verify"))
            rc = _verify(ds);
        else
            return _usage("unknown mode", m);
    }
    return rc;
}

int main(int argc, char **argv)
{
    _cfg c;
    tdata_dataset *ds;
    int rc = _parse(argc, argv, &c);
    if (rc >= 0)
        return rc;
    if (_open(argv[optind], &c, &ds))
        return 1;
    rc = _run_modes(ds, &c);
    tdata_dataset_close(ds);
    return rc;
}
