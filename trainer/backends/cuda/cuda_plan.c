/* cuda_plan.c: the cuda backend's plan report (see tcuda_plan.h). */
#include "trainer/backends/cuda/tcuda_plan.h"

#include <stdlib.h>

#include "common/torus_error.h"
#include "trainer/backends/cuda/cuda_fuse.h"
#include "trainer/engine/graph.h"

const char *tcuda_algo_source_name(tcuda_algo_source s)
{
    return s == TCUDA_ALGO_TUNED    ? "tuned"
           : s == TCUDA_ALGO_CACHED ? "cached"
                                    : "heuristic";
}

/* One BN's line and its share of the totals. */
static void _bn_line(const teng_net *net, int b, int mode, FILE *f,
                     tcuda_plan_totals *tot)
{
    const teng_layer *l = &net->l[b];
    tot->bn++;
    if (tcuda_bn_is_ex(mode)) {
        tot->bn_ex++;
        fprintf(f, "  %-28s bn    Ex spatial-persistent, ops %s%s\n", l->name,
                tcuda_bn_ops_name(mode),
                mode == TCUDA_BN_EX_ADD_ACT ? " (the add and its ReLU in it)"
                                            : "");
        return;
    }
    tot->separate += l->relu != 0;
    fprintf(f, "  %-28s bn    legacy spatial%s\n", l->name,
            l->relu ? ", ReLU as separate passes (activation forward, mask "
                      "backward)"
                    : "");
}

static void _print(const teng_net *net, const tcuda_plan_in *in,
                   const tcuda_switches *sw, const int *bn_of,
                   const unsigned char *mode, FILE *f, tcuda_plan_totals *tot)
{
    const char *algo = tcuda_algo_source_name(in->conv);
    int cp, stem = tcuda_stem_plan(net, sw, &cp);
    fprintf(f,
            "cuda plan      %s, training; TCUDA_BN_EX=%d TCUDA_FUSE=%d "
            "TCUDA_PAD_STEM=%d\n",
            in->half_nhwc ? "cuda-fp16 (NHWC fp16)" : "cuda (NCHW fp32)",
            sw->bn_ex, sw->fuse, sw->pad_stem);
    for (int i = 0; i < net->nl; i++) {
        const teng_layer *l = &net->l[i];
        if (l->kind == TENG_L_BN)
            _bn_line(net, i, mode[i], f, tot);
        else if (l->kind == TENG_L_CONV) {
            tot->conv++;
            fprintf(f, "  %-28s conv  algorithms %s", l->name, algo);
            if (i == stem)
                fprintf(f, "; input padded from %d to %d channels (zeros)",
                        net->t[net->input].shape.c, cp);
            fputc('\n', f);
        } else if (l->kind == TENG_L_ADD && bn_of[i] >= 0)
            fprintf(f, "  %-28s add   runs in %s's Ex call\n", l->name,
                    net->l[bn_of[i]].name);
    }
    tot->stem_cp = stem >= 0 ? cp : 0;
    fprintf(f,
            "cuda plan      BN fused %d/%d, separate activation passes %d; "
            "conv algorithms %s %d/%d; stem input channels %d\n",
            tot->bn_ex, tot->bn, tot->separate, algo, tot->conv, tot->conv,
            cp);
}

int tcuda_plan_report(const teng_net *net, const tcuda_plan_in *in, FILE *f,
                      tcuda_plan_totals *tot)
{
    tcuda_switches sw;
    size_t n = (size_t)(net->nl > 0 ? net->nl : 1);
    int *bn_of = malloc(sizeof(int) * n);
    unsigned char *deferred = malloc(n), *mode = malloc(n);
    *tot = (tcuda_plan_totals){0};
    if (!bn_of || !deferred || !mode) {
        free(bn_of), free(deferred), free(mode);
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    }
    tcuda_switches_getenv(&sw, in->half_nhwc);
    tcuda_bn_plan(net, &sw, bn_of, deferred, mode);
    _print(net, in, &sw, bn_of, mode, f, tot);
    free(bn_of);
    free(deferred);
    free(mode);
    return TENG_OK;
}
