/* trainer/bench/resnet50.c: torus-bench --resnet50: per-step gradient
 * synchronisation time on the 161 real parameter tensors of ResNet-50 v1.5,
 * as the models library builds it (grads.c).
 * The naive baseline all-reduces each tensor on its own in fp32 with MPI's
 * all-reduce (what a framework without fusion does); the contenders fuse
 * into theta-byte buckets on the communication thread, fp16 on the wire,
 * with each algorithm, once with the gradients in each rank's own memory
 * and once in memory the node's ranks share (reduced in place there). Gradients
 * are handed over in backward order with no compute in between, so the time is
 * pure synchronisation. The last step of each row is checked against the double
 * reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/torus_error.h"
#include "trainer/bench/bench.h"
#include "trainer/bench/testdata.h"
#include "trainer/comm/tcomm_fusion.h"

/* One set of gradients: n tensors, g[i] holding s[i].count floats. */
typedef struct {
    const bench_tensor *s;
    float **g;
    int n;
} _grads;

static void _fill(const _grads *gr, int rank)
{
    for (int i = 0; i < gr->n; i++)
        bench_testdata_fill(gr->g[i], gr->s[i].count, rank, 900 + (uint64_t)i);
}

static double _wrong(const _grads *gr, int P, tcomm_wire w)
{
    double bad = 0;
    for (int i = 0; i < gr->n; i++)
        bad += (double)bench_testdata_wrong(
            gr->g[i], gr->s[i].count, P, 900 + (uint64_t)i, 1.0 / P, w, NULL);
    return bad;
}

/* How a row synchronises the gradients. RW_REF is no synchronisation: every
 * rank reads its fp32 gradients and writes them back once (a scale), all
 * ranks at the same time, timed until the last one is done (a barrier).
 * It is a reference, not a floor: an in-place all-reduce also touches every
 * gradient, but a measured row can beat it (its own run sees other load
 * and other cache states). */
enum { PER_TENSOR, FUSED, RW_REF };

/* The fusion of a FUSED row: every gradient added in backward order (fc
 * first), sealed. */
static tcomm_fusion_t *_fusion(tcomm_t *c, const tcomm_info *in,
                               const _grads *gr, tcomm_algo a, tcomm_wire w,
                               size_t theta)
{
    tcomm_fusion_t *f = NULL;
    tcomm_fusion_options fo = {
        .bucket_bytes = theta, .algo = a, .wire = w, .flags = TCOMM_AVERAGE};
    if (tcomm_fusion_create(c, &fo, &f))
        bench_die(c, in->rank, "resnet50 benchmark failed");
    for (int i = gr->n - 1; i >= 0; i--)
        if (tcomm_fusion_add(f, gr->g[i], gr->s[i].count, gr->s[i].name, NULL))
            bench_die(c, in->rank, "resnet50 benchmark failed");
    if (tcomm_fusion_seal(f))
        bench_die(c, in->rank, "resnet50 benchmark failed");
    return f;
}

/* One step's synchronisation of every gradient, as mode says. */
static void _sync(tcomm_t *c, const tcomm_info *in, const _grads *gr, int mode,
                  tcomm_fusion_t *f, tcomm_algo a, tcomm_wire w)
{
    if (mode == FUSED) {
        for (int k = 0; k < gr->n; k++)
            if (tcomm_fusion_ready(f, k))
                bench_die(c, in->rank, "resnet50 benchmark failed");
        tcomm_fusion_stats st;
        if (tcomm_fusion_finish(f, &st))
            bench_die(c, in->rank, "resnet50 benchmark failed");
    } else if (mode == PER_TENSOR) {
        tcomm_result r;
        for (int i = gr->n - 1; i >= 0; i--)
            if (tcomm_allreduce(c, gr->g[i], gr->s[i].count, a, w,
                                TCOMM_AVERAGE, &r))
                bench_die(c, in->rank, "resnet50 benchmark failed");
    } else {
        for (int i = gr->n - 1; i >= 0; i--)
            for (size_t j = 0; j < gr->s[i].count; j++)
                gr->g[i][j] *= 0.5f;
        /* Until the last rank is done: with more ranks than cores a
         * rank's own loop time hides the others' turns on the cores,
         * which every synchronising row pays for. */
        tcomm_barrier(c);
    }
}

