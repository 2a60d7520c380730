/* trainer/bench/torus_bench.c: the torus-bench tool: command line, help
 * text and dispatch to the sweep, ResNet-50 and model modes (sweep.c,
 * resnet50.c, model.c). Modelled
 * on nccl-tests' all_reduce_perf; runs as one process, under mpirun, or
 * under srun --mpi=pmix. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_cli.h"
#include "common/torus_error.h"
#include "common/torus_report.h"
#include "config.h"
#include "trainer/bench/bench.h"
#include "trainer/comm/tcomm_fusion.h"

static const char _help[] =
    "Usage: torus-bench [--resnet50 | --model] [OPTIONS]\n"
    "\n"
    "Benchmark torus's all-reduce algorithms (libtcomm), nccl-tests style.\n"
    "Runs as a single process, under 'mpirun -np N', or under 'srun "
    "--mpi=pmix'.\n"
    "\n"
    "MODES\n"
    "  (default)            size sweep: one line per size, wire and algorithm "
    "with\n"
    "                       time, algbw, busbw = algbw*2(P-1)/P (on the fp32 "
    "bytes),\n"
    "                       and #wrong (elements, summed over ranks, off the\n"
    "                       double-precision reference by more than the "
    "wire's error\n"
    "                       bound), out-of-place (data in each rank's own "
    "memory) and\n"
    "                       in-place (in memory the node's ranks share, "
    "reduced where\n"
    "                       it lies), as nccl-tests' columns; then the mean "
    "busbw of\n"
    "                       every result, '# Avg bus bandwidth'\n"
    "  --resnet50           gradient sync of the 161 ResNet-50 v1.5 tensors "
    "(25.6M\n"
    "                       parameters): per-tensor fp32 flat all-reduce (the "
    "naive\n"
    "                       baseline) against fused buckets with each "
    "algorithm\n"
    "  --model              print the alpha-beta cost model's predictions for "
    "a\n"
    "                       cluster of -P ranks (no communication; up to "
    "4096+)\n"
    "\n"
    "SWEEP OPTIONS\n"
    "  -b, --minbytes SIZE  smallest message (default 1K); K, M, G suffixes\n"
    "  -e, --maxbytes SIZE  largest message (default 64M)\n"
    "  -f, --stepfactor F   multiply the size by F each step (default 2)\n"
    "  -n, --iters N        timed iterations per line (default 20)\n"
    "  -w, --warmup N       untimed iterations first (default 3)\n"
    "  -a, --algo LIST      comma list of flat, ring, hier, hier-rs, torus2d,\n"
    "                       hybrid, or 'all' (default all)\n"
    "  -d, --wire LIST      comma list of fp32, fp16, bf16 (default fp32)\n"
    "  -c, --check 0|1      check results (default 1)\n"
    "      --sum            reduce a plain sum (default: average, pre-scaled "
    "1/P)\n"
    "      --probe          measure link alpha/beta first (used by hybrid) "
    "and\n"
    "                       add the cost model's prediction to every line\n"
    "      --grid RxC       lay ranks out R x C, row-major by rank\n"
    "      --group-size N   groups of N consecutive ranks (hier, hier-rs)\n"
    "      --json FILE      also write every result line to FILE as one JSON "
    "object\n"
    "                       (rank 0): size, count, wire, algo, oop_time_us,\n"
    "                       oop_algbw_GBps, oop_busbw_GBps, oop_wrong, the "
    "same with\n"
    "                       ip_ for in-place, model_us with --probe, and for\n"
    "                       hybrid oop_ran, oop_ran_wire, ip_ran, ip_ran_wire\n"
    "                       (what it picked); with\n"
    "                       --resnet50 one per row: mode, algo, wire, theta,\n"
    "                       buckets, time_ms, vs_naive, busbw_GBps, "
    "user_bytes,\n"
    "                       wire_bytes, wrong\n"
    "      --timeout S      seconds without progress before a peer counts as "
    "lost\n"
    "                       (default 30); start-up may take 4x as long (at "
    "least\n"
    "                       20 s) before a rank gives up with exit status 4\n"
    "\n"
    "RESNET-50 OPTIONS\n"
    "      --theta SIZE     fusion bucket size; repeat or comma-list to sweep\n"
    "                       (default 4M); auto: as torus-train --bucket-kb\n"
    "                       auto chooses it at seal (the cost model's\n"
    "                       proposal, then a timed trial; the choice and why\n"
    "                       on a '# theta auto:' line)\n"
    "      --steps N        timed steps per row (default 5)\n"
    "      --grads WHERE    where the fused rows keep the gradients: 'private' "
    "(each\n"
    "                       rank's own memory: rows 'fused'), 'shared' (memory "
    "the\n"
    "                       node's ranks share, tcomm_shared_alloc, so that "
    "rows and\n"
    "                       groups on a node reduce in place: rows "
    "'fused-shm'), or\n"
    "                       'both' (the default)\n"
    "  -a and -d as above (defaults: all algorithms, fp16)\n"
    "\n"
    "MODEL OPTIONS\n"
    "  -P N                 ranks (default 4096)\n"
    "      --ranks-per-node Q  (default 8)\n"
    "      --grid RxC       torus grid (default nodes x Q: rows inside nodes)\n"
    "      --group-size N   hier group (default Q)\n"
    "      --rails K        inter-node links per node (default 1)\n"
    "      --preset NAME    'local' (this machine, the default) or 'abci' "
    "(Sony's\n"
    "                       V100 cluster: 4 GPUs/node, NVLink, 2x InfiniBand "
    "EDR)\n"
    "      --intra-us A, --intra-gbs B, --inter-us A, --inter-gbs B, "
    "--reduce-gbs B\n"
    "                       override link latency (us) and bandwidth (GB/s)\n"
    "      --scaling        add the ResNet-50 fp16 sync at growing P with "
    "scaling\n"
    "                       efficiency, for comparison with published results\n"
    "      --compute-ms T   compute time per step for the efficiency (default "
    "95:\n"
    "                       a V100 at batch 32 in mixed precision)\n"
    "  -b, -e, -f, -d as in the sweep\n"
    "\n"
    "OTHER OPTIONS\n"
    "      --help           print this help and exit\n"
    "      --version        print the version and exit\n"
    "\n"
    "ENVIRONMENT\n"
    "  TORUS_DIMS, TORUS_COORD, TORUS_GROUP, TORUS_NGROUPS, TORUS_VERSION "
    "(from the\n"
    "  torus SPANK plugin) set the grid and groups; --grid/--group-size "
    "override.\n"
    "  TCOMM_TIMEOUT sets the lost-peer timeout (--timeout wins);\n"
    "  TCOMM_SIMD=scalar|f16c|avx512 forces a conversion kernel.\n"
    "\n"
    "EXAMPLES\n"
    "  mpirun -np 4 torus-bench -b 1M -e 64M -a ring,torus2d --grid 2x2\n"
    "  srun --mpi=pmix -N4 -n8 torus-bench -a all -d fp32,fp16\n"
    "  mpirun -np 4 torus-bench --resnet50 --theta 1M,4M,25M\n"
    "  torus-bench --model -P 4096 --ranks-per-node 4 --preset abci --scaling\n"
    "\n"
    "EXIT STATUS\n"
    "  0 on success, 1 if any result was wrong or a rank failed, 2 on bad "
    "usage.\n";

size_t bench_parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    switch (*end) {
    case 'K':
    case 'k':
        v <<= 10;
        end++;
        break;
    case 'M':
    case 'm':
        v <<= 20;
        end++;
        break;
    case 'G':
    case 'g':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'B')
        end++;
    return *end ? 0 : (size_t)v;
}

static int _usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "torus-bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see --help)\n");
    return TORUS_CLI_USAGE;
}

/* A usage error that a common/torus_cli.h helper recorded. */
static int _cli_error(int rc)
{
    fprintf(stderr, "torus-bench: %s\n", torus_error_msg());
    return rc;
}

