/* tools/torus_pack.c: the torus-pack command: parses options, runs the packing
 * engine (pack/pack.c), prints the summary, and maps the outcome to the
 * exit status. */
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_cli.h"
#include "common/torus_error.h"
#include "common/torus_report.h"
#include "config.h"
#include "data/pack/pack.h"
#include "data/tools/cli.h"

static const char _help[] =
    "NAME\n"
    "    torus-pack - pack images into HDF5 shards for the torus input "
    "pipeline\n"
    "\n"
    "SYNOPSIS\n"
    "    torus-pack [OPTION]... --output=DIR SOURCE\n"
    "    torus-pack --index-only --output=DIR [--split=NAME]\n"
    "\n"
    "DESCRIPTION\n"
    "    Validates every image of SOURCE by decoding it and writes the "
    "dataset\n"
    "    as DIR/SPLIT-NNNNN-of-MMMMM.h5 shards plus DIR/SPLIT-index.txt "
    "(format:\n"
    "    docs/shard-format.md). SOURCE is one of:\n"
    "      - a directory of class folders: ImageNet train/ "
    "(train/WNID/*.JPEG),\n"
    "        val/ sorted into class folders, or any CLASS/FILE tree;\n"
    "      - a flat directory (ImageNet val/) with --val-labels;\n"
    "      - an IDX image file (MNIST, Fashion-MNIST), gzipped or not; the\n"
    "        labels file is found by replacing images-idx3 by labels-idx1.\n"
    "    Labels are the class folders (or WNIDs) in sorted order unless\n"
    "    --classes gives the order. IDX data and --decoded are stored as "
    "dense\n"
    "    uint8 N x H x W x C arrays; everything else as the encoded files.\n"
    "\n"
    "    Validation policy: each image is decoded in full. Clean JPEGs\n"
    "    (including grayscale and progressive) are stored unchanged. "
    "CMYK/YCCK\n"
    "    JPEGs and PNG files are re-encoded as RGB JPEG. Truncated, corrupt "
    "or\n"
    "    unknown files are rejected with a line naming the file and the\n"
    "    reason; nothing is dropped silently.\n"
    "\n"
    "    Shards are cut from a seeded shuffle of the sorted file list so that\n"
    "    they hold about equal bytes and mix all classes. The plan depends "
    "only\n"
    "    on SOURCE and --seed, so job-array tasks agree on it and each packs "
    "its\n"
    "    own --shard-range. Finished shards are skipped when a run is "
    "repeated\n"
    "    (resume). The index is written once all shards exist.\n"
    "\n"
    "OPTIONS\n"
    "    -o, --output=DIR        where the shards and index go (created)\n"
    "    -s, --split=NAME        shard and index name prefix, up to 32 of\n"
    "                            A-Z a-z 0-9 . _ - (default: train)\n"
    "    -n, --shards=N          number of shards (default: from "
    "--shard-size)\n"
    "        --shard-size=BYTES  target input bytes per shard; K, M, G "
    "suffixes\n"
    "                            (default: 256M, ~1000 shards for ImageNet)\n"
    "        --shard-range=A:B   pack only shards A..B-1 (job arrays)\n"
    "        --array             take the range from SLURM_ARRAY_TASK_ID,\n"
    "                            SLURM_ARRAY_TASK_MIN and "
    "SLURM_ARRAY_TASK_COUNT\n"
    "    -j, --threads=N         decode/encode threads (default: 2)\n"
    "        --seed=N            shuffle seed of the shard plan (default: 0)\n"
    "        --resize-shorter=N  store JPEGs whose shorter side exceeds N\n"
    "                            resized to N (antialiased), re-encoded\n"
    "        --decoded=HxW       store decoded HxWx3 pixels (resize to cover,\n"
    "                            centre crop): the dense layout\n"
    "        --quality=Q         JPEG quality of re-encoded images (default "
    "95)\n"
    "        --classes=FILE      class order and names, one 'WNID [words]' "
    "per\n"
    "                            line (LOC_synset_mapping.txt)\n"
    "        --val-labels=FILE   labels of a flat val/: LOC_val_solution.csv, "
    "or\n"
    "                            the devkit's "
    "ILSVRC2012_validation_ground_truth.txt\n"
    "        --devkit-synsets=FILE  WNID of each devkit ILSVRC2012_ID, one "
    "per\n"
    "                            line in ID order (needed with the devkit "
    "file)\n"
    "        --idx-labels=FILE   labels of an IDX image file\n"
    "        --report=FILE       append a line per rejected or re-encoded "
    "file\n"
    "        --listing=FILE      read the source listing (files, sizes, "
    "labels)\n"
    "                            from FILE if it exists, else walk SOURCE and\n"
    "                            save it there: run once before a job array "
    "so\n"
    "                            that its tasks do not all stat() every file\n"
    "        --list-only         with --listing: walk SOURCE, save the "
    "listing, exit\n"
    "        --progress, --no-progress  images/s and ETA on stderr (default: "
    "on\n"
    "                            when stderr is a terminal)\n"
    "        --max-pixels=N      refuse images that declare more than N "
    "pixels\n"
    "                            (width x height; default: 134217728, or\n"
    "                            TDATA_MAX_PIXELS): decompression bombs\n"
    "        --max-idx-bytes=BYTES  refuse IDX files that expand past BYTES "
    "(K,\n"
    "                            M, G; default: 2G, or TDATA_MAX_IDX_BYTES)\n"
    "        --no-index          do not write the index at the end\n"
    "        --index-only        (re)build SPLIT-index.txt from the shards in "
    "DIR\n"
    "    -h, --help              show this help\n"
    "    -V, --version           show the version\n"
    "\n"
    "EXIT STATUS\n"
    "    0  every image was packed\n"
    "    1  packing finished but some images were rejected (see the "
    "report),\n"
    "       or some entries of SOURCE were skipped (FIFOs, devices, "
    "dangling\n"
    "       links, folders inside class folders: one line each on "
    "stderr)\n"
    "    2  usage error, or a fatal error (message names the file)\n"
    "\n"
    "EXAMPLES\n"
    "    torus-pack -j 16 -o /lustre/imagenet train/\n"
    "    torus-pack -s val --val-labels=LOC_val_solution.csv \\\n"
    "        --classes=LOC_synset_mapping.txt -o /lustre/imagenet val/\n"
    "    torus-pack -o fmnist \\\n"
    "        /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz\n"
    "    torus-pack --list-only --listing=OUT/train.list -o OUT train/\n"
    "    sbatch --array=0-63 --wrap 'torus-pack --array \\\n"
    "        --listing=OUT/train.list --shards=1024 -o OUT train/'\n";

