/* dnnl_layers.c: oneDNN primitives for every engine layer.
 *
 * plan() picks layouts by letting the first consumer of each activation
 * (convolutions, inner products) choose ("any" formats) and making every
 * other layer follow its input's layout; the backward primitives are
 * created with exactly the forward layouts, so gradients share the layout
 * of their tensors and no reorder runs inside a step. All primitives use a
 * user scratchpad: one buffer shared by all, since they run in order on
 * one stream. bind() builds every argument list on the arena pointers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/backends/dnnl/dnnl_internal.h"
#include "trainer/engine/host_kernels.h"
#include "trainer/engine/rng.h"

#define _ALIGN(n) (((n) + 63) & ~(size_t)63)

#define _ERR(bk, msg) ((void)(bk), TORUS_FAIL(TENG_EINVAL, "%s", (msg)))

static void _any_md(dnnl_memory_desc_t *md, int ndims, const int *dims)
{
    dnnl_dims_t d;
    for (int i = 0; i < ndims; i++)
        d[i] = dims[i];
    dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32, dnnl_format_tag_any);
}

/* The weights layout a forward primitive is planned with: oneDNN's choice
 * ("any") at compile; after it, the one the compile chose, kept in
 * net->bkfixed, since the params arena holds the values in that layout and
 * oneDNN picks another for some batches (an inner product of one row). */
static dnnl_memory_desc_t _fwd_weights(const teng_net *net, int param,
                                       const dnnl_memory_desc_t *any)
{
    const dnnl_memory_desc_t *fixed = net->bkfixed;
    return net->compiled && fixed ? fixed[param] : *any;
}

static const dnnl_memory_desc_t *_q(dnnl_primitive_desc_t pd, dnnl_query_t w,
                                    int i)
{
    return dnnl_primitive_desc_query_md(pd, w, i);
}

/* All primitives share one user scratchpad: it must hold the largest. */
static void _count_scratch(teng_net *net, dnnl_primitive_desc_t pd)
{
    size_t s = dnnl_memory_desc_get_size(_q(pd, dnnl_query_scratchpad_md, 0));
    if (s > net->scratch_bytes)
        net->scratch_bytes = s;
}

/* Creates a primitive descriptor with a user scratchpad and counts its
 * scratchpad into the net's requirement. */
static int _pd(teng_backend *bk, teng_net *net, dnnl_primitive_desc_t *pd,
               const void *desc, const dnnl_post_ops_t po,
               const_dnnl_primitive_desc_t hint)
{
    dnnl_primitive_attr_t attr;
    TDNNL_CHECK(bk, dnnl_primitive_attr_create(&attr));
    dnnl_status_t st = dnnl_primitive_attr_set_scratchpad_mode(
        attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success && po)
        st = dnnl_primitive_attr_set_post_ops(attr, po);
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(pd, desc, attr, _tdnnl(bk)->eng, hint);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return _tdnnl_fail(bk, __FILE__, __LINE__, "primitive descriptor", st);
    _count_scratch(net, *pd);
    return TENG_OK;
}

/* Weights of a backward primitive (data: its weights; weights: its diff
 * weights) in a layout other than the param's go through a reorder slot
 * and the net's weights temp buffer; see dnnl_internal.h. */
static int _plan_wreorder(teng_backend *bk, teng_net *net, tdnnl_net *dn,
                          tdnnl_layer *d, int wparam, int slot)
{
    int from_param = slot == TDNNL_WRE;
    const dnnl_memory_desc_t *pm = &dn->pmd[wparam];
    const dnnl_memory_desc_t *km =
        from_param ? _q(d->pd[TDNNL_BWD], dnnl_query_weights_md, 0)
                   : _q(d->pd[TDNNL_BWW], dnnl_query_diff_weights_md, 0);
    if (dnnl_memory_desc_equal(pm, km))
        return TENG_OK;
    dnnl_primitive_attr_t attr;
    TDNNL_CHECK(bk, dnnl_primitive_attr_create(&attr));
    dnnl_status_t st = dnnl_primitive_attr_set_scratchpad_mode(
        attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success)
        st = dnnl_reorder_primitive_desc_create(
            &d->pd[slot], from_param ? pm : km, _tdnnl(bk)->eng,
            from_param ? km : pm, _tdnnl(bk)->eng, attr);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return _tdnnl_fail(bk, __FILE__, __LINE__, "weights reorder", st);
    _count_scratch(net, d->pd[slot]);
    if (dnnl_memory_desc_get_size(km) > dn->wtemp_bytes)
        dn->wtemp_bytes = dnnl_memory_desc_get_size(km);
    return TENG_OK;
}

/* A backward primitive of a layer with weights (slot TDNNL_BWD or
 * TDNNL_BWW, from desc, hinted by the forward one) and the reorder of its
 * weights (TDNNL_WRE or TDNNL_DWRE) when their layout is not the param's. */
static int _plan_grad(teng_backend *bk, teng_net *net, tdnnl_net *dn,
                      tdnnl_layer *d, int wparam, int slot, const void *desc,
                      int reorder)
{
    int rc = _pd(bk, net, &d->pd[slot], desc, NULL, d->pd[TDNNL_FWD]);
    return rc ? rc : _plan_wreorder(bk, net, dn, d, wparam, reorder);
}

