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
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/torus_error.h"
#include "common/torus_json.h"
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
 * first), sealed. 0, or BENCH_FAILED (*out then NULL). */
static int _fusion(tcomm_t *c, const _grads *gr, tcomm_algo a, tcomm_wire w,
                   size_t theta, tcomm_fusion_t **out)
{
    tcomm_fusion_t *f = NULL;
    tcomm_fusion_options fo = {
        .bucket_bytes = theta, .algo = a, .wire = w, .flags = TCOMM_AVERAGE};
    int rc = tcomm_fusion_create(c, &fo, &f);
    for (int i = gr->n - 1; !rc && i >= 0; i--)
        rc = tcomm_fusion_add(f, gr->g[i], gr->s[i].count, gr->s[i].name, NULL);
    if (!rc)
        rc = tcomm_fusion_seal(f);
    tcomm_info in;
    tcomm_info_get(c, &in);
    if (!rc && *tcomm_fusion_theta_why(f) && in.rank == 0)
        printf("# theta auto: %s\n", tcomm_fusion_theta_why(f));
    if (rc) {
        tcomm_fusion_destroy(f);
        f = NULL;
    }
    *out = f;
    return rc ? torus_error_prefix(BENCH_FAILED, "fusion") : BENCH_OK;
}

/* One step's synchronisation of every gradient, as mode says. 0, or
 * BENCH_FAILED. */
static int _sync(tcomm_t *c, const _grads *gr, int mode, tcomm_fusion_t *f,
                 tcomm_algo a, tcomm_wire w)
{
    if (mode == FUSED) {
        for (int k = 0; k < gr->n; k++)
            if (tcomm_fusion_ready(f, k))
                return torus_error_prefix(BENCH_FAILED, "fusion");
        tcomm_fusion_stats st;
        if (tcomm_fusion_finish(f, &st))
            return torus_error_prefix(BENCH_FAILED, "fusion");
    } else if (mode == PER_TENSOR) {
        tcomm_result r;
        for (int i = gr->n - 1; i >= 0; i--)
            if (tcomm_allreduce(c, gr->g[i], gr->s[i].count, a, w,
                                TCOMM_AVERAGE, &r))
                return torus_error_prefix(BENCH_FAILED, "all-reduce");
    } else {
        for (int i = gr->n - 1; i >= 0; i--)
            for (size_t j = 0; j < gr->s[i].count; j++)
                gr->g[i][j] *= 0.5f;
        /* Until the last rank is done: with more ranks than cores a
         * rank's own loop time hides the others' turns on the cores,
         * which every synchronising row pays for. */
        if (tcomm_barrier(c))
            return torus_error_prefix(BENCH_FAILED, "barrier");
    }
    return BENCH_OK;
}

/* One row: *mean, the mean step time (slowest rank) over o->steps. 0, or
 * BENCH_FAILED. */
static int _row(tcomm_t *c, const bench_opts *o, const tcomm_info *in,
                const _grads *gr, int mode, tcomm_algo a, tcomm_wire w,
                size_t theta, size_t *buckets, double *wrong, double *mean)
{
    tcomm_fusion_t *f = NULL;
    double total = 0;
    if (mode == FUSED && _fusion(c, gr, a, w, theta, &f))
        return BENCH_FAILED;
    *buckets = mode == FUSED ? tcomm_fusion_bucket_count(f) : (size_t)gr->n;
    for (int step = -1; step < o->steps; step++) { /* step -1 warms up */
        _fill(gr, in->rank);
        if (tcomm_barrier(c)) {
            tcomm_fusion_destroy(f);
            return torus_error_prefix(BENCH_FAILED, "barrier");
        }
        double t0 = tcomm_wtime();
        if (_sync(c, gr, mode, f, a, w)) {
            tcomm_fusion_destroy(f);
            return BENCH_FAILED;
        }
        double t = tcomm_wtime() - t0;
        if (tcomm_max_double(c, &t)) {
            tcomm_fusion_destroy(f);
            return torus_error_prefix(BENCH_FAILED, "step time");
        }
        if (step >= 0)
            total += t;
    }
    *wrong = 0; /* the reference reduces nothing: nothing to check */
    if (mode != RW_REF) {
        *wrong = _wrong(gr, in->size, w);
        if (tcomm_sum_double(c, wrong, 1)) {
            tcomm_fusion_destroy(f);
            return torus_error_prefix(BENCH_FAILED, "wrong values");
        }
    }
    tcomm_fusion_destroy(f);
    *mean = total / o->steps;
    return BENCH_OK;
}

static void _theta_str(size_t t, char *buf, size_t len)
{
    if (t == TCOMM_FUSION_AUTO)
        snprintf(buf, len, "auto");
    else if (t % (1u << 20) == 0)
        snprintf(buf, len, "%zuM", t >> 20);
    else if (t % 1024 == 0)
        snprintf(buf, len, "%zuK", t >> 10);
    else
        snprintf(buf, len, "%zu", t);
}

/* The gradients in tcomm_shared_alloc memory, one after another (64-byte
 * aligned), as a trainer that shares its gradient arena lays them out.
 * 0, or tcomm_shared_alloc's code. */