static int _usage(const char *msg, const char *arg)
{
    return tdata_cli_usage("torus-pack", msg, arg);
}

/* An integer option in [lo, hi] into *v; else the usage line naming opt
 * and the range. */
static int _num(const char *opt, const char *arg, long lo, long hi, int *v)
{
    long x;
    if (torus_cli_long(opt, arg, lo, hi, &x))
        return tdata_cli_fail("torus-pack", TORUS_CLI_USAGE);
    *v = (int)x;
    return 0;
}

static int _bytes(const char *s, uint64_t *v)
{
    char *e;
    double x = strtod(s, &e);
    double m = 1;
    if (*e == 'K' || *e == 'k')
        m = 1024.0, e++;
    else if (*e == 'M' || *e == 'm')
        m = 1024.0 * 1024, e++;
    else if (*e == 'G' || *e == 'g')
        m = 1024.0 * 1024 * 1024, e++;
    if (e == s || *e || x <= 0)
        return -1;
    *v = (uint64_t)(x * m);
    return 0;
}

enum {
    O_SHARD_SIZE = 256,
    O_RANGE,
    O_ARRAY,
    O_SEED,
    O_RESIZE,
    O_DECODED,
    O_QUALITY,
    O_CLASSES,
    O_VAL,
    O_DEVKIT,
    O_IDXL,
    O_REPORT,
    O_PROG,
    O_NOPROG,
    O_NOINDEX,
    O_INDEXONLY,
    O_LISTING,
    O_LISTONLY,
    O_MAXPIX,
    O_MAXIDX
};

