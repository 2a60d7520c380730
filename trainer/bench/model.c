/* trainer/bench/model.c: torus-bench --model: what the alpha-beta model
 * predicts for a cluster we do not have, up to thousands of ranks, with no
 * communication at all. It prints the predicted all-reduce time of every
 * algorithm per size, and with --scaling the ResNet-50 fp16 gradient sync
 * at growing P with the scaling efficiency compute / (compute + sync), the
 * number to hold against Sony's published 2D-torus results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/torus_error.h"
#include "trainer/bench/bench.h"

static const tcomm_algo _algos[] = {TCOMM_ALGO_FLAT, TCOMM_ALGO_RING,
                                    TCOMM_ALGO_HIER, TCOMM_ALGO_HIER_RS,
                                    TCOMM_ALGO_TORUS2D};
enum { NA = sizeof _algos / sizeof _algos[0] };

static void _params(const tcomm_model_params *m)
{
    printf(
        "# model: P=%d, %d ranks/node, grid %dx%d, group %d, %d rail(s)/node\n",
        m->P, m->ranks_per_node, m->rows, m->cols, m->group_size, m->rails);
    printf("# intra-node: alpha %.2f us, %.2f GB/s; inter-node: alpha %.2f us, "
           "%.2f GB/s "
           "per rail; reduce %.1f GB/s\n",
           m->link[TORUS_LINK_NODE].alpha_s * 1e6,
           m->link[TORUS_LINK_NODE].bw_Bps / 1e9,
           m->link[TORUS_LINK_LEAF].alpha_s * 1e6,
           m->link[TORUS_LINK_LEAF].bw_Bps / 1e9, m->reduce_Bps / 1e9);
}

/* The predicted time of every algorithm, in ms ("n/a": cannot run). */
static void _times(const tcomm_model_params *m, size_t count, tcomm_wire w)
{
    for (int i = 0; i < NA; i++) {
        double t = tcomm_model_time(m, _algos[i], count, w);
        if (t < 0)
            printf(" %10s", "n/a");
        else
            printf(" %10.3f", t * 1e3);
    }
}

static void _print_row(const tcomm_model_params *m, size_t count, tcomm_wire w)
{
    printf(" %11zu %5s", count * tcomm_wire_bytes(w), tcomm_wire_name(w));
    _times(m, count, w);
    printf(" %8s %10.3f\n", tcomm_algo_name(tcomm_model_best(m, count, w)),
           tcomm_model_link_limit(m, count, w) * 1e3);
}

static void _header(const char *a, const char *b)
{
    printf("#%11s %5s", a, b);
    for (int i = 0; i < NA; i++)
        printf(" %10s", tcomm_algo_name(_algos[i]));
    printf(" %8s %10s\n", "best", "link-limit");
}

/* --scaling: ResNet-50 gradients, fp16 on the wire, one fused all-reduce
 * per step, at growing P. */
static int _scaling(const bench_opts *o, const tcomm_model_params *mp)
{
    tcomm_model_params m = *mp;
    bench_tensor *s;
    int ns;
    size_t count;
    if (bench_resnet50_tensors(&s, &ns, &count))
        return BENCH_FAILED;
    free(s); /* only the total matters here */
    printf(
        "\n# ResNet-50 v1.5 fp16 gradient sync (%zu params, %.1f MB on the "
        "wire) vs P;\n"
        "# rows inside nodes (C = ranks/node); efficiency = compute / (compute "
        "+ sync)\n"
        "# with %.1f ms of compute per step and no overlap (a lower bound)\n",
        count, count * 2 / 1e6, o->compute_ms);
    printf("# %6s %12s", "P", "grid");
    for (int i = 0; i < NA; i++)
        printf(" %10s", tcomm_algo_name(_algos[i]));
    printf(" %8s %10s %8s %8s %14s\n", "best", "link-limit", "eff-ring",
           "eff-t2d", "steps ring/t2d");
    int q = m.ranks_per_node;
    int Ps[32], n = 0;
    for (int P = q; P <= m.P && n < 28; P *= 2)
        Ps[n++] = P;
    if (1088 <= m.P && 1088 % q == 0)
        Ps[n++] = 1088;
    if (2176 <= m.P && 2176 % q == 0)
        Ps[n++] = 2176;
    for (int i = 0; i < n; i++) {
        tcomm_model_params p = m;
        p.P = Ps[i];
        p.cols = q;
        p.rows = Ps[i] / q;
        p.group_size = q;
        double tr =
            tcomm_model_time(&p, TCOMM_ALGO_RING, count, TCOMM_WIRE_FP16);
        double tt =
            tcomm_model_time(&p, TCOMM_ALGO_TORUS2D, count, TCOMM_WIRE_FP16);
        double c = o->compute_ms * 1e-3;
        printf(" %6d %6dx%-5d", p.P, p.rows, p.cols);
        _times(&p, count, TCOMM_WIRE_FP16);
        printf(" %8s %10.3f %7.1f%% %7.1f%% %6d/%-6d\n",
               tcomm_algo_name(tcomm_model_best(&p, count, TCOMM_WIRE_FP16)),
               tcomm_model_link_limit(&p, count, TCOMM_WIRE_FP16) * 1e3,
               100 * c / (c + tr), 100 * c / (c + tt), 2 * (p.P - 1),
               2 * (p.rows - 1) + 2 * (p.cols - 1));
    }
    return 0;
}

int bench_model(const bench_opts *o)
{
    tcomm_model_params m = o->model;
    _params(&m);
    printf("# predicted all-reduce time in ms\n");
    _header("bytes", "wire");
    for (double sz = (double)o->minbytes; sz <= (double)o->maxbytes;
         sz *= o->factor) {
        for (int wi = 0; wi < o->nwires; wi++)
            _print_row(&m, (size_t)sz / 4, o->wires[wi]);
        if (o->factor <= 1.0)
            break;
    }
    return o->scaling ? _scaling(o, &m) : 0;
}
