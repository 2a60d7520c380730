/* dnnl_backend.c: the oneDNN CPU backend: engine and stream, memory,
 * layout conversion for I/O, the host optimizer kernels, and the
 * descriptor the registry lists (tdnnl_backend_desc). The layer
 * primitives are in dnnl_layers.c; what both files call, in dnnl_util.c
 * below them. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/torus_error.h"
#include "trainer/backends/dnnl/tdnnl.h"
#include "trainer/backends/dnnl/dnnl_internal.h"
#include "trainer/engine/step_math.h"

int _tdnnl_reorder(teng_backend *bk, const dnnl_memory_desc_t *smd, void *src,
                   const dnnl_memory_desc_t *dmd, void *dst)
{
    tdnnl_impl *im = _tdnnl(bk);
    if (dnnl_memory_desc_equal(smd, dmd)) {
        memcpy(dst, src, dnnl_memory_desc_get_size(smd));
        return TENG_OK;
    }
    /* Only I/O paths (tests, checkpoints, initialisation) get here, never
     * a training step, so a one-off primitive is fine. */
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t p = NULL;
    dnnl_memory_t ms = NULL, md = NULL;
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(&pd, smd, im->eng,
                                                          dmd, im->eng, NULL);
    if (st == dnnl_success)
        st = dnnl_primitive_create(&p, pd);
    if (st == dnnl_success)
        st = dnnl_memory_create(&ms, smd, im->eng, src);
    if (st == dnnl_success)
        st = dnnl_memory_create(&md, dmd, im->eng, dst);
    if (st == dnnl_success) {
        dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, ms}, {DNNL_ARG_TO, md}};
        st = dnnl_primitive_execute(p, im->stream, 2, a);
    }
    if (st == dnnl_success)
        st = dnnl_stream_wait(im->stream);
    dnnl_memory_destroy(ms);
    dnnl_memory_destroy(md);
    dnnl_primitive_destroy(p);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success)
        return _tdnnl_fail(bk, __FILE__, __LINE__, "reorder", st);
    return TENG_OK;
}

static void *_alloc(teng_backend *bk, size_t bytes)
{
    void *p = NULL;
    (void)bk;
    /* 2 MiB alignment lets the kernel back big arenas with huge pages;
     * the memset is the first touch, paid once here and not in step 1. */
    size_t align = bytes >= (4u << 20) ? (2u << 20) : 64;
    if (posix_memalign(&p, align, bytes ? bytes : 1))
        return NULL;
    /* Arenas are streamed through by every memory-bound layer: huge
     * pages spare the TLB (advice only; "madvise" is Debian's default). */
    if (align > 64)
        madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 0, bytes);
    return p;
}

static void _free(teng_backend *bk, void *p)
{
    (void)bk;
    free(p);
}

static int _copy(teng_backend *bk, void *dst, const void *src, size_t n)
{
    (void)bk;
    memcpy(dst, src, n);
    return TENG_OK;
}

static int _sync(teng_backend *bk)
{
    TDNNL_CHECK(bk, dnnl_stream_wait(_tdnnl(bk)->stream));
    return TENG_OK;
}

static int _tensor_io(teng_backend *bk, teng_net *net, int id, int grad,
                      float *host, int to_device)
{
    tdnnl_net *dn = net->bkstate;
    const dnnl_memory_desc_t *tmd = &dn->tmd[id];
    teng_shape s = net->t[id].shape;
    int dims[4] = {s.n, s.c, s.h, s.w};
    dnnl_memory_desc_t plain;
    if (tmd->ndims == 2)
        dims[1] = s.c * s.h * s.w;
    _tdnnl_plain_md(&plain, tmd->ndims, dims);
    void *dev = grad ? net->t[id].grad : net->t[id].data;
    int rc = _sync(bk);
    if (rc)
        return rc;
    return to_device ? _tdnnl_reorder(bk, &plain, host, tmd, dev)
                     : _tdnnl_reorder(bk, tmd, dev, &plain, host);
}

static int _param_io(teng_backend *bk, teng_net *net, int id, void *dev,
                     float *host, int to_device)
{
    tdnnl_net *dn = net->bkstate;
    const dnnl_memory_desc_t *pmd = &dn->pmd[id];
    const teng_param *p = &net->p[id];
    int dims[4] = {p->dims[0], p->dims[1], p->dims[2], p->dims[3]};
    dnnl_memory_desc_t plain;
    if (pmd->ndims == 2 && p->ndims == 4)
        dims[1] = p->dims[1] * p->dims[2] * p->dims[3];
    _tdnnl_plain_md(&plain, pmd->ndims, dims);
    int rc = _sync(bk);
    if (rc)
        return rc;
    return to_device ? _tdnnl_reorder(bk, &plain, host, pmd, dev)
                     : _tdnnl_reorder(bk, pmd, dev, &plain, host);
}

