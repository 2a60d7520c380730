/* trainer/bench/sweep.c: torus-bench's nccl-tests-style size sweep. For each
 * size from -b to -e (times -f), algorithm and wire it prints the mean time per
 * all-reduce (the slowest rank's), algbw = bytes / time, busbw = algbw *
 * 2(P-1)/P (nccl-tests' definition: comparable across P), and #wrong: the
 * elements, summed over ranks, that differ from the double-precision
 * reference by more than the wire's error bound. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainer/bench/bench.h"
#include "trainer/bench/testdata.h"

static void _header(const bench_opts *o, const tcomm_info *in)
{
    printf("# torus-bench sweep: %d ranks, grid %dx%d, %d groups of %d%s, "
           "%d nodes, layout %s\n",
           in->size, in->rows, in->cols, in->ngroups, in->group_size,
           in->groups_uniform ? "" : " (unequal)", in->nnodes, in->source);
    printf("# iters %d, warmup %d, %s, data bytes are fp32 (the wire may "
           "be narrower)\n",
           o->iters, o->warmup,
           o->average ? "average (pre-scaled by 1/P)" : "sum");
    printf("#%11s %11s %5s %8s %11s %11s %11s %8s%s\n", "size(B)", "count",
           "wire", "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong",
           o->probe ? "   model(us) model/meas" : "");
}

/* One line's numbers, on rank 0: the slowest rank's time t per call. */
static void _print(tcomm_t *c, const bench_opts *o, const tcomm_info *in,
                   size_t count, tcomm_algo a, tcomm_wire w, double t,
                   double wrong, const tcomm_result *r)
{
    double algbw = (double)count * 4 / t / 1e9;
    double busbw = algbw * 2.0 * (in->size - 1) / (in->size > 1 ? in->size : 1);
    printf(" %11zu %11zu %5s %8s %11.1f %11.3f %11.3f %8.0f", count * 4, count,
           tcomm_wire_name(w),
           a == TCOMM_ALGO_HYBRID ? "hybrid" : tcomm_algo_name(a), t * 1e6,
           algbw, busbw, wrong);
    double pt = tcomm_predict(c, a, count, w);
    if (o->probe && pt >= 0)
        printf(" %11.1f %10.2f", pt * 1e6, pt / t);
    printf("\n");
    if (a == TCOMM_ALGO_HYBRID)
        printf("#%11s hybrid ran %s\n", "", tcomm_algo_name(r->algo_used));
}

/* One line of the sweep: a checked call, then the timed ones. Returns 1
 * when the checked result was wrong. */
static int _line(tcomm_t *c, const bench_opts *o, const tcomm_info *in,
                 float *x, size_t count, tcomm_algo a, tcomm_wire w)
{
    unsigned flags = o->average ? TCOMM_AVERAGE : 0;
    tcomm_result r;
    bench_testdata_fill(x, count, in->rank, 5 + count);
    tcomm_rc rc = tcomm_allreduce(c, x, count, a, w, flags, &r);
    if (rc == TCOMM_ERR_UNSUPPORTED) {
        if (in->rank == 0)
            printf(" %11zu %11zu %5s %8s %11s %11s %11s %8s\n", count * 4,
                   count, tcomm_wire_name(w), tcomm_algo_name(a), "n/a", "", "",
                   "");
        return 0;
    }
    if (rc)
        bench_die(c, in->rank, "all-reduce failed");
    double wrong = 0;
    if (o->check)
        wrong = (double)bench_testdata_wrong(x, count, in->size, 5 + count,
                                             o->average ? 1.0 / in->size : 1.0,
                                             w, NULL);
    for (int i = 0; i < o->warmup; i++)
        tcomm_allreduce(c, x, count, a, w, TCOMM_AVERAGE, &r);
    tcomm_barrier(c);
    double t0 = tcomm_wtime();
    for (int i = 0; i < o->iters; i++)
        if (tcomm_allreduce(c, x, count, a, w, TCOMM_AVERAGE, &r))
            bench_die(c, in->rank, "all-reduce failed");
    double t = (tcomm_wtime() - t0) / o->iters;
    tcomm_max_double(c, &t);
    tcomm_sum_double(c, &wrong, 1);
    if (in->rank == 0)
        _print(c, o, in, count, a, w, t, wrong, &r);
    return wrong != 0;
}

int bench_sweep(tcomm_t *c, const bench_opts *o)
{
    tcomm_info in;
    tcomm_info_get(c, &in);
    size_t maxcount = o->maxbytes / 4 + 1;
    float *x = malloc(maxcount * 4);
    if (!x) {
        fprintf(stderr, "torus-bench: no memory for %zu bytes\n", o->maxbytes);
        return 1;
    }
    memset(x, 0, maxcount * 4); /* touch once: first touch is slow here */
    if (in.rank == 0)
        _header(o, &in);
    int bad = 0;
    for (double sz = (double)o->minbytes; sz <= (double)o->maxbytes;
         sz *= o->factor) {
        size_t count = (size_t)sz / 4;
        for (int wi = 0; wi < o->nwires; wi++)
            for (int ai = 0; ai < o->nalgos; ai++)
                bad += _line(c, o, &in, x, count, o->algos[ai], o->wires[wi]);
        if (o->factor <= 1.0)
            break;
    }
    if (in.rank == 0)
        printf("# %s\n",
               bad ? "some results were WRONG" : "all results correct");
    free(x);
    return bad ? 1 : 0;
}