/* An integer option in [lo, hi]; else the usage line naming it. */
static int _int(const char *opt, const char *arg, long lo, long hi, int *v)
{
    long x;
    if (torus_cli_long(opt, arg, lo, hi, &x))
        return _cli_error(TORUS_CLI_USAGE);
    *v = (int)x;
    return 0;
}

static int _list(const char *arg, int *out, int max, int (*parse)(const char *),
                 int all)
{
    char buf[256], *save = NULL;
    int n = 0;
    snprintf(buf, sizeof buf, "%s", arg);
    if (strcmp(arg, "all") == 0) {
        for (int i = 0; i < all; i++)
            out[n++] = i;
        return n;
    }
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        int v = parse(t);
        if (v < 0 || n == max)
            return -1;
        out[n++] = v;
    }
    return n;
}

static double _num(const char *s, int *ok)
{
    char *end;
    double v = strtod(s, &end);
    *ok = end != s && !*end && v > 0;
    return v;
}

enum {
    O_RESNET = 256,
    O_MODEL,
    O_SUM,
    O_PROBE,
    O_GRID,
    O_GROUP,
    O_TIMEOUT,
    O_THETA,
    O_STEPS,
    O_RPN,
    O_RAILS,
    O_PRESET,
    O_INTRA_US,
    O_INTRA_GBS,
    O_INTER_US,
    O_INTER_GBS,
    O_REDUCE_GBS,
    O_SCALING,
    O_COMPUTE,
    O_GRADS,
    O_JSON,
    O_HELP,
    O_VERSION
};

