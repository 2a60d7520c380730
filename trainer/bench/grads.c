/* trainer/bench/grads.c: the gradient tensors torus-bench synchronises,
 * taken from the network torus-train trains: ResNet-50 v1.5 built by the
 * models library (trainer/models) into an engine net that is never
 * compiled, so no backend or memory for weights is needed. One source for
 * the shapes: what the bench measures is what the trainer reduces. */
#include <stdio.h>
#include <stdlib.h>

#include "common/torus_error.h"
#include "trainer/bench/bench.h"
#include "trainer/engine/engine.h"
#include "trainer/models/models.h"

/* Copy the net's parameters into a malloc'd list. */
static int _copy(const teng_net *net, bench_tensor **out, int *n, size_t *total)
{
    bench_tensor *t = calloc((size_t)net->np, sizeof *t);
    if (!t)
        return TORUS_FAIL(1, "no memory for %d ResNet-50 tensors", net->np);
    *total = 0;
    for (int i = 0; i < net->np; i++) {
        snprintf(t[i].name, sizeof t[i].name, "%s", net->p[i].name);
        t[i].count = net->p[i].count;
        *total += t[i].count;
    }
    *out = t;
    *n = net->np;
    return 0;
}

int bench_resnet50_tensors(bench_tensor **out, int *n, size_t *total)
{
    teng_net net;
    teng_net_init(&net);
    tmodel_spec spec = tmodel_defaults(TMODEL_RESNET50);
    int rc = tmodel_build(&net, &spec) < 0
                 ? TORUS_FAIL(1,
                              "building ResNet-50 with the models "
                              "library: %s",
                              teng_net_error(&net))
                 : _copy(&net, out, n, total);
    teng_net_free(&net);
    return rc;
}
