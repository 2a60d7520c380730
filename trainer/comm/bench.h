/* bench.h: what the torus-bench modes share: the parsed command line and
 * the size parser. Each mode lives in its own file (bench_sweep.c,
 * bench_resnet50.c, bench_model.c); torus_bench.c parses and dispatches. */
#ifndef TORUS_TCOMM_BENCH_H
#define TORUS_TCOMM_BENCH_H

#include <stddef.h>

#include "trainer/comm/cost_model.h"
#include "trainer/comm/tcomm.h"

typedef struct {
    /* sweep */
    size_t minbytes, maxbytes;
    double factor;
    int iters, warmup, check, average, probe;
    int algos[TCOMM_ALGO_COUNT], nalgos;
    int wires[TCOMM_WIRE_COUNT], nwires;
    tcomm_options topt;
    /* resnet50 */
    size_t theta[16];
    int ntheta;
    int steps;
    int grads; /* BENCH_GRADS_* */
    /* model */
    tcomm_model_params model;
    int ranks_per_node, have_grid;
    double compute_ms;
    int scaling;
} bench_opts;

enum { BENCH_GRADS_BOTH, BENCH_GRADS_PRIVATE, BENCH_GRADS_SHARED };

/* "64M", "4K", "1G", "1000" -> bytes; 0 on a malformed value. */
size_t bench_parse_size(const char *s);

int bench_sweep(tcomm_t *c, const bench_opts *o);
int bench_resnet50(tcomm_t *c, const bench_opts *o);
int bench_model(const bench_opts *o);

#endif