/* Right padding that makes oneDNN's output extent equal the engine's. */
static void _geom(const teng_layer *l, const teng_shape *in,
                  const teng_shape *out, dnnl_dims_t st, dnnl_dims_t k,
                  dnnl_dims_t pl, dnnl_dims_t pr)
{
    st[0] = l->sh;
    st[1] = l->sw;
    k[0] = l->kh;
    k[1] = l->kw;
    pl[0] = l->ph;
    pl[1] = l->pw;
    pr[0] = (dnnl_dim_t)(out->h - 1) * l->sh + l->kh - in->h - l->ph;
    pr[1] = (dnnl_dim_t)(out->w - 1) * l->sw + l->kw - in->w - l->pw;
}

static int _plan_conv(teng_backend *bk, teng_net *net, tdnnl_net *dn, int li)
{
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    teng_shape si = net->t[l->in[0]].shape, so = net->t[l->out].shape;
    dnnl_memory_desc_t w, b, dst, *src = &dn->tmd[l->in[0]];
    dnnl_dims_t st, k, pl, pr;
    int wd[4] = {l->k, si.c, l->kh, l->kw}, od[4] = {so.n, so.c, so.h, so.w};
    _geom(l, &si, &so, st, k, pl, pr);
    _any_md(&w, 4, wd);
    _any_md(&dst, 4, od);
    _tdnnl_plain_md(&b, 1, &l->k);
    dnnl_convolution_desc_t cd;
    int rc;
    dnnl_memory_desc_t fw = _fwd_weights(net, l->param0, &w);
    TDNNL_CHECK(bk, dnnl_convolution_forward_desc_init(
                        &cd, dnnl_forward_training, dnnl_convolution_direct,
                        src, &fw, l->bias ? &b : NULL, &dst, st, pl, pr));
    if ((rc = _pd(bk, net, &d->pd[TDNNL_FWD], &cd, NULL, NULL)))
        return rc;
    dn->tmd[l->out] = *_q(d->pd[TDNNL_FWD], dnnl_query_dst_md, 0);
    dn->pmd[l->param0] = *_q(d->pd[TDNNL_FWD], dnnl_query_weights_md, 0);
    if (l->bias)
        dn->pmd[l->param0 + 1] = b;
    dnnl_memory_desc_t *om = &dn->tmd[l->out];
    if (net->t[l->in[0]].needs_grad) {
        TDNNL_CHECK(bk,
                    dnnl_convolution_backward_data_desc_init(
                        &cd, dnnl_convolution_direct, src, &w, om, st, pl, pr));
        if ((rc = _plan_grad(bk, net, dn, d, l->param0, TDNNL_BWD, &cd,
                             TDNNL_WRE)))
            return rc;
    }
    TDNNL_CHECK(bk, dnnl_convolution_backward_weights_desc_init(
                        &cd, dnnl_convolution_direct, src, &w,
                        l->bias ? &b : NULL, om, st, pl, pr));
    return _plan_grad(bk, net, dn, d, l->param0, TDNNL_BWW, &cd, TDNNL_DWRE);
}

static int _plan_fc(teng_backend *bk, teng_net *net, tdnnl_net *dn, int li)
{
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    teng_shape si = net->t[l->in[0]].shape;
    dnnl_memory_desc_t w, b, dst, *src = &dn->tmd[l->in[0]];
    int wd[4] = {l->k, si.c, si.h, si.w}, od[2] = {si.n, l->k};
    _any_md(&w, src->ndims, wd);
    _tdnnl_plain_md(&dst, 2, od);
    _tdnnl_plain_md(&b, 1, &l->k);
    dnnl_inner_product_desc_t ipd;
    int rc;
    dnnl_memory_desc_t fw = _fwd_weights(net, l->param0, &w);
    TDNNL_CHECK(bk, dnnl_inner_product_forward_desc_init(
                        &ipd, dnnl_forward_training, src, &fw,
                        l->bias ? &b : NULL, &dst));
    if ((rc = _pd(bk, net, &d->pd[TDNNL_FWD], &ipd, NULL, NULL)))
        return rc;
    dn->tmd[l->out] = dst;
    dn->pmd[l->param0] = *_q(d->pd[TDNNL_FWD], dnnl_query_weights_md, 0);
    if (l->bias)
        dn->pmd[l->param0 + 1] = b;
    if (net->t[l->in[0]].needs_grad) {
        TDNNL_CHECK(bk, dnnl_inner_product_backward_data_desc_init(&ipd, src,
                                                                   &w, &dst));
        if ((rc = _plan_grad(bk, net, dn, d, l->param0, TDNNL_BWD, &ipd,
                             TDNNL_WRE)))
            return rc;
    }
    TDNNL_CHECK(bk, dnnl_inner_product_backward_weights_desc_init(
                        &ipd, src, &w, l->bias ? &b : NULL, &dst));
    return _plan_grad(bk, net, dn, d, l->param0, TDNNL_BWW, &ipd, TDNNL_DWRE);
}

