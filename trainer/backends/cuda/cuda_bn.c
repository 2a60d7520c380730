/* trainer/backends/cuda/cuda_bn.c: the cuda backend's BatchNorm calls, in
 * the mode the BN plan chose for each BN (cuda_fuse.h, tcuda_bn_plan):
 *
 *   - legacy: cudnnBatchNormalizationForwardTraining/Backward in spatial
 *     mode; a BN with its ReLU then runs one activation call forward and
 *     one mask pass backward (FP32 mode, odd channels, TCUDA_BN_EX=0, or
 *     after cuDNN declined the Ex call);
 *   - Ex (the seam: _ex_fwd and _ex_bwd are the only places that call
 *     cuDNN's Ex API, so a graph-API version can replace them without
 *     touching the engine): spatial-persistent mode with ops BN,
 *     BN_ACTIVATION (the ReLU inside the call, forward and backward) or
 *     BN_ADD_ACTIVATION (the BN deferred into its residual add: y =
 *     ReLU(BN(x) + z) in one call, _tcuda_bn_add_relu_fwd);
 *   - evaluation: the inference call, then the ReLU's activation call.
 *
 * Every call is queued on the backend's stream with no host wait. A call
 * cuDNN declines at run time (tcuda_fuse_status) is said once, with
 * cuDNN's status, and that BN runs the legacy calls from then on, each
 * counted as a fallback (tcuda_fastpath.h); each Ex call that ran counts
 * in bn_ex. */
#include "common/torus_error.h"
#include "common/torus_report.h"
#include "trainer/backends/cuda/cuda_fuse.h"
#include "trainer/backends/cuda/cuda_internal.h"
#include "trainer/backends/cuda/cuda_kernels.h"

static const float _one = 1.0f, _zero = 0.0f;

/* The BN layer's pieces every call takes; for the Ex calls its planned
 * ops and their activation (none for ops BN). */
typedef struct {
    teng_layer *l;
    const tcuda_layer *d;
    const teng_param *p;
    char *ws;
    void *rmean, *rvar; /* running averages */
    cudnnBatchNormOps_t ops;
    cudnnActivationDescriptor_t act;
} _bn;

static _bn _get(teng_net *net, int b)
{
    const tcuda_net *cn = net->bkstate;
    teng_layer *l = &net->l[b];
    char *st = net->stats;
    int mode = cn->bn.plan ? cn->bn.plan[b] : TCUDA_BN_LEGACY;
    return (_bn){l,
                 &cn->l[b],
                 &net->p[l->param0],
                 l->ws,
                 st + net->stat_off[l->stat0],
                 st + net->stat_off[l->stat0 + 1],
                 _tcuda_bn_ops(mode),
                 mode == TCUDA_BN_EX ? NULL : cn->relu};
}

/* A legacy call of a BN the plan put on an Ex mode is a fallback. */
static void _count_legacy(teng_backend *bk, const teng_net *net, int b,
                          int training)
{
    const tcuda_net *cn = net->bkstate;
    if (tcuda_bn_fallback(&cn->bn, b, training))
        _tcuda(bk)->fast.bn_fallback++;
}

int _tcuda_bn_fwd(teng_backend *bk, teng_net *net, int b, int training)
{
    tcuda_impl *im = _tcuda(bk);
    _bn n = _get(net, b);
    void *x = net->t[n.l->in[0]].data, *y = net->t[n.l->out].data;
    _count_legacy(bk, net, b, training);
    if (training)
        TCUDA_DNN(cudnnBatchNormalizationForwardTraining(
            im->dnn, CUDNN_BATCHNORM_SPATIAL, &_one, &_zero, n.d->x, x, n.d->x,
            y, n.d->b, n.p[0].work, n.p[1].work, (double)n.l->momentum,
            n.rmean, n.rvar, (double)n.l->eps, n.ws + n.d->ws_off[0],
            n.ws + n.d->ws_off[1]));
    else
        TCUDA_DNN(cudnnBatchNormalizationForwardInference(
            im->dnn, CUDNN_BATCHNORM_SPATIAL, &_one, &_zero, n.d->x, x, n.d->x,
            y, n.d->b, n.p[0].work, n.p[1].work, n.rmean, n.rvar,
            (double)n.l->eps));
    if (n.l->relu)
        TCUDA_DNN(cudnnActivationForward(im->dnn, n.d->act, &_one, n.d->x, y,
                                         &_zero, n.d->x, y));
    return TENG_OK;
}