/* The command line as parsed: the modes' options, and what only main
 * needs to finish them. */
typedef struct {
    bench_opts o;
    int mode; /* 0 sweep, 1 resnet50, 2 model */
    int P, rails, algos_set, wires_set;
    const char *preset;
    double over[5]; /* --intra-us ... --reduce-gbs; 0: not given */
} _cli;

/* Each option group's parser returns 0 when it took ch, 2 after a usage
 * error, -1 when ch is not one of its options. */
static int _sweep_opt(_cli *k, int ch, const char *arg)
{
    bench_opts *o = &k->o;
    int ok = 1;
    switch (ch) {
    case 'b':
        return (o->minbytes = bench_parse_size(arg))
                   ? 0
                   : _usage_error("bad -b '%s'", arg);
    case 'e':
        return (o->maxbytes = bench_parse_size(arg))
                   ? 0
                   : _usage_error("bad -e '%s'", arg);
    case 'f':
        o->factor = _num(arg, &ok);
        return ok ? 0 : _usage_error("bad -f '%s'", arg);
    case 'n':
        return _int("-n", arg, 1, 1000000, &o->iters);
    case 'w':
        return _int("-w", arg, 0, 1000000, &o->warmup);
    case 'c':
        return _int("-c", arg, 0, 1, &o->check);
    case 'a':
        o->nalgos = _list(arg, o->algos, TCOMM_ALGO_COUNT, tcomm_algo_parse,
                          TCOMM_ALGO_COUNT);
        k->algos_set = 1;
        return o->nalgos > 0 ? 0
                             : _usage_error("bad algorithm list '%s' (flat, "
                                            "ring, hier, hier-rs, torus2d, "
                                            "hybrid)",
                                            arg);
    case 'd':
        o->nwires = _list(arg, o->wires, TCOMM_WIRE_COUNT, tcomm_wire_parse,
                          TCOMM_WIRE_COUNT);
        k->wires_set = 1;
        return o->nwires > 0
                   ? 0
                   : _usage_error("bad wire list '%s' (fp32, fp16, bf16)", arg);
    }
    return -1;
}

static int _layout_opt(_cli *k, int ch, const char *arg)
{
    bench_opts *o = &k->o;
    int ok = 1;
    switch (ch) {
    case O_RESNET:
        k->mode = 1;
        return 0;
    case O_MODEL:
        k->mode = 2;
        return 0;
    case O_SUM:
        o->average = 0;
        return 0;
    case O_PROBE:
        o->probe = 1;
        return 0;
    case O_GRID:
        if (tcomm_options_set(&o->topt, "--grid", arg))
            return _usage_error("%s", torus_error_msg());
        o->have_grid = 1;
        return 0;
    case O_GROUP:
        if (tcomm_options_set(&o->topt, "--group-size", arg))
            return _usage_error("%s", torus_error_msg());
        return 0;
    case O_TIMEOUT:
        o->topt.timeout_s = _num(arg, &ok);
        return ok ? 0 : _usage_error("bad --timeout '%s'", arg);
    case O_JSON:
        o->json = arg;
        return *arg ? 0 : _usage_error("empty --json file name%s", "");
    }
    return -1;
}