static int _plan_bn(teng_backend *bk, teng_net *net, tdnnl_net *dn, int li)
{
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    dnnl_memory_desc_t *src = &dn->tmd[l->in[0]];
    int c = net->t[l->in[0]].shape.c, rc;
    unsigned flags =
        dnnl_use_scale | dnnl_use_shift | (l->relu ? dnnl_fuse_norm_relu : 0);
    dnnl_batch_normalization_desc_t bd;
    if (!net->t[l->in[0]].needs_grad)
        return _ERR(bk, "batch norm directly on the data input");
    TDNNL_CHECK(bk, dnnl_batch_normalization_forward_desc_init(
                        &bd, dnnl_forward_training, src, l->eps, flags));
    if ((rc = _pd(bk, net, &d->pd[TDNNL_FWD], &bd, NULL, NULL)))
        return rc;
    TDNNL_CHECK(bk, dnnl_batch_normalization_forward_desc_init(
                        &bd, dnnl_forward_inference, src, l->eps,
                        flags | dnnl_use_global_stats));
    if ((rc = _pd(bk, net, &d->pd[TDNNL_INF], &bd, NULL, NULL)))
        return rc;
    TDNNL_CHECK(bk, dnnl_batch_normalization_backward_desc_init(
                        &bd, dnnl_backward, src, src, l->eps, flags));
    if ((rc = _pd(bk, net, &d->pd[TDNNL_BWD], &bd, NULL, d->pd[TDNNL_FWD])))
        return rc;
    dn->tmd[l->out] = *_q(d->pd[TDNNL_FWD], dnnl_query_dst_md, 0);
    _tdnnl_plain_md(&dn->pmd[l->param0], 1, &c);
    _tdnnl_plain_md(&dn->pmd[l->param0 + 1], 1, &c);
    /* Workspace: batch mean, batch variance, and the fused ReLU's mask. */
    d->ws_off[0] = 0;
    d->ws_off[1] = _ALIGN(sizeof(float) * (size_t)c);
    d->ws_off[2] = 2 * d->ws_off[1];
    l->ws_bytes =
        d->ws_off[2] + _ALIGN(dnnl_memory_desc_get_size(
                           _q(d->pd[TDNNL_FWD], dnnl_query_workspace_md, 0)));
    return TENG_OK;
}

static int _plan_relu(teng_backend *bk, teng_net *net, tdnnl_net *dn, int li)
{
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    dnnl_memory_desc_t *src = &dn->tmd[l->in[0]];
    dnnl_eltwise_desc_t ed;
    int rc;
    /* The use-dst variant lets backward read the output, so the input
     * need not be kept for it. */
    TDNNL_CHECK(bk, dnnl_eltwise_forward_desc_init(
                        &ed, dnnl_forward_training,
                        dnnl_eltwise_relu_use_dst_for_bwd, src, 0.f, 0.f));
    if ((rc = _pd(bk, net, &d->pd[TDNNL_FWD], &ed, NULL, NULL)))
        return rc;
    dn->tmd[l->out] = *_q(d->pd[TDNNL_FWD], dnnl_query_dst_md, 0);
    if (!net->t[l->in[0]].needs_grad)
        return TENG_OK;
    TDNNL_CHECK(bk, dnnl_eltwise_backward_desc_init(
                        &ed, dnnl_eltwise_relu_use_dst_for_bwd,
                        &dn->tmd[l->out], &dn->tmd[l->out], 0.f, 0.f));
    return _pd(bk, net, &d->pd[TDNNL_BWD], &ed, NULL, d->pd[TDNNL_FWD]);
}

static int _plan_pool(teng_backend *bk, teng_net *net, tdnnl_net *dn, int li)
{
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    teng_shape si = net->t[l->in[0]].shape, so = net->t[l->out].shape;
    dnnl_memory_desc_t dst, *src = &dn->tmd[l->in[0]];
    dnnl_alg_kind_t alg = l->kind == TENG_L_MAXPOOL
                              ? dnnl_pooling_max
                              : dnnl_pooling_avg_exclude_padding;
    dnnl_dims_t st, k, pl, pr;
    int od[4] = {so.n, so.c, so.h, so.w}, rc;
    _geom(l, &si, &so, st, k, pl, pr);
    _any_md(&dst, 4, od);
    dnnl_pooling_desc_t pdsc;
    TDNNL_CHECK(bk,
                dnnl_pooling_forward_desc_init(&pdsc, dnnl_forward_training,
                                               alg, src, &dst, st, k, pl, pr));
    if ((rc = _pd(bk, net, &d->pd[TDNNL_FWD], &pdsc, NULL, NULL)))
        return rc;
    dn->tmd[l->out] = *_q(d->pd[TDNNL_FWD], dnnl_query_dst_md, 0);
    l->ws_bytes = _ALIGN(dnnl_memory_desc_get_size(
        _q(d->pd[TDNNL_FWD], dnnl_query_workspace_md, 0)));
    if (!net->t[l->in[0]].needs_grad)
        return TENG_OK;
    TDNNL_CHECK(bk, dnnl_pooling_backward_desc_init(
                        &pdsc, alg, src, &dn->tmd[l->out], st, k, pl, pr));
    return _pd(bk, net, &d->pd[TDNNL_BWD], &pdsc, NULL, d->pd[TDNNL_FWD]);
}

