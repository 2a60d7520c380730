/*
 * optim_check.c: the cuda optimizer kernels (trainer/backends/cuda/
 * cuda_optim.cu, the shipped source) on a real GPU against the host maths,
 * one program, one result table (tests/gpu/run runs it).
 *
 * Rows:
 * - "LARS/SGD kernel vs host": one plan over ResNet-50 v1.5's 161 tensors
 *   (from the models library, as torus-bench takes them), working copies
 *   mostly fp16 with some bf16 and fp32 ones. tcuda_optim_sumsq of the
 *   weights and the gradients must be within fp32 summation-order rounding
 *   of teng_sumsq and of a double sum; with the LARS trust ratios and
 *   per-tensor args from topt_lars_trust, two tcuda_optim_sgd steps must
 *   give the masters and velocities of teng_sgd_span bit for bit, and the
 *   working copies must be the host's rounding of the host masters.
 * - "fp16/bf16 working copy rounding vs host": tcuda_optim_refresh over
 *   every one of the 2^32 fp32 bit patterns into an fp16 and a bf16
 *   working copy must equal tcuda_f16_rne / tcuda_bf16_rne run on the host
 *   (the CPU unit test checks those against a reference rounding).
 * - "device step vs eager kernels": the device step (tcuda_optim_step:
 *   the LARS norms, trust ratios and arguments formed on the device, the
 *   inf/nan count, the skip, the loss-scale decision) over the same 161
 *   tensors against the eager kernels (tcuda_optim_sumsq to the host, the
 *   host forming the arguments with teng_sgd_hyper, tcuda_optim_sgd), 3
 *   steps at loss scale 1024 with a new lr each: clean, one NaN in a
 *   gradient (the device skips and backs off to 512; the eager side does
 *   not update), clean: masters, velocities and working copies bit for
 *   bit, and the decisions (1 overflow, scale 512, 3 decided).
 * Exit 1 if a row failed, else 0; with no usable device it prints
 * "SKIP: <reason>" and exits 77.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/backends/cuda/optim_math.h"
#include "trainer/backends/cuda/tcuda_optim.h"
#include "trainer/engine/teng.h"
#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"

#define CK(call)                                            \
    do {                                                    \
        cudaError_t e_ = (call);                            \
        if (e_ != cudaSuccess) {                            \
            fprintf(stderr, "optim_check: %s: %s\n", #call, \
                    cudaGetErrorString(e_));                \
            goto fail;                                      \
        }                                                   \
    } while (0)
#define OK(call)                                            \
    do {                                                    \
        if ((call) != 0) {                                  \
            fprintf(stderr, "optim_check: %s: %s\n", #call, \
                    torus_error_msg());                     \
            goto fail;                                      \
        }                                                   \
    } while (0)

static char _rows[3][200];

static uint32_t _xs(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (uint32_t)((*s * 0x2545F4914F6CDD1DULL) >> 32);
}

static float _rand(uint64_t *s, float scale)
{
    return scale * ((float)(_xs(s) >> 8) / 8388608.f - 1.f);
}

/* The host side of the ResNet-50 check: the arena and the params. */
typedef struct {
    int np;
    size_t total;     /* floats in the arena */
    size_t *off;      /* float offset of each param */
    size_t *count;    /* elements */
    int *plain;       /* bias/BN: no wd, no LARS */
    teng_dtype *type; /* working copy */
    float *w, *g, *v; /* host arenas */
} _net;

