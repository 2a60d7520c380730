/* teng_dump.c: one training step of the real engine, in and out as .npy
 * files, for tests/oracle/oracle-check to compare with PyTorch.
 *
 * Builds a model of trainer/models/ (tmodel_build) on the backend named by
 * --backend (tbackends_open: dnnl, cuda, cuda-fp16, ...), loads its
 * weights, BN running statistics and momentum and one batch from IN, runs
 * one training forward and backward (BN in training mode, softmax
 * cross-entropy with --smoothing, the loss divided by the batch) and one
 * momentum-SGD step (topt_sgd: wd as lambda*w on conv and fc weights only,
 * v = m*v + lr*(g + wd*w), w -= v; no LARS), and writes OUT. With
 * --device-step, on a backend that has it (cuda), the step is the device
 * step torus-train runs there (teng_net_dstep: the update, its skip
 * decision and the loss it records, static loss scale) and loss.npy is
 * the loss that step recorded; elsewhere the host-driven step.
 *   logits.npy     B x classes float32, after the forward
 *   loss.npy       (1,) float64, the batch's mean loss
 *   g/NAME.npy     every param's gradient (divided by --loss-scale)
 *   w/NAME.npy     every param after the step
 *   s/I.npy        BN running statistics I after the forward
 *   params.txt     "NAME KIND COUNT" per param, forward order
 * IN holds x.npy (B x C x H x W float32), y.npy (B int32), w/NAME.npy,
 * v/NAME.npy (the momentum, torus's convention: lr inside) and s/I.npy.
 * NAME is the engine's param name (layer2.0.conv1.w); every array is
 * canonical (OIHW, OI, C), little-endian, C order. .npy, not HDF5: the GPU
 * nodes this runs on have numpy but not always h5py.
 *
 * Exit: 0 done; 1 a file or the engine failed (the message names it); 2
 * bad usage. Files are hostile: every header, shape and size is checked
 * before anything is read into memory sized by it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/torus_error.h"
#include "trainer/backends/tbackends.h"
#include "trainer/engine/graph.h"
#include "trainer/engine/teng.h"
#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"

typedef struct {
    const char *backend, *in, *out;
    tmodel_spec spec;
    int batch, threads;
    double lr, momentum, wd, loss_scale;
    int device_step; /* use the device step where the backend has it */
} _opts;

/* ---- .npy: version 1.0 headers, little-endian, C order ---- */

#define _NPY_MAX_HEADER 4096

/* Reads path, which must hold exactly count elements of descr ('<f4',
 * '<i4') in C order, into dst. */
static int _npy_read(const char *path, const char *descr, size_t count,
                     void *dst)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return TORUS_FAIL(TENG_EINVAL, "%s: %s", path, strerror(errno));
    unsigned char pre[10];
    char hdr[_NPY_MAX_HEADER + 1];
    size_t hl = 0;
    int rc = 0, hsize = 0;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) ||
        pre[6] != 1)
        rc = TORUS_FAIL(TENG_EINVAL, "%s: not a version 1 .npy file", path);
    else if ((hl = pre[8] | (size_t)pre[9] << 8) > _NPY_MAX_HEADER ||
             fread(hdr, 1, hl, f) != hl)
        rc = TORUS_FAIL(TENG_EINVAL, "%s: .npy header of %zu bytes unreadable",
                        path, hl);
    hdr[rc ? 0 : hl] = '\0';
    char want[32];
    snprintf(want, sizeof want, "'descr': '%s'", descr);
    const char *shape = strstr(hdr, "'shape': (");
    size_t n = 1;
    if (!rc && (!strstr(hdr, want) || !strstr(hdr, "'fortran_order': False") ||
                !shape))
        rc = TORUS_FAIL(TENG_EINVAL, "%s: not a C-order %s array", path, descr);
    for (const char *s = shape ? shape + 10 : ""; !rc && *s && *s != ')';) {
        char *end;
        unsigned long long d = strtoull(s, &end, 10);
        if (end == s || d > (1ULL << 32) || (d && n > ((size_t)1 << 40) / d))
            rc = TORUS_FAIL(TENG_EINVAL, "%s: bad shape in its header", path);
        n *= (size_t)d;
        s = end + strspn(end, ", ");
        hsize++;
    }
    if (!rc && (n != count || !hsize))
        rc = TORUS_FAIL(TENG_EINVAL, "%s holds %zu elements, expected %zu",
                        path, n, count);
    if (!rc && (fread(dst, 4, count, f) != count || fgetc(f) != EOF))
        rc = TORUS_FAIL(TENG_EINVAL, "%s: data is not exactly %zu elements",
                        path, count);
    fclose(f);
    return rc;
}