static int _plan_add(teng_backend *bk, teng_net *net, tdnnl_net *dn, int li)
{
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    dnnl_memory_desc_t *a = &dn->tmd[l->in[0]], *b = &dn->tmd[l->in[1]];
    dnnl_binary_desc_t bd;
    dnnl_post_ops_t po = NULL;
    int rc;
    /* The inputs' gradients alias the output's, so all three must share
     * one layout. */
    if (!dnnl_memory_desc_equal(a, b))
        return _ERR(bk, "residual inputs have different memory layouts");
    TDNNL_CHECK(bk, dnnl_binary_desc_init(&bd, dnnl_binary_add, a, b, a));
    if (l->relu) {
        TDNNL_CHECK(bk, dnnl_post_ops_create(&po));
        TDNNL_CHECK(bk, dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu,
                                                     0.f, 0.f));
    }
    rc = _pd(bk, net, &d->pd[TDNNL_FWD], &bd, po, NULL);
    if (po)
        dnnl_post_ops_destroy(po);
    dn->tmd[l->out] = *a;
    if (rc || !l->relu)
        return rc;
    /* ReLU backward needs a forward hint: an eltwise pd never executed. */
    dnnl_eltwise_desc_t ed;
    dnnl_primitive_desc_t hint;
    TDNNL_CHECK(bk, dnnl_eltwise_forward_desc_init(
                        &ed, dnnl_forward_training,
                        dnnl_eltwise_relu_use_dst_for_bwd, a, 0.f, 0.f));
    if ((rc = _pd(bk, net, &hint, &ed, NULL, NULL)))
        return rc;
    TDNNL_CHECK(bk,
                dnnl_eltwise_backward_desc_init(
                    &ed, dnnl_eltwise_relu_use_dst_for_bwd, a, a, 0.f, 0.f));
    rc = _pd(bk, net, &d->pd[TDNNL_BWD], &ed, NULL, hint);
    dnnl_primitive_desc_destroy(hint);
    return rc;
}

static int _plan_layer(teng_backend *bk, teng_net *net, tdnnl_net *dn, int li)
{
    teng_layer *l = &net->l[li];
    l->ws_bytes = 0;
    switch (l->kind) {
    case TENG_L_INPUT: {
        teng_shape s = net->t[l->out].shape;
        int dims[4] = {s.n, s.c, s.h, s.w};
        _tdnnl_plain_md(&dn->tmd[l->out], 4, dims);
        return TENG_OK;
    }
    case TENG_L_CONV:
        return _plan_conv(bk, net, dn, li);
    case TENG_L_FC:
        return _plan_fc(bk, net, dn, li);
    case TENG_L_BN:
        return _plan_bn(bk, net, dn, li);
    case TENG_L_RELU:
        return _plan_relu(bk, net, dn, li);
    case TENG_L_MAXPOOL:
    case TENG_L_AVGPOOL:
    case TENG_L_GAP:
        return _plan_pool(bk, net, dn, li);
    case TENG_L_ADD:
        return _plan_add(bk, net, dn, li);
    case TENG_L_DROPOUT:
        dn->tmd[l->out] = dn->tmd[l->in[0]];
        l->ws_bytes = _ALIGN(dnnl_memory_desc_get_size(&dn->tmd[l->out]) / 4);
        return TENG_OK;
    case TENG_L_XENT: {
        teng_shape s = net->t[l->in[0]].shape;
        int dims[2] = {s.n, s.c};
        dnnl_memory_desc_t plain;
        _tdnnl_plain_md(&plain, 2, dims);
        if (!dnnl_memory_desc_equal(&plain, &dn->tmd[l->in[0]]))
            return _ERR(bk, "cross-entropy logits must come from a fully "
                            "connected layer (plain N x K layout)");
        return TENG_OK;
    }
    default:
        return _ERR(bk, "unknown layer kind");
    }
}

/* At compile: the params' layouts, which every later plan keeps. */
static int _keep_param_layouts(teng_backend *bk, teng_net *net, tdnnl_net *dn)
{
    size_t bytes = sizeof(*dn->pmd) * (size_t)(net->np + 1);
    free(net->bkfixed);
    if (!(net->bkfixed = malloc(bytes)))
        return _ERR(bk, "out of memory");
    memcpy(net->bkfixed, dn->pmd, bytes);
    return TENG_OK;
}

