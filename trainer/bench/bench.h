/* trainer/bench/bench.h: what the torus-bench modes share: the parsed
 * command line, the size parser and ResNet-50's gradient tensors. Each mode
 * lives in its own file (sweep.c, resnet50.c, model.c); torus_bench.c
 * parses and dispatches. torus-bench is a tool over libtcomm and the models
 * library, not part of either. */
#ifndef TORUS_BENCH_H
#define TORUS_BENCH_H

#include <stddef.h>

#include "trainer/comm/core/model.h"
#include "trainer/comm/tcomm.h"

typedef struct {
    /* sweep */
    size_t minbytes, maxbytes;
    double factor;
    int iters, warmup, check, average, probe;
    int algos[TCOMM_ALGO_COUNT], nalgos;
    const char *json; /* --json FILE: one object per result line */
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

/* What a mode returns: every checked result was right, some were wrong, or
 * it could not go on (torus_error_msg() says why). The modes never print an
 * error nor end the job: main reports BENCH_FAILED once and, where ranks
 * communicate, ends the job (the other ranks wait in a collective). */
enum { BENCH_OK = 0, BENCH_WRONG = 1, BENCH_FAILED = 2 };

/* "64M", "4K", "1G", "1000" -> bytes; 0 on a malformed value. */
size_t bench_parse_size(const char *s);

/* One gradient tensor: its parameter's name and element count. */
typedef struct {
    char name[48];
    size_t count;
} bench_tensor;

/* grads.c: the parameter tensors of ResNet-50 v1.5 as the models library
 * builds it, in forward (registration) order: *out (malloc'd, n entries)
 * and their total count. 0, or BENCH_FAILED with torus_error_msg() set. */
int bench_resnet50_tensors(bench_tensor **out, int *n, size_t *total);

int bench_sweep(tcomm_t *c, const bench_opts *o);
int bench_resnet50(tcomm_t *c, const bench_opts *o);
int bench_model(const bench_opts *o);

#endif
