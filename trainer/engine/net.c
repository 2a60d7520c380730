/* net.c: building a network graph (layers, tensors, params) and inferring
 * its logical shapes. Nothing here touches a backend. */
#include <stdlib.h>
#include <string.h>

#include "trainer/engine/internal.h"

const char *teng_strerror(int status)
{
    switch (status) {
    case TENG_OK:
        return "ok";
    case TENG_EINVAL:
        return "invalid argument";
    case TENG_ENOMEM:
        return "out of memory";
    case TENG_EBACKEND:
        return "backend error";
    case TENG_ESTATE:
        return "call out of order";
    }
    return "unknown error";
}

int teng_net_init(teng_net *net)
{
    memset(net, 0, sizeof(*net));
    net->input = -1;
    net->loss_layer = -1;
    net->dropout_seed = 0x70725553ULL;
    net->loss_scale = 1.0;
    return TENG_OK;
}

int teng_net_create(teng_net **out)
{
    *out = malloc(sizeof(**out));
    if (!*out)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory for a net");
    return teng_net_init(*out);
}

void teng_net_destroy(teng_net *net)
{
    if (!net)
        return;
    teng_net_free(net);
    free(net);
}

/* Grows *arr (of elem-byte items) to hold one more; returns the new item
 * zeroed, or NULL. */
static void *_push(void **arr, int *n, int *cap, size_t elem)
{
    if (*n == *cap) {
        int ncap = *cap ? *cap * 2 : 64;
        void *p = realloc(*arr, elem * (size_t)ncap);
        if (!p)
            return NULL;
        *arr = p;
        *cap = ncap;
    }
    void *item = (char *)*arr + elem * (size_t)(*n)++;
    memset(item, 0, elem);
    return item;
}

static int _check_open(teng_net *net, int x, const char *what)
{
    if (net->compiled)
        return TORUS_FAIL(TENG_ESTATE, "%s: net already compiled", what);
    if (x < 0 || x >= net->nt)
        return TORUS_FAIL(TENG_EINVAL, "%s: no tensor %d", what, x);
    return TENG_OK;
}

static teng_layer *_layer(teng_net *net, teng_layer_kind kind, const char *name,
                          int x)
{
    teng_layer *l = _push((void **)&net->l, &net->nl, &net->cap_l, sizeof(*l));
    if (!l)
        return NULL;
    l->kind = kind;
    snprintf(l->name, sizeof(l->name), "%s", name ? name : "");
    l->in[0] = x;
    l->in[1] = -1;
    l->nin = x >= 0 ? 1 : 0;
    l->out = -1;
    l->param0 = net->np;
    l->stat0 = -1;
    if (x >= 0)
        net->t[x].nconsumers++;
    return l;
}

/* Adds a layer of `kind` on tensor x into *l after the checks every layer
 * makes, in this order: the net is still open and x exists (what: the
 * kind in messages), then the layer's own geometry is valid (geometry_ok,
 * from its caller). */
static int _begin(teng_net *net, teng_layer_kind kind, const char *what,
                  const char *name, int x, int geometry_ok, teng_layer **l)
{
    int rc = _check_open(net, x, what);
    if (rc)
        return rc;
    if (!geometry_ok)
        return TORUS_FAIL(TENG_EINVAL, "%s '%s': bad geometry", what, name);
    *l = _layer(net, kind, name, x);
    return *l ? TENG_OK : TORUS_FAIL(TENG_ENOMEM, "out of memory");
}

/* Adds the output tensor of the newest layer; returns its id. */
static int _output(teng_net *net, teng_shape s)
{
    if (s.c <= 0 || s.h <= 0 || s.w <= 0)
        return TORUS_FAIL(TENG_EINVAL,
                          "layer '%s': output shape %dx%dx%d is empty",
                          net->l[net->nl - 1].name, s.c, s.h, s.w);
    teng_tensor *t = _push((void **)&net->t, &net->nt, &net->cap_t, sizeof(*t));
    if (!t)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    t->shape = s;
    t->producer = net->nl - 1;
    t->needs_grad = 1;
    t->gbuf = -1;
    net->l[net->nl - 1].out = net->nt - 1;
    return net->nt - 1;
}

static int _param(teng_net *net, teng_param_kind kind, int ndims,
                  const int *dims)
{
    teng_layer *l = &net->l[net->nl - 1];
    teng_param *p = _push((void **)&net->p, &net->np, &net->cap_p, sizeof(*p));
    static const char *suffix[] = {"w", "b", "gamma", "beta"};
    if (!p)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    snprintf(p->name, sizeof(p->name), "%s.%s", l->name, suffix[kind]);
    p->layer = net->nl - 1;
    p->kind = kind;
    p->ndims = ndims;
    p->count = 1;
    for (int i = 0; i < ndims; i++) {
        p->dims[i] = dims[i];
        p->count *= (size_t)dims[i];
    }
    p->is_bn_or_bias = kind != TENG_P_WEIGHT;
    l->nparam++;
    return TENG_OK;
}