/* One row: returns the mean step time (slowest rank) over o->steps. */
static double _row(tcomm_t *c, const bench_opts *o, const tcomm_info *in,
                   const _grads *gr, int mode, tcomm_algo a, tcomm_wire w,
                   size_t theta, size_t *buckets, double *wrong)
{
    tcomm_fusion_t *f = NULL;
    double total = 0;
    if (mode == FUSED) {
        f = _fusion(c, in, gr, a, w, theta);
        *buckets = tcomm_fusion_bucket_count(f);
    } else {
        *buckets = (size_t)gr->n;
    }
    for (int step = -1; step < o->steps; step++) { /* step -1 warms up */
        _fill(gr, in->rank);
        tcomm_barrier(c);
        double t0 = tcomm_wtime();
        _sync(c, in, gr, mode, f, a, w);
        double t = tcomm_wtime() - t0;
        tcomm_max_double(c, &t);
        if (step >= 0)
            total += t;
    }
    *wrong = 0; /* the reference reduces nothing: nothing to check */
    if (mode != RW_REF) {
        *wrong = _wrong(gr, in->size, w);
        tcomm_sum_double(c, wrong, 1);
    }
    tcomm_fusion_destroy(f);
    return total / o->steps;
}

static void _theta_str(size_t t, char *buf, size_t len)
{
    if (t % (1u << 20) == 0)
        snprintf(buf, len, "%zuM", t >> 20);
    else if (t % 1024 == 0)
        snprintf(buf, len, "%zuK", t >> 10);
    else
        snprintf(buf, len, "%zu", t);
}

/* The gradients in tcomm_shared_alloc memory, one after another (64-byte
 * aligned), as a trainer that shares its gradient arena lays them out. */
static int _shared_grads(tcomm_t *c, const _grads *gr)
{
    size_t bytes = 0;
    for (int i = 0; i < gr->n; i++)
        bytes += (gr->s[i].count * 4 + 63) / 64 * 64;
    void *base;
    if (tcomm_shared_alloc(c, bytes, &base))
        return -1;
    unsigned char *p = base;
    for (int i = 0; i < gr->n; i++) {
        gr->g[i] = (float *)p;
        p += (gr->s[i].count * 4 + 63) / 64 * 64;
    }
    return 0;
}

/* The table's head, on rank 0. */
static void _header(const bench_opts *o, const tcomm_info *in, int n,
                    size_t total)
{
    printf("# ResNet-50 v1.5 gradients: %d tensors, %zu parameters (%.1f "
           "MB fp32); "
           "%d ranks, grid %dx%d, %d groups, %d nodes\n",
           n, total, total * 4 / 1e6, in->size, in->rows, in->cols, in->ngroups,
           in->nnodes);
    printf("# mean of %d steps, slowest rank; time = all gradients "
           "synchronised\n",
           o->steps);
    printf("# fused: gradients in each rank's own memory; fused-shm: in "
           "memory the "
           "node's ranks share (tcomm_shared_alloc), reduced in place on a "
           "node\n");
    printf("# busbw: the user's fp32 bytes x 2(P-1)/P / time (nccl-tests); "
           "wire(MB): the bytes of every gradient at the wire's precision\n");
    printf("%-11s %-8s %-5s %6s %8s %10s %9s %11s %8s %7s\n", "mode", "algo",
           "wire", "theta", "buckets", "time(ms)", "vs naive", "busbw(GB/s)",
           "wire(MB)", "#wrong");
}

/* What every row of the table shares: the layout, the gradients' fp32
 * count, the naive row's time (once measured), --json's file (rank 0). */
typedef struct {
    const tcomm_info *in;
    size_t total;
    double naive;
    FILE *json;
} _table;

/* A row's JSON object (--json): the table's columns, bytes as numbers. */
static void _json_row(const _table *tb, const char *mode, const char *algo,
                      tcomm_wire w, const char *theta, size_t buckets, double t,
                      double busbw, double wrong)
{
    fprintf(tb->json,
            "{\"ranks\":%d,\"nodes\":%d,\"grid\":\"%dx%d\",\"mode\":\"%s\","
            "\"algo\":\"%s\",\"wire\":\"%s\",\"theta\":\"%s\","
            "\"buckets\":%zu,\"time_ms\":%.4f,\"vs_naive\":%.4f,"
            "\"busbw_GBps\":%.6f,\"user_bytes\":%zu,\"wire_bytes\":%zu",
            tb->in->size, tb->in->nnodes, tb->in->rows, tb->in->cols, mode,
            algo, tcomm_wire_name(w), theta, buckets, t * 1e3, tb->naive / t,
            busbw, tb->total * 4, tb->total * tcomm_wire_bytes(w));
    if (wrong >= 0)
        fprintf(tb->json, ",\"wrong\":%.0f", wrong);
    fprintf(tb->json, "}\n");
}

/* A row of the table (rank 0): theta "-" for the unfused rows, buckets 0
 * and wrong < 0 for the row that reduces nothing. */