static int _theta(bench_opts *o, const char *arg)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        size_t v = strcmp(t, "auto") ? bench_parse_size(t) : TCOMM_FUSION_AUTO;
        if (!v || o->ntheta == 16)
            return _usage_error("bad --theta '%s'", arg);
        o->theta[o->ntheta++] = v;
    }
    return 0;
}

static int _resnet_opt(_cli *k, int ch, const char *arg)
{
    bench_opts *o = &k->o;
    switch (ch) {
    case O_THETA:
        return _theta(o, arg);
    case O_GRADS:
        if (!strcmp(arg, "both"))
            o->grads = BENCH_GRADS_BOTH;
        else if (!strcmp(arg, "private"))
            o->grads = BENCH_GRADS_PRIVATE;
        else if (!strcmp(arg, "shared"))
            o->grads = BENCH_GRADS_SHARED;
        else
            return _usage_error("bad --grads '%s' (private, shared, both)",
                                arg);
        return 0;
    case O_STEPS:
        o->steps = atoi(arg);
        return o->steps >= 1 ? 0 : _usage_error("bad --steps '%s'", arg);
    }
    return -1;
}

static int _model_opt(_cli *k, int ch, const char *arg)
{
    bench_opts *o = &k->o;
    int ok = 1;
    switch (ch) {
    case 'P':
        k->P = atoi(arg);
        return k->P >= 1 ? 0 : _usage_error("bad -P '%s'", arg);
    case O_RPN:
        o->ranks_per_node = atoi(arg);
        return o->ranks_per_node >= 1
                   ? 0
                   : _usage_error("bad --ranks-per-node '%s'", arg);
    case O_RAILS:
        k->rails = atoi(arg);
        return k->rails >= 1 ? 0 : _usage_error("bad --rails '%s'", arg);
    case O_PRESET:
        k->preset = arg;
        if (strcmp(arg, "local") && strcmp(arg, "abci"))
            return _usage_error("unknown --preset '%s' (local, abci)", arg);
        return 0;
    case O_INTRA_US:
    case O_INTRA_GBS:
    case O_INTER_US:
    case O_INTER_GBS:
    case O_REDUCE_GBS: {
        static const char *const name[] = {"--intra-us", "--intra-gbs",
                                           "--inter-us", "--inter-gbs",
                                           "--reduce-gbs"};
        k->over[ch - O_INTRA_US] = _num(arg, &ok);
        if (!ok)
            fprintf(stderr,
                    "torus-bench: bad %s '%s': want a positive number (see "
                    "--help)\n",
                    name[ch - O_INTRA_US], arg);
        return ok ? 0 : TORUS_CLI_USAGE;
    }
    case O_SCALING:
        o->scaling = 1;
        return 0;
    case O_COMPUTE:
        o->compute_ms = _num(arg, &ok);
        return ok ? 0 : _usage_error("bad --compute-ms '%s'", arg);
    }
    return -1;
}

static void _defaults(_cli *k)
{
    memset(k, 0, sizeof *k);
    bench_opts *o = &k->o;
    o->minbytes = 1024;
    o->maxbytes = 64u << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 3;
    o->check = 1;
    o->average = 1;
    o->steps = 5;
    o->compute_ms = 95;
    o->ranks_per_node = 8;
    k->P = 4096;
    k->rails = 1;
    k->preset = "local";
}

/* The long options; their values are the short letters or O_* codes that
 * the _*_opt parsers below take. */