static int _resnet(_net *n)
{
    teng_net *net;
    tmodel_spec spec = tmodel_defaults(TMODEL_RESNET50);
    if (teng_net_create(&net) || tmodel_build(net, &spec) < 0)
        return -1;
    n->np = teng_net_nparams(net);
    n->off = calloc(n->np, sizeof *n->off);
    n->count = calloc(n->np, sizeof *n->count);
    n->plain = calloc(n->np, sizeof *n->plain);
    n->type = calloc(n->np, sizeof *n->type);
    n->total = 0;
    for (int i = 0; i < n->np; i++) {
        const teng_param *p = teng_net_param(net, i);
        n->off[i] = n->total;
        n->count[i] = p->count;
        n->plain[i] = p->is_bn_or_bias;
        /* fp16 mostly; every 7th bf16, every 11th fp32: all three paths. */
        n->type[i] = i % 11 == 5 ? TENG_F32 : i % 7 == 3 ? TENG_BF16 : TENG_F16;
        n->total += (p->count + 63) / 64 * 64; /* 256-byte aligned */
    }
    teng_net_destroy(net);
    n->w = malloc(n->total * sizeof(float));
    n->g = malloc(n->total * sizeof(float));
    n->v = calloc(n->total, sizeof(float));
    if (!n->w || !n->g || !n->v)
        return -1;
    uint64_t s = 1234;
    for (size_t i = 0; i < n->total; i++) {
        n->w[i] = _rand(&s, 0.05f);
        n->g[i] = _rand(&s, 1e-3f);
    }
    return 0;
}

/* GPU sums against the host's and a double sum: all terms are >= 0, so
 * each fp32 sum is within depth * 2^-24 relative of the exact one. */
static int _sums_ok(const _net *n, const float *buf, const float *gpu,
                    double *worst)
{
    for (int i = 0; i < n->np; i++) {
        const float *x = buf + n->off[i];
        double exact = 0;
        for (size_t k = 0; k < n->count[i]; k++)
            exact += (double)x[k] * x[k];
        float host = teng_sumsq(x, n->count[i]);
        /* GPU: 64 per thread, 8 tree levels, partials per lane, 5 levels. */
        double dgpu = 64 + 8 + n->count[i] / 16384 / 32 + 1 + 5 + 2;
        double dhost = n->count[i] / 16 + 1 + 4 + 2;
        double eg = fabs(gpu[i] - exact), eh = fabs(gpu[i] - host);
        double rel = exact > 0 ? eg / exact : eg;
        *worst = rel > *worst ? rel : *worst;
        if (eg > dgpu * 0x1p-24 * exact ||
            eh > (dgpu + dhost) * 0x1p-24 * exact) {
            fprintf(stderr, "param %d: gpu %a host %a exact %a\n", i, gpu[i],
                    host, exact);
            return 0;
        }
    }
    return 1;
}

/* Host LARS args from the norms in w2/g2 (per param), step's lr and mom. */
static void _args(const _net *n, const float *w2, const float *g2, float lr,
                  float mom, teng_sgd_args *a, float *trust)
{
    for (int i = 0; i < n->np; i++) {
        float wd = n->plain[i] ? 0.f : 5e-5f;
        trust[i] = n->plain[i] ? 1.f
                               : topt_lars_trust(sqrtf(w2[i]), sqrtf(g2[i]),
                                                 1e-3f, wd, 1e-9f);
        a[i] = (teng_sgd_args){lr * trust[i], mom, wd};
    }
}

/* Working copies (uint16 arena, same offsets) against the host masters. */
static long _work_wrong(const _net *n, const uint16_t *h)
{
    long bad = 0;
    for (int i = 0; i < n->np; i++)
        for (size_t k = 0; k < n->count[i] && n->type[i] != TENG_F32; k++) {
            float w = n->w[n->off[i] + k];
            uint16_t want =
                n->type[i] == TENG_F16 ? tcuda_f16_rne(w) : tcuda_bf16_rne(w);
            bad += h[n->off[i] + k] != want;
        }
    return bad;
}

/* Per-param host buffers: host and GPU norms, trusts and args. */
typedef struct {
    float *w2, *g2, *gw2, *gg2, *tr, *gtr;
    teng_sgd_args *a, *ga;
} _bufs;

/* One LARS step on the GPU and on the host: 1 the norms agree, 0 not,
 * -1 an error. Step 1 changes the LR, with the momentum correction. */