static unsigned _bwd_reads(teng_backend *bk, const teng_net *net, int li)
{
    const teng_layer *l = &net->l[li];
    (void)bk;
    switch (l->kind) {
    case TENG_L_CONV:
    case TENG_L_FC: /* weight gradients need the input */
    case TENG_L_BN: /* normalises its input again */
    case TENG_L_XENT:
        return 1u;
    case TENG_L_RELU:
        return 4u; /* the use-dst ReLU backward */
    case TENG_L_ADD:
        return l->relu ? 4u : 0u;
    default:
        return 0u; /* pooling and dropout keep what they need in ws */
    }
}

/* Host memory: the optimizer kernels run tensor by tensor, over each
 * param's whole layout (padding included: it stays zero); their maths is
 * the engine's step_math.h, inline, so the update calls nothing back in
 * the engine. */
static int _param_sumsq(teng_backend *bk, teng_net *net, const void *buf,
                        float *out)
{
    (void)bk;
    for (int i = 0; i < net->np; i++)
        out[i] = teng_sumsq(
            (const float *)((const char *)buf + net->p[i].offset),
            net->p[i].bytes / sizeof(float));
    return TENG_OK;
}

static int _sgd(teng_backend *bk, teng_net *net, void *vel,
                const teng_sgd_args *a)
{
    (void)bk;
    for (int i = 0; i < net->np; i++) {
        const teng_param *p = &net->p[i];
        teng_sgd_span(p->master, p->grad, (float *)((char *)vel + p->offset),
                      p->bytes / sizeof(float), a[i].lr, a[i].momentum,
                      a[i].wd);
    }
    return TENG_OK;
}

static void _destroy(teng_backend *bk)
{
    tdnnl_impl *im = _tdnnl(bk);
    if (im) {
        if (im->stream)
            dnnl_stream_destroy(im->stream);
        if (im->eng)
            dnnl_engine_destroy(im->eng);
        free(im);
    }
    free(bk);
}

static const teng_backend_ops _ops = {
    .name = "dnnl",
    .host_memory = 1,
    .destroy = _destroy,
    .alloc = _alloc,
    .free = _free,
    .upload = _copy,
    .download = _copy,
    .sync = _sync,
    .plan = _tdnnl_plan,
    .bind = _tdnnl_bind,
    .release = _tdnnl_release,
    .forward = _tdnnl_forward,
    .backward = _tdnnl_backward,
    .bwd_reads = _bwd_reads,
    .grad_sum = _tdnnl_grad_sum,
    .tensor_io = _tensor_io,
    .param_io = _param_io,
    .param_sumsq = _param_sumsq,
    .sgd_update = _sgd,
    .refresh_work = NULL, /* f32 only: the working copy is the master */
};

static int _create(const teng_backend_opts *opts, teng_backend **out)
{
    teng_backend *bk = calloc(1, sizeof(*bk));
    tdnnl_impl *im = calloc(1, sizeof(*im));
    if (!bk || !im) {
        free(bk);
        free(im);
        return TORUS_FAIL(TENG_ENOMEM, "oneDNN backend: out of memory");
    }
    bk->ops = &_ops;
    bk->opts = *opts;
    bk->impl = im;
    if (opts->threads > 0) {
        /* oneDNN runs on the OpenMP runtime it was built with; find its
         * thread-count setter there rather than linking one ourselves. */
        void (*set)(int) = (void (*)(int))(uintptr_t)dlsym(
            RTLD_DEFAULT, "omp_set_num_threads");
        if (set)
            set(opts->threads);
    }
    dnnl_status_t st = dnnl_engine_create(&im->eng, dnnl_cpu, 0);
    if (st == dnnl_success)
        st =
            dnnl_stream_create(&im->stream, im->eng, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        _destroy(bk);
        return TORUS_FAIL(TENG_EBACKEND, "oneDNN CPU engine: %s",
                          dnnl_status2str(st));
    }
    if (opts->verbose)
        dnnl_set_verbose(opts->verbose);
    bk->stream = im->stream;
    *out = bk;
    return TENG_OK;
}

static const char *const _aliases[] = {"cpu", NULL};

const teng_backend_desc tdnnl_backend_desc = {
    .name = "dnnl",
    .aliases = _aliases,
    .probe = NULL, /* the CPU is always there */
    .create = _create,
};
