/* cuda_fuse.c: the BN + add + ReLU fusion decision (see cuda_fuse.h). */
#include "trainer/backends/cuda/cuda_fuse.h"

#include "common/torus_error.h"

#include "trainer/engine/backend.h"

#include <stdlib.h>
#include <string.h>

/* Layer a (a residual add) can run BN layer b fused: the rules of
 * cuda_fuse.h, b being the producer of a's first input. */
static int _fusable(const teng_net *net, const teng_layer *a, int *b)
{
    if (a->kind != TENG_L_ADD || !a->relu || a->nin != 2 ||
        a->in[0] == a->in[1])
        return 0;
    const teng_tensor *t = &net->t[a->in[0]];
    const teng_layer *bn = &net->l[t->producer];
    if (bn->kind != TENG_L_BN || bn->relu || t->nconsumers != 1 ||
        t->shape.c % 4 != 0)
        return 0;
    *b = t->producer;
    return 1;
}

int tcuda_fuse_plan(const teng_net *net, int half_nhwc, int *bn_of,
                    unsigned char *deferred)
{
    int n = 0;
    for (int i = 0; i < net->nl; i++) {
        bn_of[i] = -1;
        deferred[i] = 0;
    }
    for (int i = 0; half_nhwc && i < net->nl; i++) {
        int b;
        if (_fusable(net, &net->l[i], &b)) {
            bn_of[i] = b;
            deferred[b] = 1;
            n++;
        }
    }
    return n;
}

unsigned tcuda_fuse_reads(unsigned plain, int deferred)
{
    return deferred ? plain | 4u | 8u : plain;
}

int tcuda_fuse_bwd_ok(const teng_net *net, int b, int a)
{
    const void *bn_out = net->t[net->l[b].out].data;
    const void *add_out = net->t[net->l[a].out].data;
    return net->no_reuse || (bn_out && bn_out == add_out);
}

tcuda_fuse_action tcuda_fuse_status(int ok, int not_supported)
{
    if (ok)
        return TCUDA_FUSE_KEEP;
    return not_supported ? TCUDA_FUSE_UNFUSE : TCUDA_FUSE_FAIL;
}

unsigned tcuda_bwd_reads(const teng_net *net, const unsigned char *deferred,
                         int li)
{
    const teng_layer *l = &net->l[li];
    switch (l->kind) {
    case TENG_L_CONV:
    case TENG_L_FC: /* weight gradients need the input */
        return 1u;
    case TENG_L_XENT: /* and the device step reads the per-row losses */
        return 1u | TENG_READS_WS_LATE;
    case TENG_L_BN: /* input; the output for the fused ReLU's mask or,
                     * fused into its add, the add's output (bit 3) */
        return tcuda_fuse_reads(l->relu ? 5u : 1u, deferred && deferred[li]);
    case TENG_L_RELU:
        return 4u;
    case TENG_L_ADD:
        return l->relu ? 4u : 0u;
    case TENG_L_MAXPOOL:
    case TENG_L_AVGPOOL:
    case TENG_L_GAP: /* cuDNN's pooling backward reads x and y */
        return 5u;
    default:
        return 0u; /* dropout keeps its mask in ws */
    }
}

/* "0" turns a switch off; unset or anything else leaves it on. */
static int _on(const char *name)
{
    const char *v = getenv(name);
    return !(v && !strcmp(v, "0"));
}

void tcuda_switches_getenv(tcuda_switches *sw, int half_nhwc)
{
    sw->half_nhwc = half_nhwc != 0;
    sw->bn_ex = _on("TCUDA_BN_EX");
    sw->fuse = _on("TCUDA_FUSE");
    sw->pad_stem = _on("TCUDA_PAD_STEM");
}

int tcuda_bn_plan(const teng_net *net, const tcuda_switches *sw, int *bn_of,
                  unsigned char *deferred, unsigned char *mode)
{
    int n = 0;
    tcuda_fuse_plan(net, sw->half_nhwc && sw->fuse, bn_of, deferred);
    for (int i = 0; i < net->nl; i++) {
        const teng_layer *l = &net->l[i];
        int ex = sw->half_nhwc && sw->bn_ex &&
                 net->t[l->in[0]].shape.c % 4 == 0;
        if (l->kind != TENG_L_BN)
            mode[i] = TCUDA_BN_NONE;
        else if (deferred[i])
            mode[i] = TCUDA_BN_EX_ADD_ACT;
        else if (!ex)
            mode[i] = TCUDA_BN_LEGACY;
        else
            mode[i] = l->relu ? TCUDA_BN_EX_ACT : TCUDA_BN_EX;
        n += tcuda_bn_is_ex(mode[i]);
    }
    return n;
}