static int _shared_grads(tcomm_t *c, const _grads *gr)
{
    size_t bytes = 0;
    for (int i = 0; i < gr->n; i++)
        bytes += (gr->s[i].count * 4 + 63) / 64 * 64;
    void *base;
    int rc = tcomm_shared_alloc(c, bytes, &base);
    if (rc)
        return rc;
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
    char grid[32];
    json_object *o = json_object_new_object();
    snprintf(grid, sizeof grid, "%dx%d", tb->in->rows, tb->in->cols);
    torus_json_int64(o, "ranks", tb->in->size);
    torus_json_int64(o, "nodes", tb->in->nnodes);
    torus_json_string(o, "grid", grid);
    torus_json_string(o, "mode", mode);
    torus_json_string(o, "algo", algo);
    torus_json_string(o, "wire", tcomm_wire_name(w));
    torus_json_string(o, "theta", theta);
    torus_json_int64(o, "buckets", (long long)buckets);
    torus_json_fixed(o, "time_ms", t * 1e3, 4);
    torus_json_fixed(o, "vs_naive", tb->naive / t, 4);
    torus_json_fixed(o, "busbw_GBps", busbw, 6);
    torus_json_int64(o, "user_bytes", (long long)(tb->total * 4));
    torus_json_int64(o, "wire_bytes",
                     (long long)(tb->total * tcomm_wire_bytes(w)));
    if (wrong >= 0)
        torus_json_fixed(o, "wrong", wrong, 0);
    (void)torus_json_write_line(tb->json, o); /* fclose reports errors */
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

/* The baseline and reference rows; sets tb->naive, the baseline's time.
 * 0, or BENCH_FAILED. */
static int _baselines(tcomm_t *c, const bench_opts *o, const _grads *gr,
                      _table *tb, double *bad)
{
    size_t nb;
    double wrong, ref;
    if (_row(c, o, tb->in, gr, PER_TENSOR, TCOMM_ALGO_FLAT, TCOMM_WIRE_FP32, 0,
             &nb, &wrong, &tb->naive))
        return BENCH_FAILED;
    *bad += wrong;
    _print_row(tb, "per-tensor", "flat", TCOMM_WIRE_FP32, "-", nb, tb->naive,
               wrong);
    if (_row(c, o, tb->in, gr, RW_REF, TCOMM_ALGO_FLAT, TCOMM_WIRE_FP32, 0, &nb,
             &wrong, &ref))
        return BENCH_FAILED;
    _print_row(tb, "rw-ref", "-", TCOMM_WIRE_FP32, "-", 0, ref, -1);
    if (tb->in->rank == 0)
        printf("#%10s (a reference, not a floor: read + write each gradient "
               "once, all ranks at once)\n",
               "");
    return BENCH_OK;
}

/* The fused rows of one placement of the gradients (shm: shared memory).
 * 0, or BENCH_FAILED. */
static int _fused_rows(tcomm_t *c, const bench_opts *o, const _grads *gr,
                       const _table *tb, int shm, double *bad)
{
    for (int ti = 0; ti < o->ntheta; ti++)
        for (int wi = 0; wi < o->nwires; wi++)
            for (int ai = 0; ai < o->nalgos; ai++) {
                tcomm_algo a = o->algos[ai];
                if (a == TCOMM_ALGO_HIER_RS && !tb->in->groups_uniform)
                    continue;
                size_t nb;
                double wrong, t;
                if (_row(c, o, tb->in, gr, FUSED, a, o->wires[wi], o->theta[ti],
                         &nb, &wrong, &t))
                    return BENCH_FAILED;
                *bad += wrong;
                char th[32];
                _theta_str(o->theta[ti], th, sizeof th);
                _print_row(tb, shm ? "fused-shm" : "fused", tcomm_algo_name(a),
                           o->wires[wi], th, nb, t, wrong);
            }
    return BENCH_OK;
}

/* The table: the baselines, then the fused rows of each placement asked
 * for. BENCH_OK, BENCH_WRONG or BENCH_FAILED. */
static int _table_rows(tcomm_t *c, const bench_opts *o, const _grads *own,
                       const _grads *shared, _table *tb)
{
    double bad = 0;
    if (tb->in->rank == 0 && o->json && !(tb->json = fopen(o->json, "w")))
        return TORUS_FAIL(BENCH_FAILED, "--json: cannot open '%s': %s", o->json,
                          strerror(errno));
    if (tb->in->rank == 0)
        _header(o, tb->in, own->n, tb->total);
    int rc = _baselines(c, o, own, tb, &bad);
    for (int shm = 0; !rc && shm < 2; shm++)
        if (o->grads != (shm ? BENCH_GRADS_PRIVATE : BENCH_GRADS_SHARED))
            rc = _fused_rows(c, o, shm ? shared : own, tb, shm, &bad);
    if (tb->json && fclose(tb->json) && !rc)
        rc = TORUS_FAIL(BENCH_FAILED, "--json: cannot write '%s': %s", o->json,
                        strerror(errno));
    return rc ? rc : bad ? BENCH_WRONG : BENCH_OK;
}

int bench_resnet50(tcomm_t *c, const bench_opts *o)
{
    tcomm_info in;
    tcomm_info_get(c, &in);
    bench_tensor *s;
    int n;
    size_t total;
    if (bench_resnet50_tensors(&s, &n, &total))
        return BENCH_FAILED;
    float **g = calloc((size_t)n, sizeof *g),
          **gs = calloc((size_t)n, sizeof *gs);
    for (int i = 0; g && gs && i < n; i++)
        if (!(g[i] = malloc(s[i].count * 4)))
            break;
    if (!g || !gs || !g[n - 1])
        return TORUS_FAIL(BENCH_FAILED, "no memory for ResNet-50 gradients");
    _grads own = {s, g, n}, shared = {s, gs, n};
    _table tb = {.in = &in, .total = total};
    int rc = o->grads != BENCH_GRADS_PRIVATE && _shared_grads(c, &shared)
                 ? torus_error_prefix(BENCH_FAILED, "shared gradients")
                 : _table_rows(c, o, &own, &shared, &tb);
    for (int i = 0; i < n; i++)
        free(g[i]);
    free(g);
    free(gs);
    free(s);
    tcomm_shared_free(c);
    return rc;
}