int _tdnnl_plan(teng_backend *bk, teng_net *net, int batch)
{
    (void)batch; /* the shapes already carry it */
    tdnnl_net *dn = calloc(1, sizeof(*dn));
    if (!dn)
        return _ERR(bk, "out of memory");
    dn->tmd = calloc((size_t)net->nt, sizeof(*dn->tmd));
    dn->pmd = calloc((size_t)net->np + 1, sizeof(*dn->pmd));
    dn->l = calloc((size_t)net->nl, sizeof(*dn->l));
    dn->sum = calloc((size_t)net->nt, sizeof(*dn->sum));
    net->bkstate = dn;
    if (!dn->tmd || !dn->pmd || !dn->l || !dn->sum)
        return _ERR(bk, "out of memory");
    net->scratch_bytes = 0;
    for (int i = 0; i < net->nl; i++) {
        int rc = _plan_layer(bk, net, dn, i);
        if (rc)
            return torus_error_prefix(rc, "layer '%s'", net->l[i].name);
    }
    /* The scratch arena holds the shared scratchpad, then the weights
     * temp buffer (they are never in use by the same primitive). */
    dn->wtemp_off = _ALIGN(net->scratch_bytes);
    net->scratch_bytes = dn->wtemp_off + dn->wtemp_bytes;
    for (int i = 0; i < net->nt; i++)
        net->t[i].bytes = dnnl_memory_desc_get_size(&dn->tmd[i]);
    for (int i = 0; i < net->np; i++)
        net->p[i].bytes = dnnl_memory_desc_get_size(&dn->pmd[i]);
    return net->compiled ? TENG_OK : _keep_param_layouts(bk, net, dn);
}

/* ---- binding: memory objects and argument lists on arena pointers ---- */

static int _arg(teng_backend *bk, tdnnl_layer *d, int slot, int arg,
                const dnnl_memory_desc_t *md, void *ptr)
{
    tdnnl_exec *ex = &d->ex[slot];
    dnnl_memory_t m;
    if (!ptr)
        return _ERR(bk, "missing buffer for a primitive argument");
    if (ex->nargs == TDNNL_MAXARGS ||
        d->nmem == (int)(sizeof(d->mem) / sizeof(d->mem[0])))
        return _ERR(bk, "too many primitive arguments");
    TDNNL_CHECK(bk, dnnl_memory_create(&m, md, _tdnnl(bk)->eng, ptr));
    d->mem[d->nmem++] = m;
    ex->args[ex->nargs++] = (dnnl_exec_arg_t){arg, m};
    return TENG_OK;
}

/* Creates the primitive of a planned slot and adds its scratchpad. */
static int _prim(teng_backend *bk, teng_net *net, tdnnl_layer *d, int slot)
{
    const dnnl_memory_desc_t *sp = _q(d->pd[slot], dnnl_query_scratchpad_md, 0);
    TDNNL_CHECK(bk, dnnl_primitive_create(&d->ex[slot].prim, d->pd[slot]));
    if (dnnl_memory_desc_get_size(sp) > net->scratch_cap)
        return _ERR(bk, "scratchpad larger than planned");
    if (dnnl_memory_desc_get_size(sp))
        return _arg(bk, d, slot, DNNL_ARG_SCRATCHPAD, sp, net->scratch);
    return TENG_OK;
}

#define _A(slot, arg, md, ptr)                             \
    do {                                                   \
        int _rc = _arg(bk, d, (slot), (arg), (md), (ptr)); \
        if (_rc)                                           \
            return _rc;                                    \
    } while (0)

/* conv and fc: forward, backward data and weights, and the reorders of
 * weights/weight gradients through the weights temp buffer. */
static int _bind_weighted(teng_backend *bk, teng_net *net, tdnnl_net *dn,
                          int li)
{
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    teng_tensor *x = &net->t[l->in[0]], *y = &net->t[l->out];
    dnnl_memory_desc_t *xm = &dn->tmd[l->in[0]], *ym = &dn->tmd[l->out];
    teng_param *p = &net->p[l->param0];
    dnnl_memory_desc_t *pm = &dn->pmd[l->param0];
    char *wtemp = (char *)net->scratch + dn->wtemp_off;
    _A(TDNNL_FWD, DNNL_ARG_SRC, xm, x->data);
    _A(TDNNL_FWD, DNNL_ARG_WEIGHTS, pm, p->work);
    if (l->bias)
        _A(TDNNL_FWD, DNNL_ARG_BIAS, pm + 1, p[1].work);
    _A(TDNNL_FWD, DNNL_ARG_DST, ym, y->data);
    if (d->pd[TDNNL_BWD]) {
        const dnnl_memory_desc_t *bwm =
            _q(d->pd[TDNNL_BWD], dnnl_query_weights_md, 0);
        void *bw = d->pd[TDNNL_WRE] ? wtemp : (void *)p->work;
        if (d->pd[TDNNL_WRE]) {
            _A(TDNNL_WRE, DNNL_ARG_FROM, pm, p->work);
            _A(TDNNL_WRE, DNNL_ARG_TO, bwm, wtemp);
        }
        _A(TDNNL_BWD, DNNL_ARG_DIFF_DST, ym, y->grad);
        _A(TDNNL_BWD, DNNL_ARG_WEIGHTS, bwm, bw);
        _A(TDNNL_BWD, DNNL_ARG_DIFF_SRC, xm, l->in_grad[0]);
    }
    const dnnl_memory_desc_t *dwm =
        _q(d->pd[TDNNL_BWW], dnnl_query_diff_weights_md, 0);
    void *dw = d->pd[TDNNL_DWRE] ? wtemp : (void *)p->grad;
    _A(TDNNL_BWW, DNNL_ARG_SRC, xm, x->data);
    _A(TDNNL_BWW, DNNL_ARG_DIFF_DST, ym, y->grad);
    _A(TDNNL_BWW, DNNL_ARG_DIFF_WEIGHTS, dwm, dw);
    if (l->bias)
        _A(TDNNL_BWW, DNNL_ARG_DIFF_BIAS, pm + 1, p[1].grad);
    if (d->pd[TDNNL_DWRE]) {
        _A(TDNNL_DWRE, DNNL_ARG_FROM, dwm, wtemp);
        _A(TDNNL_DWRE, DNNL_ARG_TO, pm, p->grad);
    }
    return TENG_OK;
}

