/*
 * bench_layout.c: how long the plugin's per-step work takes at scale:
 * expand a 4096-node hostlist, parse a 128-leaf topology.conf, and compute
 * the `auto` 4096 x 8 layout, placing every task. Prints the median and the
 * worst of N repetitions (default 21) in milliseconds.
 *
 *   tests/bench/bench_layout [NODES [TASKS_PER_NODE [LEAVES [REPS]]]]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/torus_error.h"
#include "topology/torus_layout.h"

static double _now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int _cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    unsigned nodes = argc > 1 ? (unsigned)atoi(argv[1]) : 4096;
    unsigned tpn = argc > 2 ? (unsigned)atoi(argv[2]) : 8;
    unsigned nleaves = argc > 3 ? (unsigned)atoi(argv[3]) : 128;
    int reps = argc > 4 ? atoi(argv[4]) : 21;
    if (!nodes || !tpn || !nleaves || nodes % nleaves || reps < 1) {
        fprintf(stderr, "usage: bench_layout [NODES [TPN [LEAVES (divides "
                        "NODES) [REPS]]]]\n");
        return 2;
    }
    /* topology.conf text: LEAVES leaves of NODES/LEAVES nodes, one spine. */
    size_t cap = (size_t)nleaves * 80 + 128, used = 0;
    char *conf = malloc(cap);
    unsigned per = nodes / nleaves;
    for (unsigned l = 0; l < nleaves; l++)
        used += (size_t)snprintf(conf + used, cap - used,
                                 "SwitchName=leaf%u Nodes=n[%05u-%05u]\n",
                                 l + 1, l * per + 1, (l + 1) * per);
    used += (size_t)snprintf(conf + used, cap - used,
                             "SwitchName=spine Switches=leaf[1-%u]\n", nleaves);
    char hostlist[64], tasks[64];
    snprintf(hostlist, sizeof hostlist, "n[00001-%05u]", nodes);
    snprintf(tasks, sizeof tasks, "%u(x%u)", tpn, nodes);

    double *ms = malloc((size_t)reps * sizeof *ms);
    unsigned long long checksum = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = _now_ms();
        char **names;
        size_t n;
        torus_layout_topo_t *topo;
        uint32_t *counts = malloc(nodes * sizeof *counts);
        if (torus_layout_names_expand(hostlist, &names, &n) ||
            torus_layout_tasks_parse(tasks, n, counts) ||
            torus_layout_topo_parse(conf, used, "bench.conf", &topo)) {
            fprintf(stderr, "bench_layout: %s\n", torus_error_msg());
            return 1;
        }
        torus_layout_input_t in = {.nnodes = n,
                                   .nodes = (const char *const *)names,
                                   .tasks = counts,
                                   .topo = topo,
                                   .source = TORUS_SOURCE_TREE,
                                   .spec = {.kind = TORUS_SPEC_AUTO}};
        torus_cost_defaults(&in.cost);
        torus_layout_t *l;
        if (torus_layout_compute(&in, &l)) {
            fprintf(stderr, "bench_layout: %s\n", torus_error_msg());
            return 1;
        }
        for (size_t i = 0; i < n; i++)
            for (uint32_t t = 0; t < tpn; t++) {
                torus_layout_task_t pl;
                if (torus_layout_place(l, i, t, &pl)) {
                    fprintf(stderr, "bench_layout: %s\n", torus_error_msg());
                    return 1;
                }
                checksum += pl.row ^ pl.col;
            }
        ms[r] = _now_ms() - t0;
        if (r == 0)
            printf("layout %ux%u, %u groups: %s\n", torus_layout_rows(l),
                   torus_layout_cols(l), torus_layout_group_count(l),
                   torus_layout_reason(l));
        torus_layout_free(l);
        torus_layout_topo_free(topo);
        torus_layout_names_free(names, n);
        free(counts);
    }
    qsort(ms, (size_t)reps, sizeof *ms, _cmp);
    printf("bench_layout: %u nodes x %u tasks, %u leaves: median %.2f ms, max "
           "%.2f ms "
           "(%d reps, checksum %llu)\n",
           nodes, tpn, nleaves, ms[reps / 2], ms[reps - 1], reps, checksum);
    free(ms);
    free(conf);
    return 0;
}
