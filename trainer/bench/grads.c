/* trainer/bench/grads.c: the gradient tensors torus-bench synchronises,
 * taken from the network torus-train trains: ResNet-50 v1.5 built by the
 * models library (trainer/models) into an engine net that is never
 * compiled, so no backend or memory for weights is needed. One source for
 * the shapes: what the bench measures is what the trainer reduces. */
#include <stdio.h>
#include <stdlib.h>

#include "common/torus_error.h"
#include "trainer/bench/bench.h"
#include "trainer/engine/teng.h"
#include "trainer/models/tmodel.h"

/* Copy the net's parameters into a malloc'd list. */
static int _copy(const teng_net *net, bench_tensor **out, int *n, size_t *total)
{
    int np = teng_net_nparams(net);
    bench_tensor *t = calloc((size_t)np, sizeof *t);
    if (!t)
        return TORUS_FAIL(BENCH_FAILED, "no memory for %d ResNet-50 tensors",
                          np);
    *total = 0;
    for (int i = 0; i < np; i++) {
        const teng_param *p = teng_net_param(net, i);
        snprintf(t[i].name, sizeof t[i].name, "%s", p->name);
        t[i].count = p->count;
        *total += t[i].count;
    }
    *out = t;
    *n = np;
    return 0;
}

int bench_resnet50_tensors(bench_tensor **out, int *n, size_t *total)
{
    teng_net *net;
    if (teng_net_create(&net))
        return torus_error_prefix(BENCH_FAILED, "building ResNet-50");
    tmodel_spec spec = tmodel_defaults(TMODEL_RESNET50);
    int rc = tmodel_build(net, &spec) < 0
                 ? torus_error_prefix(BENCH_FAILED,
                                      "building ResNet-50 with the models "
                                      "library")
                 : _copy(net, out, n, total);
    teng_net_destroy(net);
    return rc;
}