/* Writes n elements of descr (4- or 8-byte) with the given shape. */
static int _npy_write(const char *path, const char *descr, int ndims,
                      const size_t *dims, const void *src)
{
    char shape[128] = "", hdr[256];
    size_t n = 1, len = 0;
    for (int i = 0; i < ndims; i++) {
        len += (size_t)snprintf(shape + len, sizeof shape - len, "%zu,%s",
                                dims[i], i + 1 < ndims ? " " : "");
        n *= dims[i];
    }
    int hl = snprintf(hdr, sizeof hdr,
                      "{'descr': '%s', 'fortran_order': False, "
                      "'shape': (%s), }",
                      descr, shape);
    int pad = 64 - (10 + hl + 1) % 64; /* the data starts 64-aligned */
    memset(hdr + hl, ' ', (size_t)pad % 64);
    hl += pad % 64;
    hdr[hl++] = '\n';
    unsigned char pre[10] = {0x93,
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             (unsigned char)hl,
                             (unsigned char)(hl >> 8)};
    size_t esize = descr[2] == '8' ? 8 : 4;
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(pre, 1, 10, f) == 10 &&
             fwrite(hdr, 1, (size_t)hl, f) == (size_t)hl &&
             fwrite(src, esize, n, f) == n;
    if (f && fclose(f))
        ok = 0;
    return ok ? 0
              : TORUS_FAIL(TENG_EINVAL, "cannot write %s: %s", path,
                           strerror(errno));
}

static int _write_floats(const char *dir, const char *sub, const char *name,
                         size_t n, const float *v)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s.npy", dir, sub, name);
    return _npy_write(path, "<f4", 1, &n, v);
}

/* ---- the step ---- */

/* Weights, momentum and statistics from o->in. */
static int _load_state(const _opts *o, teng_net *net, topt_sgd *opt, float *buf)
{
    char path[4096];
    for (int i = 0; i < teng_net_nparams(net); i++) {
        const teng_param *p = teng_net_param(net, i);
        snprintf(path, sizeof path, "%s/w/%s.npy", o->in, p->name);
        if (_npy_read(path, "<f4", p->count, buf) ||
            teng_param_write(net, i, 0, buf))
            return -1;
        snprintf(path, sizeof path, "%s/v/%s.npy", o->in, p->name);
        if (_npy_read(path, "<f4", p->count, buf) ||
            topt_sgd_state_write(opt, i, buf))
            return -1;
    }
    for (int i = 0; i < teng_net_nstats(net); i++) {
        snprintf(path, sizeof path, "%s/s/%d.npy", o->in, i);
        if (_npy_read(path, "<f4", teng_stats_count(net, i), buf) ||
            teng_stats_write(net, i, buf))
            return -1;
    }
    return 0;
}