/* batch norm: training forward (its batch mean and variance into the
 * layer's workspace), inference forward (the running statistics) and
 * backward, scale and shift as two params. */
static int _bind_bn(teng_backend *bk, teng_net *net, tdnnl_net *dn, int li)
{
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    teng_tensor *x = &net->t[l->in[0]], *y = &net->t[l->out];
    dnnl_memory_desc_t *xm = &dn->tmd[l->in[0]], *ym = &dn->tmd[l->out];
    teng_param *p = &net->p[l->param0];
    char *ws = l->ws;
    dnnl_memory_desc_t cm;
    const dnnl_memory_desc_t *wsm =
        _q(d->pd[TDNNL_FWD], dnnl_query_workspace_md, 0);
    int c = x->shape.c, hasws = dnnl_memory_desc_get_size(wsm) > 0;
    char *stats = net->stats;
    _tdnnl_plain_md(&cm, 1, &c);
    for (int s = TDNNL_FWD; s <= TDNNL_BWD; s++) {
        _A(s, DNNL_ARG_SRC, xm, x->data);
        _A(s, DNNL_ARG_SCALE, &cm, p[0].work);
        _A(s, DNNL_ARG_SHIFT, &cm, p[1].work);
    }
    _A(TDNNL_FWD, DNNL_ARG_DST, ym, y->data);
    _A(TDNNL_FWD, DNNL_ARG_MEAN, &cm, ws + d->ws_off[0]);
    _A(TDNNL_FWD, DNNL_ARG_VARIANCE, &cm, ws + d->ws_off[1]);
    if (hasws)
        _A(TDNNL_FWD, DNNL_ARG_WORKSPACE, wsm, ws + d->ws_off[2]);
    _A(TDNNL_INF, DNNL_ARG_DST, ym, y->data);
    _A(TDNNL_INF, DNNL_ARG_MEAN, &cm, stats + net->stat_off[l->stat0]);
    _A(TDNNL_INF, DNNL_ARG_VARIANCE, &cm, stats + net->stat_off[l->stat0 + 1]);
    _A(TDNNL_BWD, DNNL_ARG_MEAN, &cm, ws + d->ws_off[0]);
    _A(TDNNL_BWD, DNNL_ARG_VARIANCE, &cm, ws + d->ws_off[1]);
    if (hasws)
        _A(TDNNL_BWD, DNNL_ARG_WORKSPACE, wsm, ws + d->ws_off[2]);
    _A(TDNNL_BWD, DNNL_ARG_DIFF_DST, ym, y->grad);
    _A(TDNNL_BWD, DNNL_ARG_DIFF_SRC, xm, l->in_grad[0]);
    _A(TDNNL_BWD, DNNL_ARG_DIFF_SCALE, &cm, p[0].grad);
    _A(TDNNL_BWD, DNNL_ARG_DIFF_SHIFT, &cm, p[1].grad);
    return TENG_OK;
}

/* pooling: the workspace (max pooling's argmax) only where oneDNN asks
 * for one, shared by forward and backward. */
static int _bind_pool(teng_backend *bk, teng_net *net, tdnnl_net *dn, int li)
{
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    teng_tensor *x = &net->t[l->in[0]], *y = &net->t[l->out];
    dnnl_memory_desc_t *xm = &dn->tmd[l->in[0]], *ym = &dn->tmd[l->out];
    const dnnl_memory_desc_t *wsm =
        _q(d->pd[TDNNL_FWD], dnnl_query_workspace_md, 0);
    int hasws = dnnl_memory_desc_get_size(wsm) > 0;
    _A(TDNNL_FWD, DNNL_ARG_SRC, xm, x->data);
    _A(TDNNL_FWD, DNNL_ARG_DST, ym, y->data);
    if (hasws)
        _A(TDNNL_FWD, DNNL_ARG_WORKSPACE, wsm, l->ws);
    if (d->pd[TDNNL_BWD]) {
        _A(TDNNL_BWD, DNNL_ARG_DIFF_DST, ym, y->grad);
        _A(TDNNL_BWD, DNNL_ARG_DIFF_SRC, xm, l->in_grad[0]);
        if (hasws)
            _A(TDNNL_BWD, DNNL_ARG_WORKSPACE, wsm, l->ws);
    }
    return TENG_OK;
}