int tcuda_bn_is_ex(int mode)
{
    return mode == TCUDA_BN_EX || mode == TCUDA_BN_EX_ACT ||
           mode == TCUDA_BN_EX_ADD_ACT;
}

const char *tcuda_bn_ops_name(int mode)
{
    switch (mode) {
    case TCUDA_BN_EX:
        return "BN";
    case TCUDA_BN_EX_ACT:
        return "BN_ACTIVATION";
    case TCUDA_BN_EX_ADD_ACT:
        return "BN_ADD_ACTIVATION";
    case TCUDA_BN_LEGACY:
        return "legacy";
    default:
        return "-";
    }
}

int tcuda_stem_plan(const teng_net *net, const tcuda_switches *sw, int *cp)
{
    int c = net->t[net->input].shape.c, stem = -1, readers = 0;
    *cp = c;
    if (!sw->half_nhwc || !sw->pad_stem || net->input_grad || c % 4 == 0)
        return -1;
    for (int i = 0; i < net->nl; i++) {
        const teng_layer *l = &net->l[i];
        for (int j = 0; j < l->nin; j++)
            if (l->in[j] == net->input) {
                readers++;
                stem = l->kind == TENG_L_CONV && j == 0 ? i : -1;
            }
    }
    if (readers != 1 || stem < 0)
        return -1;
    *cp = (c + 3) / 4 * 4;
    return stem;
}

int tcuda_bn_state_open(tcuda_bn_state *s, const teng_net *net,
                        const tcuda_switches *sw)
{
    size_t n = (size_t)(net->nl > 0 ? net->nl : 1);
    *s = (tcuda_bn_state){0};
    s->fuse_bn = malloc(sizeof(int) * n);
    s->add_of = malloc(sizeof(int) * n);
    s->deferred = malloc(n);
    s->bwd_ex = malloc(n);
    s->plan = malloc(n);
    s->mode = malloc(n);
    if (!s->fuse_bn || !s->add_of || !s->deferred || !s->bwd_ex ||
        !s->plan || !s->mode)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    s->nex = tcuda_bn_plan(net, sw, s->fuse_bn, s->deferred, s->plan);
    for (int i = 0; i < net->nl; i++) {
        s->mode[i] = s->plan[i];
        s->bwd_ex[i] = (unsigned char)tcuda_bn_is_ex(s->plan[i]);
        s->add_of[i] = -1;
    }
    for (int i = 0; i < net->nl; i++)
        if (s->fuse_bn[i] >= 0) {
            s->add_of[s->fuse_bn[i]] = i;
            s->nfused++;
        }
    return TENG_OK;
}

void tcuda_bn_state_close(tcuda_bn_state *s)
{
    free(s->fuse_bn);
    free(s->add_of);
    free(s->deferred);
    free(s->bwd_ex);
    free(s->plan);
    free(s->mode);
    *s = (tcuda_bn_state){0};
}

void tcuda_bn_decline(tcuda_bn_state *s, int b, int forward)
{
    s->bwd_ex[b] = 0;
    if (!forward)
        return;
    if (s->deferred[b]) {
        s->fuse_bn[s->add_of[b]] = -1;
        s->deferred[b] = 0;
        s->nfused--;
    }
    s->mode[b] = TCUDA_BN_LEGACY;
}

tcuda_bn_call tcuda_bn_fwd_call(const tcuda_bn_state *s, int li, int training)
{
    if (!training || !s->nex)
        return TCUDA_CALL_PLAIN;
    if (s->deferred[li])
        return TCUDA_CALL_DEFERRED;
    if (s->fuse_bn[li] >= 0)
        return TCUDA_CALL_ADD_FUSED;
    return tcuda_bn_is_ex(s->mode[li]) ? TCUDA_CALL_EX : TCUDA_CALL_PLAIN;
}

int tcuda_bn_fallback(const tcuda_bn_state *s, int b, int training)
{
    return training && s->plan && tcuda_bn_is_ex(s->plan[b]);
}