/* The batch from o->in onto the net. */
static int _load_batch(const _opts *o, teng_net *net)
{
    const tmodel_spec *s = &o->spec;
    size_t n =
        (size_t)o->batch * s->in_channels * s->image_size * s->image_size;
    float *x = malloc(n * sizeof *x);
    int32_t *y = malloc((size_t)o->batch * sizeof *y);
    char px[4096], py[4096];
    snprintf(px, sizeof px, "%s/x.npy", o->in);
    snprintf(py, sizeof py, "%s/y.npy", o->in);
    int rc = !x || !y ? TORUS_FAIL(TENG_ENOMEM, "out of memory")
             : _npy_read(px, "<f4", n, x) ||
                     _npy_read(py, "<i4", (size_t)o->batch, y) ||
                     teng_net_set_input(net, x)
                 ? -1
                 : 0;
    if (!rc && teng_net_set_labels(net, y))
        rc = torus_error_prefix(-1, "%s", py);
    free(x);
    free(y);
    return rc;
}

/* Forward, the logits and the loss written; backward. */
static int _forward_backward(const _opts *o, teng_net *net, topt_sgd *opt,
                             int dstep, int loss_layer)
{
    int logits = net->l[loss_layer].in[0];
    size_t dims[2] = {(size_t)o->batch, (size_t)o->spec.classes};
    float *z = malloc(dims[0] * dims[1] * sizeof *z);
    char path[4096];
    int rc = !z ? TORUS_FAIL(TENG_ENOMEM, "out of memory") : 0;
    teng_net_set_loss_scale(net, o->loss_scale);
    if (!rc && dstep && topt_sgd_dstep(opt, o->lr, TENG_DSTEP_BEGIN))
        rc = -1;
    if (!rc &&
        (teng_net_forward(net, 1) || teng_tensor_read(net, logits, 0, z)))
        rc = -1;
    snprintf(path, sizeof path, "%s/logits.npy", o->out);
    rc = rc || _npy_write(path, "<f4", 2, dims, z);
    double loss = rc ? 0 : teng_net_loss(net);
    size_t one = 1;
    snprintf(path, sizeof path, "%s/loss.npy", o->out);
    rc = rc || _npy_write(path, "<f8", 1, &one, &loss);
    free(z);
    return rc || teng_net_backward(net) || teng_net_sync(net) ? -1 : 0;
}

/* The device step at a static loss scale, as torus-train opens it. */
static int _device_step_open(const _opts *o, topt_sgd *opt)
{
    teng_dstep_config c = {.min_scale = 1,
                           .max_scale = o->loss_scale,
                           .growth = 2,
                           .backoff = 0.5,
                           .interval = 1000,
                           .dynamic = 0};
    teng_dstep_state s = {.scale = o->loss_scale, .used = o->loss_scale};
    return topt_sgd_dstep_open(opt, &c, &s);
}

/* Queues the rest of the device step, waits for its decision and writes
 * the loss it recorded for the step as loss.npy (over the forward's). */
static int _device_step(const _opts *o, topt_sgd *opt)
{
    teng_dstep_state st;
    if (topt_sgd_dstep(opt, o->lr, TENG_DSTEP_QUEUE | TENG_DSTEP_END) ||
        teng_net_dstep_read(opt->net, &st, 1))
        return -1;
    if (st.bad || st.applied != 1)
        return TORUS_FAIL(TENG_EINVAL,
                          "the device step skipped the step (%llu inf/nan, "
                          "%ld applied)",
                          st.bad, st.applied);
    double loss = st.loss_sum / (double)st.applied;
    size_t one = 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/loss.npy", o->out);
    return _npy_write(path, "<f8", 1, &one, &loss);
}

/* Gradients (unscaled), statistics and params.txt; then the step and the
 * weights after it. */