static int _step(_net *n, tcuda_optim *o, _bufs *b, int step, float *d_w,
                 float *d_g, float *d_v, double *worst, double *trust_err)
{
    if (tcuda_optim_sumsq(o, d_w, b->gw2) || tcuda_optim_sumsq(o, d_g, b->gg2))
        return -1;
    int pass =
        _sums_ok(n, n->w, b->gw2, worst) && _sums_ok(n, n->g, b->gg2, worst);
    for (int i = 0; i < n->np; i++) {
        b->w2[i] = teng_sumsq(n->w + n->off[i], n->count[i]);
        b->g2[i] = teng_sumsq(n->g + n->off[i], n->count[i]);
    }
    float lr = step ? 2.0f : 1.5f, mom = step ? 0.9f * 2.0f / 1.5f : 0.9f;
    _args(n, b->w2, b->g2, lr, mom, b->a, b->tr);
    _args(n, b->gw2, b->gg2, lr, mom, b->ga, b->gtr);
    for (int i = 0; i < n->np; i++) {
        double e = fabs((double)b->gtr[i] - b->tr[i]) / b->tr[i];
        *trust_err = e > *trust_err ? e : *trust_err;
    }
    if (tcuda_optim_sgd(o, d_v, b->a))
        return -1;
    for (int i = 0; i < n->np; i++)
        teng_sgd_span(n->w + n->off[i], n->g + n->off[i], n->v + n->off[i],
                      n->count[i], b->a[i].lr, b->a[i].momentum, b->a[i].wd);
    return pass;
}