static void _print_row(const _table *tb, const char *mode, const char *algo,
                       tcomm_wire w, const char *theta, size_t buckets,
                       double t, double wrong)
{
    const tcomm_info *in = tb->in;
    if (in->rank != 0)
        return;
    double busbw = tb->total * 4.0 * 2 * (in->size - 1) /
                   (in->size > 1 ? in->size : 1) / t / 1e9;
    char nb[24] = "-", bad[24] = "-";
    if (buckets)
        snprintf(nb, sizeof nb, "%zu", buckets);
    if (wrong >= 0)
        snprintf(bad, sizeof bad, "%.0f", wrong);
    printf("%-11s %-8s %-5s %6s %8s %10.2f %8.2fx %11.3f %8.1f %7s\n", mode,
           algo, tcomm_wire_name(w), theta, nb, t * 1e3, tb->naive / t, busbw,
           tb->total * tcomm_wire_bytes(w) / 1e6, bad);
    if (tb->json)
        _json_row(tb, mode, algo, w, theta, buckets, t, busbw, wrong);
}

/* The baseline and reference rows; sets tb->naive, the baseline's time. */
static void _baselines(tcomm_t *c, const bench_opts *o, const _grads *gr,
                       _table *tb, double *bad)
{
    size_t nb;
    double wrong;
    tb->naive = _row(c, o, tb->in, gr, PER_TENSOR, TCOMM_ALGO_FLAT,
                     TCOMM_WIRE_FP32, 0, &nb, &wrong);
    *bad += wrong;
    _print_row(tb, "per-tensor", "flat", TCOMM_WIRE_FP32, "-", nb, tb->naive,
               wrong);
    double ref = _row(c, o, tb->in, gr, RW_REF, TCOMM_ALGO_FLAT,
                      TCOMM_WIRE_FP32, 0, &nb, &wrong);
    _print_row(tb, "rw-ref", "-", TCOMM_WIRE_FP32, "-", 0, ref, -1);
    if (tb->in->rank == 0)
        printf("#%10s (a reference, not a floor: read + write each gradient "
               "once, all ranks at once)\n",
               "");
}

/* The fused rows of one placement of the gradients (shm: shared memory). */
static void _fused_rows(tcomm_t *c, const bench_opts *o, const _grads *gr,
                        const _table *tb, int shm, double *bad)
{
    for (int ti = 0; ti < o->ntheta; ti++)
        for (int wi = 0; wi < o->nwires; wi++)
            for (int ai = 0; ai < o->nalgos; ai++) {
                tcomm_algo a = o->algos[ai];
                if (a == TCOMM_ALGO_HIER_RS && !tb->in->groups_uniform)
                    continue;
                size_t nb;
                double wrong;
                double t = _row(c, o, tb->in, gr, FUSED, a, o->wires[wi],
                                o->theta[ti], &nb, &wrong);
                *bad += wrong;
                char th[32];
                _theta_str(o->theta[ti], th, sizeof th);
                _print_row(tb, shm ? "fused-shm" : "fused", tcomm_algo_name(a),
                           o->wires[wi], th, nb, t, wrong);
            }
}

int bench_resnet50(tcomm_t *c, const bench_opts *o)
{
    tcomm_info in;
    tcomm_info_get(c, &in);
    bench_tensor *s;
    int n;
    size_t total;
    if (bench_resnet50_tensors(&s, &n, &total)) {
        fprintf(stderr, "torus-bench: %s\n", torus_error_msg());
        return 1;
    }
    float **g = calloc((size_t)n, sizeof *g),
          **gs = calloc((size_t)n, sizeof *gs);
    for (int i = 0; g && gs && i < n; i++)
        if (!(g[i] = malloc(s[i].count * 4)))
            break;
    if (!g || !gs || !g[n - 1]) {
        fprintf(stderr, "torus-bench: no memory for ResNet-50 gradients\n");
        return 1;
    }
    _grads own = {s, g, n}, shared = {s, gs, n};
    if (o->grads != BENCH_GRADS_PRIVATE && _shared_grads(c, &shared))
        bench_die(c, in.rank, "resnet50 benchmark failed");
    _table tb = {.in = &in, .total = total};
    if (in.rank == 0 && o->json && !(tb.json = fopen(o->json, "w")))
        bench_die(c, in.rank, "cannot open the --json file");
    if (in.rank == 0)
        _header(o, &in, n, total);
    double bad = 0;
    _baselines(c, o, &own, &tb, &bad);
    for (int shm = 0; shm < 2; shm++)
        if (o->grads != (shm ? BENCH_GRADS_PRIVATE : BENCH_GRADS_SHARED))
            _fused_rows(c, o, shm ? &shared : &own, &tb, shm, &bad);
    if (tb.json && fclose(tb.json))
        bench_die(c, in.rank, "cannot write the --json file");
    for (int i = 0; i < n; i++)
        free(g[i]);
    free(g);
    free(gs);
    free(s);
    tcomm_shared_free(c);
    return bad ? 1 : 0;
}