static const struct option _opts[] = {
    {"output", required_argument, 0, 'o'},
    {"split", required_argument, 0, 's'},
    {"shards", required_argument, 0, 'n'},
    {"shard-size", required_argument, 0, O_SHARD_SIZE},
    {"shard-range", required_argument, 0, O_RANGE},
    {"array", no_argument, 0, O_ARRAY},
    {"threads", required_argument, 0, 'j'},
    {"seed", required_argument, 0, O_SEED},
    {"resize-shorter", required_argument, 0, O_RESIZE},
    {"decoded", required_argument, 0, O_DECODED},
    {"quality", required_argument, 0, O_QUALITY},
    {"classes", required_argument, 0, O_CLASSES},
    {"val-labels", required_argument, 0, O_VAL},
    {"devkit-synsets", required_argument, 0, O_DEVKIT},
    {"idx-labels", required_argument, 0, O_IDXL},
    {"report", required_argument, 0, O_REPORT},
    {"listing", required_argument, 0, O_LISTING},
    {"list-only", no_argument, 0, O_LISTONLY},
    {"progress", no_argument, 0, O_PROG},
    {"no-progress", no_argument, 0, O_NOPROG},
    {"no-index", no_argument, 0, O_NOINDEX},
    {"index-only", no_argument, 0, O_INDEXONLY},
    {"max-pixels", required_argument, 0, O_MAXPIX},
    {"max-idx-bytes", required_argument, 0, O_MAXIDX},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, 'V'},
    {0, 0, 0, 0}};

/* The command line: the engine's options plus the modes main picks from. */
typedef struct _cli {
    tdata_pack_opts o;
    int array, index_only, list_only;
} _cli;

/* Options that take a number, a size or a range. Returns 0, 2 after the
 * usage line, or -1 when c is none of them. */
static int _opt_number(int c, const char *arg, void *ctx)
{
    tdata_pack_opts *o = &((_cli *)ctx)->o;
    long v;
    switch (c) {
    case 'n':
        return _num("--shards", arg, 1, 99999, &o->shards);
    case O_SHARD_SIZE:
        return _bytes(arg, &o->shard_bytes) ? _usage("bad --shard-size", arg)
                                            : 0;
    case O_RANGE:
        if (sscanf(arg, "%d:%d", &o->range_lo, &o->range_hi) != 2 ||
            o->range_lo < 0 || o->range_hi <= o->range_lo)
            return _usage("bad --shard-range (want A:B with A < B)", arg);
        return 0;
    case 'j':
        return _num("--threads", arg, 1, 1024, &o->threads);
    case O_SEED:
        if (torus_cli_long("--seed", arg, 0, LONG_MAX, &v))
            return tdata_cli_fail("torus-pack", TORUS_CLI_USAGE);
        o->seed = (uint64_t)v;
        return 0;
    case O_RESIZE:
        return _num("--resize-shorter", arg, 8, 65535, &o->resize_shorter);
    case O_DECODED:
        if (sscanf(arg, "%dx%d", &o->dec_h, &o->dec_w) != 2 || o->dec_h < 1 ||
            o->dec_w < 1 || o->dec_h > 4096 || o->dec_w > 4096)
            return _usage("bad --decoded (want HxW)", arg);
        return 0;
    case O_QUALITY:
        return _num("--quality", arg, 1, 100, &o->quality);
    case O_MAXPIX:
        if (torus_cli_long("--max-pixels", arg, 1, LONG_MAX, &v))
            return tdata_cli_fail("torus-pack", TORUS_CLI_USAGE);
        tdata_set_max_pixels((uint64_t)v);
        return 0;
    case O_MAXIDX: {
        uint64_t b;
        if (_bytes(arg, &b) || b == 0)
            return _usage("bad --max-idx-bytes", arg);
        tdata_set_max_idx_bytes(b);
        return 0;
    }
    }
    return -1;
}