static const struct option _opts[] = {{"minbytes", 1, 0, 'b'},
                                      {"maxbytes", 1, 0, 'e'},
                                      {"stepfactor", 1, 0, 'f'},
                                      {"iters", 1, 0, 'n'},
                                      {"warmup", 1, 0, 'w'},
                                      {"algo", 1, 0, 'a'},
                                      {"wire", 1, 0, 'd'},
                                      {"check", 1, 0, 'c'},
                                      {"resnet50", 0, 0, O_RESNET},
                                      {"model", 0, 0, O_MODEL},
                                      {"sum", 0, 0, O_SUM},
                                      {"probe", 0, 0, O_PROBE},
                                      {"grid", 1, 0, O_GRID},
                                      {"group-size", 1, 0, O_GROUP},
                                      {"timeout", 1, 0, O_TIMEOUT},
                                      {"theta", 1, 0, O_THETA},
                                      {"steps", 1, 0, O_STEPS},
                                      {"ranks-per-node", 1, 0, O_RPN},
                                      {"rails", 1, 0, O_RAILS},
                                      {"preset", 1, 0, O_PRESET},
                                      {"intra-us", 1, 0, O_INTRA_US},
                                      {"intra-gbs", 1, 0, O_INTRA_GBS},
                                      {"inter-us", 1, 0, O_INTER_US},
                                      {"inter-gbs", 1, 0, O_INTER_GBS},
                                      {"reduce-gbs", 1, 0, O_REDUCE_GBS},
                                      {"scaling", 0, 0, O_SCALING},
                                      {"compute-ms", 1, 0, O_COMPUTE},
                                      {"grads", 1, 0, O_GRADS},
                                      {"json", 1, 0, O_JSON},
                                      {"help", 0, 0, O_HELP},
                                      {"version", 0, 0, O_VERSION},
                                      {0, 0, 0, 0}};

/* Parse argv into k. Returns -1 to go on, else the exit status (0 after
 * --help or --version, 2 after a usage error). */
static int _parse(int argc, char **argv, _cli *k)
{
    int ch;
    opterr = 0; /* getopt would name the program by its path */
    while ((ch = getopt_long(argc, argv, ":b:e:f:n:w:a:d:c:P:", _opts, NULL)) !=
           -1) {
        if (ch == '?' || ch == ':')
            return _cli_error(torus_cli_bad_option(ch, argv));
        int rc = _sweep_opt(k, ch, optarg);
        if (rc < 0)
            rc = _layout_opt(k, ch, optarg);
        if (rc < 0)
            rc = _resnet_opt(k, ch, optarg);
        if (rc < 0)
            rc = _model_opt(k, ch, optarg);
        if (rc > 0)
            return rc;
        if (rc == 0)
            continue;
        if (ch == O_HELP) {
            fputs(_help, stdout);
            return 0;
        }
        if (ch == O_VERSION) {
            printf("torus-bench %s\n", PACKAGE_VERSION);
            return 0;
        }
        return _cli_error(torus_cli_bad_option('?', argv));
    }
    if (optind < argc)
        return _usage_error("unexpected argument '%s'", argv[optind]);
    if (k->o.minbytes > k->o.maxbytes)
        return _usage_error("-b is larger than -e%s", "");
    return -1;
}

/* The defaults that depend on the mode: algorithms, wires, theta. */
static void _mode_defaults(_cli *k)
{
    bench_opts *o = &k->o;
    if (!k->algos_set) {
        o->nalgos = _list("all", o->algos, TCOMM_ALGO_COUNT, tcomm_algo_parse,
                          TCOMM_ALGO_COUNT);
        if (k->mode == 1) /* the hybrid of fused buckets is the interesting
                           * one */
            o->nalgos = TCOMM_ALGO_COUNT;
    }
    if (!k->wires_set) {
        o->nwires = 1;
        o->wires[0] = k->mode == 1 ? TCOMM_WIRE_FP16 : TCOMM_WIRE_FP32;
    }
    if (!o->ntheta)
        o->theta[o->ntheta++] = 4u << 20;
}