int _tcuda_bn_bwd(teng_backend *bk, teng_net *net, int b)
{
    tcuda_impl *im = _tcuda(bk);
    _bn n = _get(net, b);
    teng_tensor *y = &net->t[n.l->out];
    const void *dy = y->grad;
    _count_legacy(bk, net, b, 1);
    if (n.l->relu) {
        /* Masked into scratch: y->grad may be a residual's shared grad. */
        TCUDA_K(tcuda_k_relu_bwd(im->stream, im->half, y->data, y->grad,
                                 _tcuda_tmp(net),
                                 teng_tensor_count(net, n.l->out)));
        dy = _tcuda_tmp(net);
    }
    TCUDA_DNN(cudnnBatchNormalizationBackward(
        im->dnn, CUDNN_BATCHNORM_SPATIAL, &_one, &_zero, &_one, &_zero, n.d->x,
        net->t[n.l->in[0]].data, n.d->x, dy, n.d->x, n.l->in_grad[0], n.d->b,
        n.p[0].work, n.p[0].grad, n.p[1].grad, (double)n.l->eps,
        n.ws + n.d->ws_off[0], n.ws + n.d->ws_off[1]));
    return TENG_OK;
}

/* ---- the Ex seam ---- */

/* Training forward of BN b through the Ex call in its planned mode: y =
 * BN(x), ReLU(BN(x)) or ReLU(BN(x) + z); the saved statistics and the
 * running averages as the legacy call leaves them. */
static cudnnStatus_t _ex_fwd(teng_backend *bk, teng_net *net, int b,
                             const void *z, void *y)
{
    _bn n = _get(net, b);
    return cudnnBatchNormalizationForwardTrainingEx(
        _tcuda(bk)->dnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, n.ops, &_one,
        &_zero, n.d->x, net->t[n.l->in[0]].data, z ? n.d->x : NULL, z, n.d->x,
        y, n.d->b, n.p[0].work, n.p[1].work, (double)n.l->momentum, n.rmean,
        n.rvar, (double)n.l->eps, n.ws + n.d->ws_off[0], n.ws + n.d->ws_off[1],
        n.act, net->scratch, ((const tcuda_net *)net->bkstate)->ex_ws,
        n.ws + n.d->rs_off, n.d->rs_bytes);
}

/* Backward of BN b in its forward's mode and ops, with its reserve space:
 * y and dy are the activation's output and its gradient (NULL y for ops
 * BN), dz (ops BN_ADD_ACTIVATION) where the residual's gradient goes. */
static cudnnStatus_t _ex_bwd(teng_backend *bk, teng_net *net, int b,
                             const void *y, const void *dy, void *dz)
{
    _bn n = _get(net, b);
    return cudnnBatchNormalizationBackwardEx(
        _tcuda(bk)->dnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, n.ops, &_one,
        &_zero, &_one, &_zero, n.d->x, net->t[n.l->in[0]].data,
        y ? n.d->x : NULL, y, n.d->x, dy, dz ? n.d->x : NULL, dz, n.d->x,
        n.l->in_grad[0], n.d->b, n.p[0].work, n.p[1].work, n.p[0].grad,
        n.p[1].grad, (double)n.l->eps, n.ws + n.d->ws_off[0],
        n.ws + n.d->ws_off[1], n.act, net->scratch,
        ((const tcuda_net *)net->bkstate)->ex_ws, n.ws + n.d->rs_off,
        n.d->rs_bytes);
}

void _tcuda_bn_declined(teng_backend *bk, const teng_net *net, int b,
                        const char *what, int status)
{
    tcuda_impl *im = _tcuda(bk);
    if (!im->said_bn++)
        torus_warn("cuda: cuDNN declined %s for BN layer '%s' (%s): it runs "
                   "the legacy BatchNorm calls from now on (counted in "
                   "bn_fallback)",
                   what, net->l[b].name,
                   cudnnGetErrorString((cudnnStatus_t)status));
}

