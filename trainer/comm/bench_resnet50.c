/* bench_resnet50.c: torus-bench --resnet50: per-step gradient
 * synchronisation time on the 161 real parameter tensors of ResNet-50 v1.5.
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

#include "trainer/comm/bench.h"
#include "trainer/comm/resnet50_shapes.h"
#include "trainer/comm/tcomm_fusion.h"
#include "trainer/comm/testdata.h"

enum { NT = TCOMM_RESNET50_TENSORS };

static void _fill(float **g, const tcomm_tensor_shape *s, int rank)
{
    for (int i = 0; i < NT; i++)
        tcomm_testdata_fill(g[i], s[i].count, rank, 900 + (uint64_t)i);
}

static double _wrong(float **g, const tcomm_tensor_shape *s, int P,
                     tcomm_wire w)
{
    double bad = 0;
    for (int i = 0; i < NT; i++)
        bad += (double)tcomm_testdata_wrong(
            g[i], s[i].count, P, 900 + (uint64_t)i, 1.0 / P, w, NULL);
    return bad;
}

static void _die(tcomm_t *c, int rank)
{
    fprintf(stderr, "torus-bench: rank %d: %s\n", rank, tcomm_error());
    tcomm_abort(c, 1, "resnet50 benchmark failed");
}

/* How a row synchronises the gradients. FLOOR is no synchronisation: every
 * rank reads its fp32 gradients and writes them back once (a scale), all
 * ranks at the same time, timed until the last one is done (a barrier).
 * Any in-place all-reduce must at least do that, so on a node where the
 * ranks share a few cores and memory channels no fused algorithm can beat
 * this time. */
enum { PER_TENSOR, FUSED, FLOOR };