/* The model's links: the preset's, then each --intra-us ... override. */
static void _model_links(_cli *k)
{
    tcomm_model_params *m = &k->o.model;
    if (!strcmp(k->preset, "abci")) {
        /* Sony's ABCI runs: 4 V100 per node on NVLink, two InfiniBand
         * EDR rails (12.5 GB/s each), NCCL-class per-step latency. */
        m->link[TORUS_LINK_NODE].alpha_s = 8e-6;
        m->link[TORUS_LINK_NODE].bw_Bps = 60e9;
        m->link[TORUS_LINK_LEAF].alpha_s = 12e-6;
        m->link[TORUS_LINK_LEAF].bw_Bps = 11e9;
        m->reduce_Bps = 400e9;
        m->convert_Bps = 400e9;
        if (k->rails == 1)
            k->rails = 2;
    }
    double *fields[5] = {&m->link[TORUS_LINK_NODE].alpha_s,
                         &m->link[TORUS_LINK_NODE].bw_Bps,
                         &m->link[TORUS_LINK_LEAF].alpha_s,
                         &m->link[TORUS_LINK_LEAF].bw_Bps, &m->reduce_Bps};
    for (int i = 0; i < 5; i++)
        if (k->over[i] > 0)
            *fields[i] =
                (i == 0 || i == 2) ? k->over[i] * 1e-6 : k->over[i] * 1e9;
    if (k->over[4] > 0) /* the casts run at the reduction's speed */
        m->convert_Bps = m->reduce_Bps;
    m->rails = k->rails;
}

/* --model: the cluster the options describe, then its predictions. */
static int _run_model(_cli *k)
{
    bench_opts *o = &k->o;
    int q = o->ranks_per_node, P = k->P;
    tcomm_model_defaults(&o->model, P, q);
    _model_links(k);
    if (o->have_grid) {
        if ((long)o->topt.grid_rows * o->topt.grid_cols != P)
            return _usage_error("--grid does not multiply to -P%s", "");
        o->model.rows = o->topt.grid_rows;
        o->model.cols = o->topt.grid_cols;
    } else {
        o->model.cols = q < P ? q : P;
        o->model.rows = P / o->model.cols;
        if (o->model.rows * o->model.cols != P)
            o->model.rows = 1, o->model.cols = P;
    }
    o->model.group_size = o->topt.group_size ? o->topt.group_size : q;
    int rc = bench_model(o);
    if (rc == BENCH_FAILED)
        fprintf(stderr, "torus-bench: %s\n", torus_error_msg());
    return rc == BENCH_OK ? 0 : 1;
}

/* The sweep and --resnet50: they communicate. */
static int _run_comm(_cli *k)
{
    tcomm_t *c;
    if (tcomm_init(&k->o.topt, &c)) {
        fprintf(stderr, "torus-bench: %s\n", torus_error_msg());
        return 1;
    }
    if (k->o.probe && tcomm_probe_links(c)) {
        fprintf(stderr, "torus-bench: probe: %s\n", torus_error_msg());
        tcomm_finalize(c);
        return 1;
    }
    if (k->o.probe) {
        /* What the model/meas column prices with: a model that is off
         * starts with a link probed wrong. */
        char links[256];
        tcomm_info in;
        tcomm_info_get(c, &in);
        tcomm_links_text(c, links, sizeof links);
        if (in.rank == 0)
            printf("# probed links: %s\n", links);
    }
    int rc = k->mode == 1 ? bench_resnet50(c, &k->o) : bench_sweep(c, &k->o);
    if (rc == BENCH_FAILED) {
        /* Reported once, here; the job ends: the other ranks wait in a
         * collective this rank will not join. */
        tcomm_info in;
        tcomm_info_get(c, &in);
        fprintf(stderr, "torus-bench: rank %d: %s\n", in.rank,
                torus_error_msg());
        tcomm_abort(c, 1, "torus-bench failed");
    }
    tcomm_finalize(c);
    return rc == BENCH_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    _cli k;
    torus_report_set("torus-bench", NULL);
    _defaults(&k);
    int rc = _parse(argc, argv, &k);
    if (rc >= 0)
        return rc;
    _mode_defaults(&k);
    return k.mode == 2 ? _run_model(&k) : _run_comm(&k);
}