static int _step_and_dump(const _opts *o, teng_net *net, topt_sgd *opt,
                          int dstep, float *buf)
{
    static const char *kinds[] = {"weight", "bias", "gamma", "beta"};
    char path[4096];
    snprintf(path, sizeof path, "%s/params.txt", o->out);
    FILE *f = fopen(path, "w");
    if (!f)
        return TORUS_FAIL(TENG_EINVAL, "cannot write %s: %s", path,
                          strerror(errno));
    int rc = 0;
    for (int i = 0; i < teng_net_nparams(net) && !rc; i++) {
        const teng_param *p = teng_net_param(net, i);
        fprintf(f, "%s %s %zu\n", p->name, kinds[p->kind], p->count);
        rc = teng_param_read(net, i, 1, buf);
        for (size_t j = 0; j < p->count && !rc; j++)
            buf[j] = (float)(buf[j] / o->loss_scale);
        rc = rc || _write_floats(o->out, "g", p->name, p->count, buf);
    }
    if (fclose(f) && !rc)
        rc = TORUS_FAIL(TENG_EINVAL, "cannot write %s", path);
    for (int i = 0; i < teng_net_nstats(net) && !rc; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        rc = teng_stats_read(net, i, buf) ||
             _write_floats(o->out, "s", name, teng_stats_count(net, i), buf);
    }
    rc = rc || (dstep ? _device_step(o, opt)
                      : topt_sgd_step_scaled(opt, o->lr, o->loss_scale));
    for (int i = 0; i < teng_net_nparams(net) && !rc; i++) {
        const teng_param *p = teng_net_param(net, i);
        rc = teng_param_read(net, i, 0, buf) ||
             _write_floats(o->out, "w", p->name, p->count, buf);
    }
    return rc ? -1 : 0;
}

static int _mkdirs(const char *out)
{
    static const char *sub[] = {"", "/g", "/w", "/s"};
    for (int i = 0; i < 4; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s%s", out, sub[i]);
        if (mkdir(path, 0777) && errno != EEXIST)
            return TORUS_FAIL(TENG_EINVAL, "cannot create %s: %s", path,
                              strerror(errno));
    }
    return 0;
}

static int _run(const _opts *o)
{
    teng_backend_opts bo = {.threads = o->threads};
    teng_backend *bk = NULL;
    teng_net *net = NULL;
    topt_sgd opt = {0};
    topt_config cfg;
    topt_config_defaults(&cfg);
    cfg.momentum = o->momentum;
    cfg.weight_decay = o->wd;
    float *buf = NULL;
    int loss = -1, dstep = 0;
    int rc = _mkdirs(o->out) || tbackends_open(o->backend, &bo, &bk) ||
             teng_net_create(&net) ||
             (loss = tmodel_build(net, &o->spec)) < 0 ||
             teng_net_compile(net, bk, o->batch);
    if (!rc) {
        teng_net_set_global_batch(net, o->batch);
        buf = malloc(teng_net_largest_buffer(net) * sizeof *buf);
        rc = !buf ? TORUS_FAIL(TENG_ENOMEM, "out of memory")
                  : topt_sgd_init(&opt, net, &cfg) ||
                        _load_state(o, net, &opt, buf);
        dstep = !rc && o->device_step && teng_net_dstep_supported(net);
        printf("teng_dump: %s on %s, update by the %s step\n",
               tmodel_name(o->spec.kind), teng_backend_name(bk),
               dstep ? "device" : "host-driven");
        rc = rc || (dstep && _device_step_open(o, &opt)) ||
             _load_batch(o, net) ||
             _forward_backward(o, net, &opt, dstep, loss) ||
             _step_and_dump(o, net, &opt, dstep, buf);
    }
    if (rc)
        fprintf(stderr, "teng_dump: %s\n", torus_error_msg());
    if (opt.velocity)
        topt_sgd_free(&opt);
    free(buf);
    teng_net_destroy(net);
    if (bk)
        teng_backend_close(bk);
    return rc ? 1 : 0;
}

/* ---- the command line ---- */

static int _usage(const char *why)
{
    fprintf(stderr,
            "teng_dump: %s\nusage: teng_dump --model resnet50|resnet18|"
            "cifar-resnet [--depth D] --in DIR --out DIR [--backend NAME] "
            "[--image-size N] [--channels C] [--classes K] [--batch B] "
            "[--lr F] [--momentum F] [--wd F] [--smoothing F] [--loss-scale "
            "F] [--threads N] [--device-step]\n",
            why);
    return 2;
}