/* Options that name a file or set a flag; returns like _opt_number. */
static int _opt_other(int c, const char *arg, void *ctx)
{
    _cli *cl = ctx;
    tdata_pack_opts *o = &cl->o;
    switch (c) {
    case 'o':
        o->output = arg;
        return 0;
    case 's':
        /* The split names the shard files and is written into the index
         * and every shard: plain characters only. */
        if (!*arg || *arg == '.' ||
            strspn(arg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789._-") != strlen(arg) ||
            strlen(arg) > 32)
            return _usage("bad --split (at most 32 of A-Z a-z 0-9 . _ -, "
                          "not starting with '.')",
                          arg);
        o->split = arg;
        return 0;
    case O_CLASSES:
        o->classes_file = arg;
        return 0;
    case O_VAL:
        o->val_labels = arg;
        return 0;
    case O_DEVKIT:
        o->devkit_synsets = arg;
        return 0;
    case O_IDXL:
        o->idx_labels = arg;
        return 0;
    case O_REPORT:
        o->report = arg;
        return 0;
    case O_LISTING:
        o->listing = arg;
        return 0;
    case O_PROG:
    case O_NOPROG:
        o->progress = c == O_PROG;
        return 0;
    case O_NOINDEX:
        o->no_index = 1;
        return 0;
    case O_ARRAY:
        cl->array = 1;
        return 0;
    case O_INDEXONLY:
        cl->index_only = 1;
        return 0;
    case O_LISTONLY:
        cl->list_only = 1;
        return 0;
    }
    return -1;
}

/* Fill cl from argv. Returns -1 when main goes on, else the exit status
 * (0 after --help or --version, 2 on a usage error). */
static int _parse(int argc, char **argv, _cli *cl)
{
    memset(cl, 0, sizeof *cl);
    tdata_pack_opts *o = &cl->o;
    o->split = "train";
    o->shard_bytes = 256ull << 20;
    o->range_hi = -1;
    o->threads = 2;
    o->quality = 95;
    o->progress = -1;
    o->creator = "torus-pack " PACKAGE_VERSION;
    static const tdata_cli_group groups[] = {_opt_number, _opt_other};
    int rc = tdata_cli_parse(argc, argv, "torus-pack", _help, "o:s:n:j:hV",
                             _opts, groups, 2, cl);
    if (rc >= 0)
        return rc;
    if (!o->output)
        return _usage("--output=DIR is required", NULL);
    /* After the options, which win over the environment. */
    if (tdata_limits_env())
        return _usage(torus_error_msg(), NULL);
    return -1;
}

/* --index-only: rebuild the index from the shards in --output. */
static int _index_only(const tdata_pack_opts *o)
{
    /* The shard count is in the shards' own names: find shard 0. */
    char pat[4096];
    int N = 0;
    snprintf(pat, sizeof pat, "%s/%s-00000-of-*.h5", o->output, o->split);
    glob_t g;
    if (glob(pat, 0, NULL, &g) == 0) {
        if (g.gl_pathc == 1)
            N = atoi(strrchr(g.gl_pathv[0], '-') + 1);
        globfree(&g);
    }
    if (N < 1) {
        fprintf(stderr,
                "torus-pack: %s: want exactly one %s-00000-of-*.h5 shard\n",
                o->output, o->split);
        return 2;
    }
    char ipath[4096];
    if (tdata_index_build(o->output, o->split, N, ipath, sizeof ipath)) {
        fprintf(stderr, "torus-pack: %s\n", torus_error_msg());
        return 2;
    }
    printf("torus-pack: wrote %s (%d shards)\n", ipath, N);
    return 0;
}

/* --list-only: walk SOURCE and save the listing. */
static int _list_only(const tdata_pack_opts *o)
{
    if (!o->listing)
        return _usage("--list-only needs --listing=FILE", NULL);
    tdata_pack_src src;
    int rc = tdata_pack_scan(o, &src);
    if (rc == TDATA_OK)
        rc = tdata_listing_write(o->listing, &src);
    if (rc == TDATA_OK)
        printf("torus-pack: listed %llu files in %d classes to %s; %llu "
               "skipped\n",
               (unsigned long long)src.n, src.num_classes, o->listing,
               (unsigned long long)src.skipped);
    uint64_t skipped = src.skipped;
    tdata_pack_src_free(&src);
    if (rc) {
        fprintf(stderr, "torus-pack: %s\n", torus_error_msg());
        return 2;
    }
    return skipped ? 1 : 0;
}

/* --array: this task's share of the shards, from the Slurm job array.
 * Returns -1 when there is work, else the exit status. */
static int _array_range(tdata_pack_opts *o)
{
    const char *id = getenv("SLURM_ARRAY_TASK_ID");
    const char *cnt = getenv("SLURM_ARRAY_TASK_COUNT");
    const char *mn = getenv("SLURM_ARRAY_TASK_MIN");
    if (!id || !cnt)
        return _usage("--array needs SLURM_ARRAY_TASK_ID and "
                      "SLURM_ARRAY_TASK_COUNT (run it in a job array)",
                      NULL);
    if (!o->shards)
        return _usage("--array needs --shards=N so every task agrees", NULL);
    long t = atol(id) - (mn ? atol(mn) : 0), T = atol(cnt);
    if (T < 1 || t < 0 || t >= T)
        return _usage("bad SLURM_ARRAY_TASK_* values", id);
    o->range_lo = (int)(t * o->shards / T);
    o->range_hi = (int)((t + 1) * o->shards / T);
    if (o->range_hi == o->range_lo) {
        printf("torus-pack: array task %ld of %ld has no shards\n", t, T);
        return 0;
    }
    return -1;
}

/* Pack and print the summary; the exit status says whether any image was
 * rejected. */
static int _pack(const tdata_pack_opts *o)
{
    tdata_pack_summary s;
    if (tdata_pack_run(o, &s)) {
        fprintf(stderr, "torus-pack: %s\n", torus_error_msg());
        return 2;
    }
    printf("torus-pack: %llu images seen, %llu packed, %llu rejected, "
           "%llu re-encoded, %llu sources skipped; %d shards written, %llu "
           "already done%s%s\n",
           (unsigned long long)s.seen, (unsigned long long)s.packed,
           (unsigned long long)s.rejected, (unsigned long long)s.reencoded,
           (unsigned long long)s.skipped_sources, s.shards_written,
           (unsigned long long)s.skipped_shards,
           s.index_written ? "; index " : "",
           s.index_written ? s.index_path : "");
    return s.rejected || s.skipped_sources ? 1 : 0;
}

int main(int argc, char **argv)
{
    _cli cl;
    torus_report_set("torus-pack", NULL);
    int rc = _parse(argc, argv, &cl);
    if (rc >= 0)
        return rc;
    if (cl.index_only)
        return _index_only(&cl.o);
    if (optind != argc - 1)
        return _usage("exactly one SOURCE is required", NULL);
    cl.o.source = argv[optind];
    if (cl.list_only)
        return _list_only(&cl.o);
    if (cl.o.dec_h > 0 && cl.o.resize_shorter > 0)
        return _usage("--decoded and --resize-shorter exclude each other",
                      NULL);
    if (cl.array && (rc = _array_range(&cl.o)) >= 0)
        return rc;
    return _pack(&cl.o);
}