/* The weights wd (K first) of the newest layer, and its bias of K. */
static int _weights(teng_net *net, int ndims, const int *wd, int bias)
{
    int rc = _param(net, TENG_P_WEIGHT, ndims, wd);
    if (!rc && bias)
        rc = _param(net, TENG_P_BIAS, 1, &wd[0]);
    return rc;
}

int teng_add_input(teng_net *net, int c, int h, int w)
{
    if (net->compiled)
        return TORUS_FAIL(TENG_ESTATE, "input: net already compiled");
    if (net->input >= 0)
        return TORUS_FAIL(TENG_EINVAL, "input: the net has one already");
    if (!_layer(net, TENG_L_INPUT, "input", -1))
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    int id = _output(net, (teng_shape){0, c, h, w});
    if (id >= 0) {
        net->t[id].needs_grad = 0;
        net->input = id;
    }
    return id;
}

/* Output extent of a sliding window; <= 0 when the window does not fit. */
static int _extent(int in, int k, int s, int p)
{
    return in + 2 * p < k ? 0 : (in + 2 * p - k) / s + 1;
}

int teng_add_conv(teng_net *net, const char *name, int x, int k, int ksize,
                  int stride, int pad, int bias)
{
    teng_layer *l;
    int rc = _begin(net, TENG_L_CONV, "conv", name, x,
                    k > 0 && ksize > 0 && stride > 0 && pad >= 0, &l);
    if (rc)
        return rc;
    teng_shape s = net->t[x].shape;
    l->k = k;
    l->kh = l->kw = ksize;
    l->sh = l->sw = stride;
    l->ph = l->pw = pad;
    l->bias = bias;
    int wd[4] = {k, s.c, ksize, ksize};
    if ((rc = _weights(net, 4, wd, bias)))
        return rc;
    return _output(net, (teng_shape){0, k, _extent(s.h, ksize, stride, pad),
                                     _extent(s.w, ksize, stride, pad)});
}

int teng_add_bn(teng_net *net, const char *name, int x, int relu,
                int zero_gamma)
{
    teng_layer *l;
    int rc = _begin(net, TENG_L_BN, "bn", name, x, 1, &l);
    if (rc)
        return rc;
    teng_shape s = net->t[x].shape;
    l->relu = relu;
    l->zero_gamma = zero_gamma;
    l->eps = 1e-5f;
    l->momentum = 0.1f; /* running = (1-m)*running + m*batch, as PyTorch */
    if ((rc = _param(net, TENG_P_GAMMA, 1, &s.c)) ||
        (rc = _param(net, TENG_P_BETA, 1, &s.c)))
        return rc;
    /* Two running-statistics vectors (mean, var) of C floats each. */
    size_t *off = realloc(net->stat_off, sizeof(*off) * (net->nstats + 2));
    if (off)
        net->stat_off = off;
    int *len = realloc(net->stat_len, sizeof(*len) * (net->nstats + 2));
    if (len)
        net->stat_len = len;
    if (!off || !len)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    l = &net->l[net->nl - 1];
    l->stat0 = net->nstats;
    for (int i = 0; i < 2; i++) {
        size_t prev = net->nstats
                          ? net->stat_off[net->nstats - 1] +
                                _teng_align(sizeof(float) *
                                            net->stat_len[net->nstats - 1])
                          : 0;
        net->stat_off[net->nstats] = prev;
        net->stat_len[net->nstats] = s.c;
        net->nstats++;
    }
    return _output(net, s);
}

static int _same_shape(teng_net *net, const char *kind, const char *name, int x)
{
    teng_layer_kind k = !strcmp(kind, "relu") ? TENG_L_RELU : TENG_L_DROPOUT;
    teng_layer *l;
    int rc = _begin(net, k, kind, name, x, 1, &l);
    return rc ? rc : _output(net, net->t[x].shape);
}

int teng_add_relu(teng_net *net, const char *name, int x)
{
    return _same_shape(net, "relu", name, x);
}

int teng_add_dropout(teng_net *net, const char *name, int x, float p)
{
    if (!(p >= 0.0f && p < 1.0f))
        return TORUS_FAIL(TENG_EINVAL, "dropout '%s': p=%g is not in [0, 1)",
                          name, p);
    int id = _same_shape(net, "dropout", name, x);
    if (id >= 0)
        net->l[net->nl - 1].p = p;
    return id;
}

static int _pool(teng_net *net, teng_layer_kind kind, const char *name, int x,
                 int ksize, int stride, int pad)
{
    teng_layer *l;
    int rc = _begin(net, kind, "pool", name, x,
                    ksize > 0 && stride > 0 && pad >= 0 && pad < ksize, &l);
    if (rc)
        return rc;
    teng_shape s = net->t[x].shape;
    l->kh = l->kw = ksize;
    l->sh = l->sw = stride;
    l->ph = l->pw = pad;
    return _output(net, (teng_shape){0, s.c, _extent(s.h, ksize, stride, pad),
                                     _extent(s.w, ksize, stride, pad)});
}