/* Two LARS steps on the GPU and on the host; 1 pass, 0 fail, -1 error. */
static int _lars_row(_net *n, cudaStream_t st, tcuda_optim_param *p, float *d_w,
                     float *d_g, float *d_v, uint16_t *d_h)
{
    int np = n->np, pass = 1;
    tcuda_optim *o = NULL;
    _bufs b = {calloc(np, 4),           calloc(np, 4),          calloc(np, 4),
               calloc(np, 4),           calloc(np, 4),          calloc(np, 4),
               calloc(np, sizeof *b.a), calloc(np, sizeof *b.a)};
    float *bw = malloc(n->total * 4), *bv = malloc(n->total * 4);
    uint16_t *bh = malloc(n->total * 2);
    double worst = 0, trust_err = 0;
    for (int i = 0; i < np; i++)
        p[i] = (tcuda_optim_param){d_w + n->off[i],
                                   n->type[i] == TENG_F32
                                       ? (void *)(d_w + n->off[i])
                                       : (void *)(d_h + n->off[i]),
                                   n->type[i],
                                   d_g + n->off[i],
                                   n->off[i] * sizeof(float),
                                   n->count[i]};
    OK(tcuda_optim_create(p, np, st, &o));
    for (int step = 0; step < 2; step++) {
        int r = _step(n, o, &b, step, d_w, d_g, d_v, &worst, &trust_err);
        OK(r < 0);
        pass &= r;
    }
    CK(cudaMemcpyAsync(bw, d_w, n->total * 4, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(bv, d_v, n->total * 4, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(bh, d_h, n->total * 2, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    /* Whole arenas: the padding between params must be untouched too. */
    int w_same = !memcmp(bw, n->w, n->total * 4);
    int v_same = !memcmp(bv, n->v, n->total * 4);
    long work_bad = _work_wrong(n, bh);
    /* The trust ratios from the GPU's norms only differ from the host's by
     * the norms' summation-order rounding (the host sums up to 128000
     * terms in a row for the fc weights). */
    pass &= w_same && v_same && work_bad == 0 && trust_err < 1e-4;
    snprintf(_rows[0], sizeof _rows[0],
             "%s   %d tensors, 2 steps: master %s, velocity %s, %ld work "
             "wrong; norms rel err %.1e, trust %.1e",
             pass ? "PASS" : "FAIL", np, w_same ? "exact" : "DIFFER",
             v_same ? "exact" : "DIFFER", work_bad, worst, trust_err);
    tcuda_optim_destroy(o);
    free(b.w2), free(b.g2), free(b.gw2), free(b.gg2), free(b.tr), free(b.gtr);
    free(b.a), free(b.ga), free(bw), free(bv), free(bh);
    return pass;
fail:
    tcuda_optim_destroy(o);
    snprintf(_rows[0], sizeof _rows[0],
             "FAIL   CUDA or optimizer error (see stderr)");
    return -1;
}

/* Device buffers of one side of the device-step row. */
typedef struct {
    float *w, *g, *v;
    uint16_t *h;
    tcuda_optim *o;
} _side;

static int _side_open(_net *n, cudaStream_t st, tcuda_optim_param *p,
                      const float *g, _side *s)
{
    CK(cudaMalloc((void **)&s->w, n->total * 4));
    CK(cudaMalloc((void **)&s->g, n->total * 4));
    CK(cudaMalloc((void **)&s->v, n->total * 4));
    CK(cudaMalloc((void **)&s->h, n->total * 2));
    CK(cudaMemcpy(s->w, n->w, n->total * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s->g, g, n->total * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(s->v, 0, n->total * 4));
    CK(cudaMemset(s->h, 0, n->total * 2));
    for (int i = 0; i < n->np; i++)
        p[i] = (tcuda_optim_param){s->w + n->off[i],
                                   n->type[i] == TENG_F32
                                       ? (void *)(s->w + n->off[i])
                                       : (void *)(s->h + n->off[i]),
                                   n->type[i],
                                   s->g + n->off[i],
                                   n->off[i] * sizeof(float),
                                   n->count[i]};
    OK(tcuda_optim_create(p, n->np, st, &s->o));
    return 0;
fail:
    return -1;
}

static void _side_close(_side *s)
{
    tcuda_optim_destroy(s->o);
    cudaFree(s->w), cudaFree(s->g), cudaFree(s->v), cudaFree(s->h);
}

/* The eager side's step: GPU norms to the host, the host's arguments. */
static int _eager_step(_net *n, _side *a, const teng_tensor_hyper *h, double lr,
                       double prev, double scale, float *w2, float *g2,
                       teng_sgd_args *args)
{
    float t;
    OK(tcuda_optim_sumsq(a->o, a->w, w2));
    OK(tcuda_optim_sumsq(a->o, a->g, g2));
    float mom = (float)teng_momentum(0.9, 1, lr, prev);
    for (int i = 0; i < n->np; i++)
        args[i] = teng_sgd_hyper(&h[i], w2[i], g2[i], lr, mom, scale, &t);
    OK(tcuda_optim_sgd(a->o, a->v, args));
    return 0;
fail:
    return -1;
}

/* Both sides equal, whole arenas (padding included)? 1 yes, 0 no, -1 a
 * CUDA error. */
static int _sides_same(_net *n, cudaStream_t st, _side *a, _side *b)
{
    size_t bytes[3] = {n->total * 4, n->total * 4, n->total * 2};
    void *da[3] = {a->w, a->v, a->h}, *db[3] = {b->w, b->v, b->h};
    char *x = malloc(bytes[0]), *y = malloc(bytes[0]);
    int same = x && y;
    for (int k = 0; k < 3 && same; k++) {
        CK(cudaMemcpyAsync(x, da[k], bytes[k], cudaMemcpyDeviceToHost, st));
        CK(cudaMemcpyAsync(y, db[k], bytes[k], cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        same = !memcmp(x, y, bytes[k]);
    }
    free(x), free(y);
    return same;
fail:
    free(x), free(y);
    return -1;
}

static int _dstep_row(_net *n, cudaStream_t st, tcuda_optim_param *p)
{
    _side a = {0}, b = {0};
    int np = n->np, same = 0, rc = -1;
    float *g = malloc(n->total * 4), *w2 = calloc(np, 4), *g2 = calloc(np, 4);
    teng_sgd_args *args = calloc(np, sizeof *args);
    teng_tensor_hyper *h = calloc(np, sizeof *h);
    teng_dstep_state ls = {.scale = 1024.0, .used = 1024.0}, got = {0};
    teng_dstep_config c = {1.0, 16777216.0, 2.0, 0.5, 2000, 1, 0.9, 1};
    const double lr[3] = {1.5, 2.0, 2.5};
    const float nan = NAN;
    if (!g || !w2 || !g2 || !args || !h)
        goto fail;
    for (size_t k = 0; k < n->total; k++)
        g[k] = n->g[k] * 1024.f; /* the loss-scaled gradients */
    for (int i = 0; i < np; i++)
        h[i] = (teng_tensor_hyper){n->plain[i] ? 0.f : 5e-5f, !n->plain[i],
                                   1e-3f, 1e-9f};
    if (_side_open(n, st, p, g, &a) || _side_open(n, st, p, g, &b))
        goto fail;
    OK(tcuda_optim_device_open(b.o, h, &c, &ls));
    OK(_eager_step(n, &a, h, lr[0], 0, 1024.0, w2, g2, args));
    OK(tcuda_optim_count_nonfinite(b.o) ||
       tcuda_optim_step(b.o, b.v, lr[0], NULL, 0, 1));
    /* step 2: a NaN in the device side's gradient; the eager side skips */
    CK(cudaMemcpyAsync(b.g + n->off[7] + 3, &nan, 4, cudaMemcpyHostToDevice,
                       st));
    OK(tcuda_optim_count_nonfinite(b.o) ||
       tcuda_optim_step(b.o, b.v, lr[1], NULL, 0, 1));
    CK(cudaMemcpyAsync(b.g + n->off[7] + 3, g + n->off[7] + 3, 4,
                       cudaMemcpyHostToDevice, st));
    /* step 3: at the backed-off scale, momentum from the last applied lr */
    OK(_eager_step(n, &a, h, lr[2], lr[0], 512.0, w2, g2, args));
    OK(tcuda_optim_count_nonfinite(b.o) ||
       tcuda_optim_step(b.o, b.v, lr[2], NULL, 0, 1));
    OK(tcuda_optim_ls_read(b.o, &got, 0));
    same = _sides_same(n, st, &a, &b);
    int dec = got.overflows == 1 && got.scale == 512.0 && got.decided == 3 &&
              got.prev_lr == lr[2] && got.bad == 0;
    snprintf(_rows[2], sizeof _rows[2],
             "%s   %d tensors, 3 steps (one NaN): arenas %s; decisions: "
             "%ld overflow, scale %g, %ld decided",
             same == 1 && dec ? "PASS" : "FAIL", np,
             same == 1 ? "bit for bit" : "DIFFER", got.overflows, got.scale,
             got.decided);
    rc = same == 1 && dec;
fail:
    if (rc < 0)
        snprintf(_rows[2], sizeof _rows[2],
                 "FAIL   CUDA or optimizer error (see stderr)");
    _side_close(&a);
    _side_close(&b);
    free(g), free(w2), free(g2), free(args), free(h);
    return rc;
}

/* Every fp32 pattern through tcuda_optim_refresh into fp16 and bf16. */
static int _rounding_row(cudaStream_t st)
{
    enum { B = 1 << 26 };
    float *d_m = NULL;
    uint32_t *hm = NULL;
    uint16_t *d_h = NULL, *d_b = NULL, *hh = NULL, *hb = NULL;
    tcuda_optim *o = NULL;
    long bad16 = 0, badb = 0;
    CK(cudaMalloc((void **)&d_m, (size_t)B * 4));
    CK(cudaMalloc((void **)&d_h, (size_t)B * 2));
    CK(cudaMalloc((void **)&d_b, (size_t)B * 2));
    CK(cudaMallocHost((void **)&hm, (size_t)B * 4));
    CK(cudaMallocHost((void **)&hh, (size_t)B * 2));
    CK(cudaMallocHost((void **)&hb, (size_t)B * 2));
    tcuda_optim_param p[2] = {{d_m, d_h, TENG_F16, d_m, 0, B},
                              {d_m, d_b, TENG_BF16, d_m, 0, B}};
    OK(tcuda_optim_create(p, 2, st, &o));
    for (uint64_t base = 0; base < (1ULL << 32); base += B) {
        for (uint32_t i = 0; i < B; i++)
            hm[i] = (uint32_t)base + i;
        CK(cudaMemcpyAsync(d_m, hm, (size_t)B * 4, cudaMemcpyHostToDevice, st));
        OK(tcuda_optim_refresh(o));
        CK(cudaMemcpyAsync(hh, d_h, (size_t)B * 2, cudaMemcpyDeviceToHost, st));
        CK(cudaMemcpyAsync(hb, d_b, (size_t)B * 2, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        for (uint32_t i = 0; i < B; i++) {
            float x;
            memcpy(&x, &hm[i], sizeof x);
            bad16 += hh[i] != tcuda_f16_rne(x);
            badb += hb[i] != tcuda_bf16_rne(x);
        }
    }
    snprintf(_rows[1], sizeof _rows[1],
             "%s   all 2^32 fp32 patterns: %ld fp16 and %ld bf16 differ",
             bad16 || badb ? "FAIL" : "PASS", bad16, badb);
    tcuda_optim_destroy(o);
    cudaFree(d_m), cudaFree(d_h), cudaFree(d_b);
    cudaFreeHost(hm), cudaFreeHost(hh), cudaFreeHost(hb);
    return !(bad16 || badb);
fail:
    tcuda_optim_destroy(o);
    snprintf(_rows[1], sizeof _rows[1],
             "FAIL   CUDA or optimizer error (see "
             "stderr)");
    return -1;
}

int main(void)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no usable CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 77;
    }
    _net n = {0};
    if (_resnet(&n)) {
        fprintf(stderr, "optim_check: ResNet-50 tensors: %s\n",
                torus_error_msg());
        return 1;
    }
    float *d_w = NULL, *d_g = NULL, *d_v = NULL;
    uint16_t *d_h = NULL;
    cudaStream_t st = NULL;
    tcuda_optim_param *p = calloc(n.np, sizeof *p);
    int lars = -1, round = -1, dstep = -1;
    CK(cudaStreamCreate(&st));
    CK(cudaMalloc((void **)&d_w, n.total * 4));
    CK(cudaMalloc((void **)&d_g, n.total * 4));
    CK(cudaMalloc((void **)&d_v, n.total * 4));
    CK(cudaMalloc((void **)&d_h, n.total * 2));
    CK(cudaMemcpy(d_w, n.w, n.total * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_g, n.g, n.total * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_v, 0, n.total * 4));
    lars = _lars_row(&n, st, p, d_w, d_g, d_v, d_h);
    cudaFree(d_w), cudaFree(d_g), cudaFree(d_v), cudaFree(d_h);
    dstep = _dstep_row(&n, st, p);
    round = _rounding_row(st);
fail:
    if (lars < 0 && !_rows[0][0])
        snprintf(_rows[0], sizeof _rows[0], "FAIL   CUDA error (see stderr)");
    if (round < 0 && !_rows[1][0])
        snprintf(_rows[1], sizeof _rows[1], "FAIL   not run");
    printf("%-28s %s\n", "LARS/SGD kernel vs host", _rows[0]);
    printf("%-28s %s\n", "fp16 working copy rounding", _rows[1]);
    if (!_rows[2][0])
        snprintf(_rows[2], sizeof _rows[2], "FAIL   not run");
    printf("%-28s %s\n", "device step vs eager kernels", _rows[2]);
    return lars == 1 && round == 1 && dstep == 1 ? 0 : 1;
}