/* An Ex call's status s under the run-time rule (tcuda_fuse_status):
 * TENG_OK, counted in bn_ex; TENG_OK with *declined = 1 (said once), the
 * caller then runs the legacy calls for good; or the error. */
static int _status(teng_backend *bk, const teng_net *net, int b,
                   cudnnStatus_t s, const char *what, int *declined)
{
    *declined = 0;
    switch (tcuda_fuse_status(s == CUDNN_STATUS_SUCCESS,
                              s == CUDNN_STATUS_NOT_SUPPORTED)) {
    case TCUDA_FUSE_KEEP:
        _tcuda(bk)->fast.bn_ex++;
        return TENG_OK;
    case TCUDA_FUSE_FAIL:
        return _tcuda_fail_dnn(__FILE__, __LINE__, what, s);
    default:
        *declined = 1;
        _tcuda_bn_declined(bk, net, b, what, s);
        return TENG_OK;
    }
}

#define _FWD_EX "cudnnBatchNormalizationForwardTrainingEx"
#define _BWD_EX "cudnnBatchNormalizationBackwardEx"

int _tcuda_bn_ex_train(teng_backend *bk, teng_net *net, int b)
{
    int declined, rc = _status(bk, net, b,
                               _ex_fwd(bk, net, b, NULL,
                                       net->t[net->l[b].out].data),
                               _FWD_EX, &declined);
    if (rc || !declined)
        return rc;
    /* legacy from now on, both ways (no reserve space was written) */
    tcuda_bn_decline(&((tcuda_net *)net->bkstate)->bn, b, 1);
    return _tcuda_bn_fwd(bk, net, b, 1);
}

/* The fused chain ending in residual add li (training): the BN's forward
 * writes the add's output, its own output never written. Should cuDNN
 * decline, the chain is unfused for good and runs as two layers here. */
int _tcuda_bn_add_relu_fwd(teng_backend *bk, teng_net *net, int li)
{
    tcuda_impl *im = _tcuda(bk);
    tcuda_net *cn = net->bkstate;
    const teng_layer *a = &net->l[li];
    int b = cn->bn.fuse_bn[li], declined;
    int rc = _status(bk, net, b,
                     _ex_fwd(bk, net, b, net->t[a->in[1]].data,
                             net->t[a->out].data),
                     _FWD_EX, &declined);
    if (rc || !declined)
        return rc;
    tcuda_bn_decline(&cn->bn, b, 1);
    if ((rc = _tcuda_bn_fwd(bk, net, b, 1)))
        return rc;
    TCUDA_K(tcuda_k_add(im->stream, im->half, net->t[a->in[0]].data,
                        net->t[a->in[1]].data, net->t[a->out].data,
                        teng_tensor_count(net, a->out), a->relu));
    return TENG_OK;
}

/* The backward of Ex BN b. Deferred into add a: y is the add's output, dy
 * its gradient, which the add's backward already masked in place
 * (cuDNN's mask from the reserve space leaves it as it is), dz goes to
 * the temporary region and is dropped (cuda_fuse.h). BN_ACTIVATION: y is
 * the BN's own output, its gradient unmasked (the call masks it). BN: no
 * y. Should cuDNN decline, this BN's backward is the legacy one for good
 * (the saved statistics are the same). */
int _tcuda_bn_ex_bwd(teng_backend *bk, teng_net *net, int b)
{
    tcuda_net *cn = net->bkstate;
    const teng_tensor *o = &net->t[net->l[b].out];
    const void *y = cn->bn.plan[b] == TCUDA_BN_EX ? NULL : o->data;
    const void *dy = o->grad;
    void *dz = NULL;
    if (cn->bn.deferred[b]) {
        const teng_tensor *ao = &net->t[net->l[cn->bn.add_of[b]].out];
        y = ao->data;
        dy = ao->grad;
        dz = _tcuda_tmp(net);
    }
    int declined,
        rc = _status(bk, net, b, _ex_bwd(bk, net, b, y, dy, dz), _BWD_EX,
                     &declined);
    if (rc || !declined)
        return rc;
    tcuda_bn_decline(&cn->bn, b, 0);
    return _tcuda_bn_bwd(bk, net, b);
}