/* One row: returns the mean step time (slowest rank) over o->steps. */
static double _row(tcomm_t *c, const bench_opts *o, const tcomm_info *in,
                   float **g, const tcomm_tensor_shape *s, int mode,
                   tcomm_algo a, tcomm_wire w, size_t theta, size_t *buckets,
                   double *wrong)
{
    int fused = mode == FUSED;
    tcomm_fusion_t *f = NULL;
    double total = 0;
    if (fused) {
        tcomm_fusion_options fo = {.bucket_bytes = theta,
                                   .algo = a,
                                   .wire = w,
                                   .flags = TCOMM_AVERAGE};
        if (tcomm_fusion_create(c, &fo, &f))
            _die(c, in->rank);
        for (int i = NT - 1; i >= 0; i--) /* backward order: fc first */
            if (tcomm_fusion_add(f, g[i], s[i].count, s[i].name, NULL))
                _die(c, in->rank);
        if (tcomm_fusion_seal(f))
            _die(c, in->rank);
        *buckets = tcomm_fusion_bucket_count(f);
    } else {
        *buckets = NT;
    }
    for (int step = -1; step < o->steps; step++) { /* step -1 warms up */
        _fill(g, s, in->rank);
        tcomm_barrier(c);
        double t0 = tcomm_wtime();
        if (fused) {
            for (int k = 0; k < NT; k++)
                if (tcomm_fusion_ready(f, k))
                    _die(c, in->rank);
            tcomm_fusion_stats st;
            if (tcomm_fusion_finish(f, &st))
                _die(c, in->rank);
        } else if (mode == PER_TENSOR) {
            tcomm_result r;
            for (int i = NT - 1; i >= 0; i--)
                if (tcomm_allreduce(c, g[i], s[i].count, a, w, TCOMM_AVERAGE,
                                    &r))
                    _die(c, in->rank);
        } else {
            for (int i = NT - 1; i >= 0; i--)
                for (size_t j = 0; j < s[i].count; j++)
                    g[i][j] *= 0.5f;
            /* Until the last rank is done: with more ranks than cores a
             * rank's own loop time hides the others' turns on the cores,
             * which every synchronising row pays for. */
            tcomm_barrier(c);
        }
        double t = tcomm_wtime() - t0;
        tcomm_max_double(c, &t);
        if (step >= 0)
            total += t;
    }
    *wrong = 0; /* the floor reduces nothing: nothing to check */
    if (mode != FLOOR) {
        *wrong = _wrong(g, s, in->size, w);
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
static int _shared_grads(tcomm_t *c, const tcomm_tensor_shape *s, float **g)
{
    size_t bytes = 0;
    for (int i = 0; i < NT; i++)
        bytes += (s[i].count * 4 + 63) / 64 * 64;
    void *base;
    if (tcomm_shared_alloc(c, bytes, &base))
        return -1;
    unsigned char *p = base;
    for (int i = 0; i < NT; i++) {
        g[i] = (float *)p;
        p += (s[i].count * 4 + 63) / 64 * 64;
    }
    return 0;
}

int bench_resnet50(tcomm_t *c, const bench_opts *o)
{
    tcomm_info in;
    tcomm_info_get(c, &in);
    tcomm_tensor_shape s[NT];
    size_t total = tcomm_resnet50_shapes(s);
    float *g[NT], *gs[NT];
    for (int i = 0; i < NT; i++)
        if (!(g[i] = malloc(s[i].count * 4))) {
            fprintf(stderr, "torus-bench: no memory for ResNet-50 gradients\n");
            return 1;
        }
    if (o->grads != BENCH_GRADS_PRIVATE && _shared_grads(c, s, gs))
        _die(c, in.rank);
    if (in.rank == 0) {
        printf("# ResNet-50 v1.5 gradients: %d tensors, %zu parameters (%.1f "
               "MB fp32); "
               "%d ranks, grid %dx%d, %d groups, %d nodes\n",
               NT, total, total * 4 / 1e6, in.size, in.rows, in.cols,
               in.ngroups, in.nnodes);
        printf("# mean of %d steps, slowest rank; time = all gradients "
               "synchronised\n",
               o->steps);
        printf("# fused: gradients in each rank's own memory; fused-shm: in "
               "memory the "
               "node's ranks share (tcomm_shared_alloc), reduced in place on a "
               "node\n");
        printf("%-11s %-8s %-5s %6s %8s %10s %9s %7s\n", "mode", "algo", "wire",
               "theta", "buckets", "time(ms)", "vs naive", "#wrong");
    }
    size_t nb;
    double wrong, bad = 0;
    double naive = _row(c, o, &in, g, s, PER_TENSOR, TCOMM_ALGO_FLAT,
                        TCOMM_WIRE_FP32, 0, &nb, &wrong);
    bad += wrong;
    if (in.rank == 0)
        printf("%-11s %-8s %-5s %6s %8zu %10.2f %8.2fx %7.0f\n", "per-tensor",
               "flat", "fp32", "-", nb, naive * 1e3, 1.0, wrong);
    double floor_t = _row(c, o, &in, g, s, FLOOR, TCOMM_ALGO_FLAT,
                          TCOMM_WIRE_FP32, 0, &nb, &wrong);
    if (in.rank == 0)
        printf("%-11s %-8s %-5s %6s %8s %10.2f %8.2fx %7s   (read + write each "
               "gradient "
               "once, all ranks at once)\n",
               "floor", "-", "fp32", "-", "-", floor_t * 1e3, naive / floor_t,
               "-");
    for (int shm = 0; shm < 2; shm++) {
        if (o->grads == (shm ? BENCH_GRADS_PRIVATE : BENCH_GRADS_SHARED))
            continue;
        for (int ti = 0; ti < o->ntheta; ti++)
            for (int wi = 0; wi < o->nwires; wi++)
                for (int ai = 0; ai < o->nalgos; ai++) {
                    tcomm_algo a = o->algos[ai];
                    if (a == TCOMM_ALGO_HIER_RS && !in.groups_uniform)
                        continue;
                    double t = _row(c, o, &in, shm ? gs : g, s, FUSED, a,
                                    o->wires[wi], o->theta[ti], &nb, &wrong);
                    bad += wrong;
                    char th[32];
                    _theta_str(o->theta[ti], th, sizeof th);
                    if (in.rank == 0)
                        printf("%-11s %-8s %-5s %6s %8zu %10.2f %8.2fx %7.0f\n",
                               shm ? "fused-shm" : "fused", tcomm_algo_name(a),
                               tcomm_wire_name(o->wires[wi]), th, nb, t * 1e3,
                               naive / t, wrong);
                }
    }
    for (int i = 0; i < NT; i++)
        free(g[i]);
    tcomm_shared_free(c);
    return bad ? 1 : 0;
}