static int _bind_layer(teng_backend *bk, teng_net *net, tdnnl_net *dn, int li)
{
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    int rc;
    for (int s = 0; s < TDNNL_NSLOT; s++)
        if (d->pd[s] && (rc = _prim(bk, net, d, s)))
            return rc;
    if (l->kind == TENG_L_INPUT || l->kind == TENG_L_DROPOUT ||
        l->kind == TENG_L_XENT)
        return TENG_OK;
    teng_tensor *x = &net->t[l->in[0]], *y = &net->t[l->out];
    dnnl_memory_desc_t *xm = &dn->tmd[l->in[0]], *ym = &dn->tmd[l->out];
    switch (l->kind) {
    case TENG_L_CONV:
    case TENG_L_FC:
        return _bind_weighted(bk, net, dn, li);
    case TENG_L_BN:
        return _bind_bn(bk, net, dn, li);
    case TENG_L_RELU:
        _A(TDNNL_FWD, DNNL_ARG_SRC, xm, x->data);
        _A(TDNNL_FWD, DNNL_ARG_DST, ym, y->data);
        if (d->pd[TDNNL_BWD]) {
            _A(TDNNL_BWD, DNNL_ARG_DST, ym, y->data);
            _A(TDNNL_BWD, DNNL_ARG_DIFF_DST, ym, y->grad);
            _A(TDNNL_BWD, DNNL_ARG_DIFF_SRC, xm, l->in_grad[0]);
        }
        return TENG_OK;
    case TENG_L_MAXPOOL:
    case TENG_L_AVGPOOL:
    case TENG_L_GAP:
        return _bind_pool(bk, net, dn, li);
    case TENG_L_ADD:
        _A(TDNNL_FWD, DNNL_ARG_SRC_0, xm, x->data);
        _A(TDNNL_FWD, DNNL_ARG_SRC_1, &dn->tmd[l->in[1]],
           net->t[l->in[1]].data);
        _A(TDNNL_FWD, DNNL_ARG_DST, ym, y->data);
        if (d->pd[TDNNL_BWD]) {
            /* In place: the output grad becomes the ReLU-masked grad that
             * both inputs share (see compile.c). */
            _A(TDNNL_BWD, DNNL_ARG_DST, ym, y->data);
            _A(TDNNL_BWD, DNNL_ARG_DIFF_DST, ym, y->grad);
            _A(TDNNL_BWD, DNNL_ARG_DIFF_SRC, ym, y->grad);
        }
        return TENG_OK;
    default:
        return _ERR(bk, "unknown layer kind");
    }
}

static int _bind_sum(teng_backend *bk, teng_net *net, tdnnl_net *dn, int id)
{
    teng_tensor *t = &net->t[id];
    tdnnl_layer *d = &dn->sum[id];
    dnnl_memory_desc_t srcs[4];
    float scales[4] = {1.f, 1.f, 1.f, 1.f};
    int rc;
    for (int k = 0; k < t->ncontrib; k++)
        srcs[k] = dn->tmd[id];
    dnnl_primitive_attr_t attr;
    TDNNL_CHECK(bk, dnnl_primitive_attr_create(&attr));
    dnnl_status_t st = dnnl_primitive_attr_set_scratchpad_mode(
        attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success)
        st = dnnl_sum_primitive_desc_create(&d->pd[TDNNL_FWD], &dn->tmd[id],
                                            t->ncontrib, scales, srcs, attr,
                                            _tdnnl(bk)->eng);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return _tdnnl_fail(bk, __FILE__, __LINE__, "gradient sum", st);
    if ((rc = _prim(bk, net, d, TDNNL_FWD)))
        return rc;
    for (int k = 0; k < t->ncontrib; k++)
        _A(TDNNL_FWD, DNNL_ARG_MULTIPLE_SRC + k, &dn->tmd[id], t->contrib[k]);
    _A(TDNNL_FWD, DNNL_ARG_DST, &dn->tmd[id], t->grad);
    return TENG_OK;
}

int _tdnnl_bind(teng_backend *bk, teng_net *net)
{
    tdnnl_net *dn = net->bkstate;
    int rc;
    for (int i = 0; i < net->nl; i++)
        if ((rc = _bind_layer(bk, net, dn, i)))
            return rc;
    for (int i = 0; i < net->nt; i++)
        if (net->t[i].ncontrib > 0 && (rc = _bind_sum(bk, net, dn, i)))
            return rc;
    return TENG_OK;
}

static void _release_layer(tdnnl_layer *d)
{
    for (int i = 0; i < d->nmem; i++)
        dnnl_memory_destroy(d->mem[i]);
    for (int s = 0; s < TDNNL_NSLOT; s++) {
        if (d->ex[s].prim)
            dnnl_primitive_destroy(d->ex[s].prim);
        if (d->pd[s])
            dnnl_primitive_desc_destroy(d->pd[s]);
    }
    memset(d, 0, sizeof(*d));
}