int teng_add_maxpool(teng_net *net, const char *name, int x, int ksize,
                     int stride, int pad)
{
    return _pool(net, TENG_L_MAXPOOL, name, x, ksize, stride, pad);
}

int teng_add_avgpool(teng_net *net, const char *name, int x, int ksize,
                     int stride, int pad)
{
    return _pool(net, TENG_L_AVGPOOL, name, x, ksize, stride, pad);
}

int teng_add_gap(teng_net *net, const char *name, int x)
{
    teng_layer *l;
    int rc = _begin(net, TENG_L_GAP, "gap", name, x, 1, &l);
    if (rc)
        return rc;
    teng_shape s = net->t[x].shape;
    l->kh = s.h;
    l->kw = s.w;
    l->sh = s.h;
    l->sw = s.w;
    return _output(net, (teng_shape){0, s.c, 1, 1});
}

int teng_add_fc(teng_net *net, const char *name, int x, int k, int bias)
{
    int rc = _check_open(net, x, "fc");
    if (rc)
        return rc;
    if (k <= 0)
        return TORUS_FAIL(TENG_EINVAL, "fc '%s': %d outputs", name, k);
    teng_shape s = net->t[x].shape;
    teng_layer *l = _layer(net, TENG_L_FC, name, x);
    if (!l)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    l->k = k;
    l->bias = bias;
    /* Flattening is implicit: weights are K x C x H x W. */
    int wd[4] = {k, s.c, s.h, s.w};
    if ((rc = _weights(net, 4, wd, bias)))
        return rc;
    return _output(net, (teng_shape){0, k, 1, 1});
}

int teng_add_residual(teng_net *net, const char *name, int a, int b, int relu)
{
    int rc = _check_open(net, a, "residual");
    if (rc || (rc = _check_open(net, b, "residual")))
        return rc;
    teng_shape sa = net->t[a].shape, sb = net->t[b].shape;
    if (sa.c != sb.c || sa.h != sb.h || sa.w != sb.w)
        return TORUS_FAIL(TENG_EINVAL,
                          "residual '%s': shapes %dx%dx%d and %dx%dx%d differ",
                          name, sa.c, sa.h, sa.w, sb.c, sb.h, sb.w);
    teng_layer *l = _layer(net, TENG_L_ADD, name, a);
    if (!l)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    l->in[1] = b;
    l->nin = 2;
    l->relu = relu;
    net->t[b].nconsumers++;
    return _output(net, sa);
}

int teng_add_xent(teng_net *net, const char *name, int logits, float smoothing)
{
    int rc = _check_open(net, logits, "xent");
    if (rc)
        return rc;
    if (net->loss_layer >= 0)
        return TORUS_FAIL(TENG_EINVAL, "xent: the net has a loss already");
    if (!(smoothing >= 0.0f && smoothing < 1.0f))
        return TORUS_FAIL(TENG_EINVAL,
                          "xent '%s': label smoothing %g is not in [0, 1)",
                          name, smoothing);
    teng_shape s = net->t[logits].shape;
    if (s.h != 1 || s.w != 1)
        return TORUS_FAIL(TENG_EINVAL,
                          "xent '%s': logits must be N x K (got %dx%dx%d)",
                          name, s.c, s.h, s.w);
    teng_layer *l = _layer(net, TENG_L_XENT, name, logits);
    if (!l)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    l->smoothing = smoothing;
    net->loss_layer = net->nl - 1;
    return net->nl - 1;
}

size_t teng_net_param_count(const teng_net *net)
{
    size_t n = 0;
    for (int i = 0; i < net->np; i++)
        n += net->p[i].count;
    return n;
}

size_t teng_net_largest_buffer(const teng_net *net)
{
    size_t most = 1;
    for (int i = 0; i < net->np; i++)
        most = net->p[i].count > most ? net->p[i].count : most;
    for (int i = 0; i < net->nstats; i++)
        most =
            (size_t)net->stat_len[i] > most ? (size_t)net->stat_len[i] : most;
    return most;
}

void teng_net_summary(const teng_net *net, void *file)
{
    static const char *kinds[] = {"input",   "conv",    "bn",  "relu",
                                  "maxpool", "avgpool", "gap", "fc",
                                  "add",     "dropout", "xent"};
    FILE *f = file;
    for (int i = 0; i < net->nl; i++) {
        /* One write a line: on an unbuffered stderr that another process
         * shares (mpirun's), pieces of a line would interleave with its
         * lines. */
        const teng_layer *l = &net->l[i];
        char line[160];
        int n = snprintf(line, sizeof(line), "%4d %-8s %-28s", i,
                         kinds[l->kind], l->name);
        if (l->out >= 0 && n > 0 && (size_t)n < sizeof(line)) {
            teng_shape s = net->t[l->out].shape;
            snprintf(line + n, sizeof(line) - (size_t)n, " -> %d x %d x %d",
                     s.c, s.h, s.w);
        }
        fprintf(f, "%s\n", line);
    }
    fprintf(f, "%d layers, %d param tensors, %zu parameters\n", net->nl,
            net->np, teng_net_param_count(net));
}