/* A number in [lo, hi] from optarg, or -1 after the usage message. */
static int _num(const char *name, double lo, double hi, double *v)
{
    char *end;
    *v = strtod(optarg, &end);
    if (end == optarg || *end || !(*v >= lo && *v <= hi)) {
        fprintf(stderr, "teng_dump: --%s '%s' is not in [%g, %g]\n", name,
                optarg, lo, hi);
        return -1;
    }
    return 0;
}

/* The spec and the step's numbers from v (indexed as _parse's table; < 0:
 * the default). */
static int _apply(_opts *o, tmodel_kind kind, const double *v)
{
#define _OR(i, dflt) (v[i] >= 0 ? v[i] : (dflt))
    o->spec = tmodel_defaults(kind);
    o->spec.image_size = (int)_OR(5, o->spec.image_size);
    o->spec.in_channels = (int)_OR(6, 3);
    o->spec.classes = (int)_OR(7, o->spec.classes);
    o->spec.depth = (int)_OR(1, o->spec.depth);
    o->spec.label_smoothing = (float)_OR(12, 0);
    o->batch = (int)_OR(8, o->batch);
    o->lr = _OR(9, o->lr);
    o->momentum = _OR(10, o->momentum);
    o->wd = _OR(11, o->wd);
    o->loss_scale = _OR(13, o->loss_scale);
    o->threads = (int)_OR(14, 0);
#undef _OR
    if (tmodel_validate(&o->spec))
        return _usage(torus_error_msg());
    if (o->batch < 1 || !(o->lr > 0) || !(o->loss_scale > 0))
        return _usage("--batch, --lr and --loss-scale must be > 0");
    return 0;
}

static int _parse(int argc, char **argv, _opts *o)
{
    static const struct option lo[] = {{"model", 1, 0, 'm'},
                                       {"depth", 1, 0, 'd'},
                                       {"in", 1, 0, 'i'},
                                       {"out", 1, 0, 'o'},
                                       {"backend", 1, 0, 'b'},
                                       {"image-size", 1, 0, 'p'},
                                       {"channels", 1, 0, 'c'},
                                       {"classes", 1, 0, 'k'},
                                       {"batch", 1, 0, 'n'},
                                       {"lr", 1, 0, 'l'},
                                       {"momentum", 1, 0, 'M'},
                                       {"wd", 1, 0, 'w'},
                                       {"smoothing", 1, 0, 's'},
                                       {"loss-scale", 1, 0, 'S'},
                                       {"threads", 1, 0, 't'},
                                       {"device-step", 0, 0, 'D'},
                                       {0, 0, 0, 0}};
    const char *model = NULL;
    double v[16];
    int c;
    for (int i = 0; i < 16; i++)
        v[i] = -1; /* not given */
    *o = (_opts){"dnnl", NULL, NULL, {0}, 2, 0, 0.1, 0.9, 1e-4, 1.0, 0};
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int i = 0;
        for (; lo[i].name && lo[i].val != c; i++)
            ;
        if (!lo[i].name)
            return _usage("unknown option");
        if (c == 'D')
            o->device_step = 1;
        else if (c == 'm' || c == 'i' || c == 'o' || c == 'b') {
            const char **s[] = {&model, &o->in, &o->out, &o->backend};
            *s[c == 'm' ? 0 : c == 'i' ? 1 : c == 'o' ? 2 : 3] = optarg;
        } else if (_num(lo[i].name, 0, 1 << 20, &v[i]))
            return 2;
    }
    tmodel_kind kind;
    if (optind < argc || !model || !o->in || !o->out ||
        tmodel_parse(model, &kind))
        return _usage("--model (a known one), --in and --out are required");
    return _apply(o, kind, v);
}

int main(int argc, char **argv)
{
    _opts o;
    int rc = _parse(argc, argv, &o);
    return rc ? rc : _run(&o);
}