void _tdnnl_release(teng_backend *bk, teng_net *net)
{
    tdnnl_net *dn = net->bkstate;
    (void)bk;
    if (!dn)
        return;
    for (int i = 0; dn->l && i < net->nl; i++)
        _release_layer(&dn->l[i]);
    for (int i = 0; dn->sum && i < net->nt; i++)
        _release_layer(&dn->sum[i]);
    free(dn->tmd);
    free(dn->pmd);
    free(dn->l);
    free(dn->sum);
    free(dn);
    net->bkstate = NULL;
}

/* ---- execution ---- */

static int _exec(teng_backend *bk, tdnnl_exec *ex)
{
    TDNNL_CHECK(bk, dnnl_primitive_execute(ex->prim, _tdnnl(bk)->stream,
                                           ex->nargs, ex->args));
    return TENG_OK;
}

static uint64_t _dropout_key(const teng_net *net, int layer)
{
    return teng_hash64(net->dropout_seed ^ teng_hash64(net->step) ^
                       ((uint64_t)layer << 48));
}

int _tdnnl_forward(teng_backend *bk, teng_net *net, int li, int training)
{
    tdnnl_net *dn = net->bkstate;
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    int rc;
    switch (l->kind) {
    case TENG_L_INPUT:
        return TENG_OK;
    case TENG_L_BN: {
        if (!training)
            return _exec(bk, &d->ex[TDNNL_INF]);
        if ((rc = _exec(bk, &d->ex[TDNNL_FWD])))
            return rc;
        TDNNL_CHECK(bk, dnnl_stream_wait(_tdnnl(bk)->stream));
        teng_shape s = net->t[l->in[0]].shape;
        char *st = net->stats, *ws = l->ws;
        teng_host_bn_running((float *)(st + net->stat_off[l->stat0]),
                             (float *)(st + net->stat_off[l->stat0 + 1]),
                             (float *)(ws + d->ws_off[0]),
                             (float *)(ws + d->ws_off[1]), s.c, l->momentum,
                             (size_t)s.n * s.h * s.w);
        return TENG_OK;
    }
    case TENG_L_DROPOUT: {
        teng_tensor *x = &net->t[l->in[0]], *y = &net->t[l->out];
        size_t n = x->bytes / sizeof(float);
        TDNNL_CHECK(bk, dnnl_stream_wait(_tdnnl(bk)->stream));
        if (training && l->p > 0.f)
            teng_host_dropout_fwd(x->data, y->data, l->ws, n, l->p,
                                  _dropout_key(net, li));
        else
            memcpy(y->data, x->data, x->bytes);
        return TENG_OK;
    }
    case TENG_L_XENT: {
        teng_shape s = net->t[l->in[0]].shape;
        TDNNL_CHECK(bk, dnnl_stream_wait(_tdnnl(bk)->stream));
        l->loss_sum = teng_host_xent(net->t[l->in[0]].data, net->labels, s.n,
                                     s.c, l->smoothing, 1.f, NULL);
        return TENG_OK;
    }
    default:
        return _exec(bk, &d->ex[TDNNL_FWD]);
    }
}

int _tdnnl_backward(teng_backend *bk, teng_net *net, int li)
{
    tdnnl_net *dn = net->bkstate;
    teng_layer *l = &net->l[li];
    tdnnl_layer *d = &dn->l[li];
    int rc;
    switch (l->kind) {
    case TENG_L_INPUT:
        return TENG_OK;
    case TENG_L_CONV:
    case TENG_L_FC:
        /* Weights first: their gradient is what the all-reduce waits on.
         * Both reorders share the weights temp buffer, in turn. */
        static const int order[4] = {TDNNL_BWW, TDNNL_DWRE, TDNNL_WRE,
                                     TDNNL_BWD};
        for (int k = 0; k < 4; k++)
            if (d->ex[order[k]].prim && (rc = _exec(bk, &d->ex[order[k]])))
                return rc;
        return TENG_OK;
    case TENG_L_DROPOUT: {
        teng_tensor *y = &net->t[l->out];
        if (!l->in_grad[0])
            return TENG_OK;
        TDNNL_CHECK(bk, dnnl_stream_wait(_tdnnl(bk)->stream));
        if (l->p > 0.f)
            teng_host_dropout_bwd(y->grad, l->in_grad[0], l->ws,
                                  y->bytes / sizeof(float), l->p);
        else
            memcpy(l->in_grad[0], y->grad, y->bytes);
        return TENG_OK;
    }
    case TENG_L_XENT: {
        teng_shape s = net->t[l->in[0]].shape;
        TDNNL_CHECK(bk, dnnl_stream_wait(_tdnnl(bk)->stream));
        teng_host_xent(net->t[l->in[0]].data, net->labels, s.n, s.c,
                       l->smoothing, teng_loss_norm(net), l->in_grad[0]);
        return TENG_OK;
    }
    default:
        return d->ex[TDNNL_BWD].prim ? _exec(bk, &d->ex[TDNNL_BWD]) : 0;
    }
}

int _tdnnl_grad_sum(teng_backend *bk, teng_net *net, int tensor)
{
    tdnnl_net *dn = net->bkstate;
    return _exec(bk, &dn->sum[tensor].ex[TDNNL_FWD]);
}
