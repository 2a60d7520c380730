/* options.c: torus-train options: one table drives the command line, the
 * config file and --help, so the three cannot drift apart. */
#include "trainer/train/ttrain_options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_share.h"
#include "config.h"
#include "trainer/backends/tbackends.h"
#include "trainer/optim/topt_loss_scale.h"

typedef enum { _INT, _LONG, _DBL, _FLT, _STR, _FLAG, _NOFLAG, _SPECIAL } _type;

typedef struct {
    const char *name;
    _type type;
    size_t off;      /* into ttrain_config */
    size_t size;     /* _STR buffer size */
    const char *arg; /* metavariable for --help */
    const char *help;
} _opt;

#define _O(f) offsetof(ttrain_config, f), sizeof(((ttrain_config *)0)->f)
#define _S(f) offsetof(ttrain_config, f), 0

/* Settings that need parsing beyond a number go through _special(). */
static const _opt _opts[] = {
    {"model", _SPECIAL, 0, 0, "NAME",
     "resnet50 (v1.5), resnet18, cifar-resnet, alexnet-bn or tiny-cnn "
     "(BN-free, for checks) [resnet50]"},
    {"depth", _INT, _S(model.depth), "N",
     "cifar-resnet depth 6n+2: 20, 32, 44, 56, 110 [20]"},
    {"image-size", _INT, _S(model.image_size), "PX",
     "square input size [224; cifar-resnet 28]"},
    {"channels", _INT, _S(model.in_channels), "N",
     "input channels [3; cifar-resnet 1]"},
    {"classes", _INT, _S(model.classes), "N",
     "number of classes [1000; cifar-resnet 10]"},
    {"label-smoothing", _FLT, _S(model.label_smoothing), "S",
     "label smoothing in [0, 1) [0]"},
    {"dropout", _FLT, _S(model.dropout), "P", "alexnet-bn fc dropout [0.5]"},
    {"synthetic", _FLAG, _S(synthetic), NULL,
     "train on synthetic data (benchmarks); no dataset needed"},
    {"algo", _STR, _O(algo), "NAME",
     "gradient all-reduce across ranks: flat, ring, hier, hier-rs, torus2d "
     "or hybrid (cheapest per bucket by the cost model) [hybrid]"},
    {"bucket-kb", _SPECIAL, 0, 0, "KB|auto",
     "gradient fusion bucket size in KiB; smaller buckets start reducing "
     "earlier in backward. auto: where sizes from 256 KiB to 64 MiB cut "
     "the gradients differently, probe the links, let the cost model "
     "propose the smallest power of two in that range whose buckets it "
     "prices within 10% of one all-reduce of all gradients (each bucket "
     "also paying what a timed 256 KiB all-reduce took beyond the model), "
     "then time that and 1, 4 and 16 MiB on the first 64 MiB of gradients "
     "and keep the smallest within 0.5% of the fastest (printed with the "
     "reason); elsewhere 4096. On --resume, auto takes the size the "
     "checkpoint records; device gradients take tcomm's 4096. Give a size "
     "when two runs must match bit for bit: auto may keep another, which "
     "rounds the sums differently. 0: tcomm's 4096 [auto]"},
    {"wire", _STR, _O(wire), "fp16|bf16|fp32",
     "precision of the gradients on the wire: each rank's gradient (already "
     "divided by the global batch) is cast to it, sums are formed in fp32 "
     "and rounded back to it, and inf/nan in the sums skip the step [fp16]"},
    {"loss-scale", _STR, _O(loss_scale), "MODE",
     "loss scaling: off, static:S (S in [1, 2^24]) or dynamic[:INIT[:N]] "
     "(start at INIT [65536], halve and skip the step on inf/nan, double "
     "after N clean steps [2000]); auto: dynamic when the backend computes "
     "in fp16, off in fp32 [auto]"},
    {"input", _STR, _O(input), "auto|float|u8",
     "training batches: float (normalised and mirrored by the decode "
     "threads) or u8 (8-bit, 4x smaller; the backend normalises and "
     "mirrors them: on a GPU a copy stream moves the next batch while the "
     "step runs and a kernel does the maths; the same values bit for bit); "
     "with --synthetic, u8 serves random 8-bit images (3 channels) through "
     "that same path; auto: u8 on a GPU backend (with --synthetic, for "
     "3-channel models) [auto]"},
    {"decode-threads", _INT, _S(decode_threads), "N",
     "threads decoding --data's training images per rank; auto (0): 1 on a "
     "CPU backend (the cores compute), on a GPU backend the cores this "
     "process may use less 2 [0]"},
    {"data", _STR, _O(data), "PATH",
     "torus-pack dataset directory (train and test splits); sets "
     "--dataset-size"},
    {"dataset-size", _LONG, _S(sched.dataset_size), "N",
     "training samples per epoch [1281167; synthetic: as given]"},
    {"batch", _SPECIAL, 0, 0, "B|E:B,...",
     "global batch, or a batch schedule of epoch:batch stages, e.g. "
     "0:256,30:1024 (Sony), at least one sample per rank; with M ranks "
     "each takes B/M, rounded down or up [256]"},
    {"epochs", _INT, _S(sched.epochs), "N", "training epochs [90]"},
    {"lr", _DBL, _S(sched.base_lr), "LR",
     "base learning rate at the reference batch [0.1]"},
    {"ref-batch", _INT, _S(sched.ref_batch), "N",
     "reference batch of the linear scaling rule [256]"},
    {"warmup-epochs", _DBL, _S(sched.warmup_epochs), "E",
     "linear warmup length in epochs [5, or half of --epochs when less]"},
    {"warmup-start-lr", _DBL, _S(sched.warmup_start_lr), "LR",
     "LR at step 0 of warmup [the base LR, or the peak if lower]"},
    {"decay", _SPECIAL, 0, 0, "KIND",
     "poly (power 2, MLPerf LARS), step, cosine or none [step]"},
    {"poly-power", _DBL, _S(sched.poly_power), "P", "poly decay power [2]"},
    {"end-lr", _DBL, _S(sched.end_lr), "LR", "poly/cosine final LR [0]"},
    {"milestones", _SPECIAL, 0, 0, "E,E,...", "step decay epochs [30,60,80]"},
    {"step-gamma", _DBL, _S(sched.step_gamma), "G", "step decay factor [0.1]"},
    {"momentum", _DBL, _S(opt.momentum), "M", "SGD momentum [0.9]"},
    {"weight-decay", _DBL, _S(opt.weight_decay), "WD",
     "weight decay, added to the gradient as WD*w [1e-4]"},
    {"lars", _FLAG, _S(opt.lars), NULL, "layer-wise adaptive rate scaling"},
    {"lars-eta", _DBL, _S(opt.lars_eta), "ETA",
     "LARS trust coefficient [0.001]"},
    {"lars-eps", _DBL, _S(opt.lars_eps), "EPS", "LARS epsilon [1e-9]"},
    {"no-exclude-bn-bias", _NOFLAG, _S(opt.exclude_bn_bias), NULL,
     "apply LARS and weight decay to bias and BN parameters too"},
    {"no-momentum-correction", _NOFLAG, _S(opt.momentum_correction), NULL,
     "do not rescale momentum when the LR changes"},
    {"backend", _STR, _O(backend), "NAME",
     "compute backend: dnnl (alias cpu: oneDNN), cuda (alias gpu: cuDNN "
     "FP32), cuda-fp16 (cuDNN NHWC fp16) or auto (cuda when its module "
     "loads and sees a GPU, else dnnl; the banner says why, and a rank "
     "that Slurm granted GPUs but auto cannot use them stops naming the "
     "reason). The cuda backends are the module "
     "torus_cuda.so (package torus-cuda), loaded from TORUS_BACKEND_PATH "
     "or the package's library folder; torus-train itself links no CUDA "
     "library. If the module, the NVIDIA driver, a CUDA library "
     "(libcudart, libcublas, libcudnn.so.9, libnccl.so.2) or its version "
     "is missing, --backend cuda fails naming it [auto]"},
    {"threads", _INT, _S(threads), "N", "compute threads per rank [2]"},
    {"tune-cache", _STR, _O(tune_cache), "FILE",
     "cuda backends: the file of measured convolution algorithms, keyed by "
     "GPU model, SM count, cuDNN version, shape, data type and layout; "
     "read at start, written when a shape was measured; a damaged, "
     "foreign or stale file or entry is said and measured again; none: "
     "no file [$XDG_CACHE_HOME/torus/conv-algos, else "
     "~/.cache/torus/conv-algos]"},
    {"seed", _SPECIAL, 0, 0, "N", "random seed for init and data [1]"},
    {"max-steps", _LONG, _S(max_steps), "N", "stop after N steps [0: all]"},
    {"target-top1", _DBL, _S(target_top1), "PCT",
     "stop once the test top-1 reaches PCT percent (needs --data); the "
     "step, the time and a \"target_top1\" metrics record say when [0: off]"},
    {"eval-every", _LONG, _S(eval_every), "N",
     "also evaluate the test split every N global steps, so --target-top1 "
     "is seen within N steps, not at the end of an epoch [0: per epoch]"},
    {"print-every", _INT, _S(print_every), "N",
     "steps between progress lines [20]"},
    {"metrics", _STR, _O(metrics), "FILE",
     "append JSON-lines metrics here; a run resumed from a checkpoint "
     "first drops FILE's records past its global step (trained again) "
     "and a last line that a crash cut short, so each step is recorded "
     "once"},
    {"trace", _STR, _O(trace), "FILE",
     "write a timeline of every step to FILE as Chrome trace-event JSON "
     "(Perfetto, chrome://tracing; torus-plot --trace draws it): per rank "
     "the data wait, forward, backward by layer group, each bucket's "
     "all-reduce (algorithm, bytes, wire), the exchange wait, the update "
     "and checkpoints; written by rank 0 at the end [off]"},
    {"checkpoint-dir", _STR, _O(ckpt_dir), "DIR",
     "write HDF5 checkpoints here (atomically; at the end, every "
     "--checkpoint-every steps, and on SIGUSR1/SIGTERM)"},
    {"checkpoint-every", _LONG, _S(ckpt_every), "N",
     "steps between checkpoints [0: only at the end and on a signal]"},
    {"keep", _INT, _S(keep), "K",
     "newest checkpoints of this run to keep; other runs' files in the "
     "directory are never touched [3]"},
    {"checkpoint-timeout", _DBL, _S(ckpt_timeout), "S",
     "seconds the other ranks wait for rank 0 to write a checkpoint (a slow "
     "shared file system); they keep exchanging heartbeats meanwhile, so a "
     "lost rank is still noticed within --comm-timeout [600]"},
    {"comm-timeout", _DBL, _S(comm_timeout), "S",
     "seconds without progress in a collective before a peer counts as "
     "lost [0: TCOMM_TIMEOUT if set, else 30]"},
    {"resume", _FLAG, _S(resume), NULL,
     "continue the run whose checkpoint in --checkpoint-dir was written "
     "last, from its newest checkpoint that loads (falling back to older "
     "ones with a warning), on every rank; refused with the differences "
     "when the model, global batch schedule, training data or wire "
     "differ (the number of ranks may change: every step trains on the "
     "uninterrupted run's global batch, each sample once per epoch); start "
     "afresh if there is none"},
    {"eval-only", _FLAG, _S(eval_only), NULL,
     "evaluate the newest checkpoint in --checkpoint-dir on the test split "
     "of --data (top-1, top-5, loss), then exit; distributed like "
     "training"},
    {"max-nonfinite", _INT, _S(max_nonfinite), "N",
     "steps in a row whose summed gradients hold inf/nan that are skipped "
     "(no update) before the run stops as diverged [3]"},
    {"diverge-loss", _DBL, _S(diverge_loss), "X",
     "stop the run as diverged (exit 1, a \"diverged\" metrics record, "
     "as for --max-nonfinite) once the training loss is above X at "
     "--diverge-points progress points in a row: a loss that explodes far "
     "above its start has diverged even while it stays finite (such a run "
     "can sit at chance for its whole budget). The loss is the global "
     "batch's as the progress lines print it (the mean over the steps "
     "since the last line, every --print-every steps and at the end of an "
     "epoch), so the rule acts there, on the host and the device update "
     "paths alike. Off unless given: the right X depends on the model's "
     "loss (ln of the classes at the start, more with label smoothing), "
     "and a run far above it may still recover as its LR decays, so pick "
     "X well above what a healthy run shows, e.g. 10 ln(classes) [0: off]"},
    {"diverge-points", _INT, _S(diverge_points), "N",
     "progress points in a row with the loss above --diverge-loss that "
     "stop the run; more than 1 lets one noisy window pass [3]"},
    {"dry-run", _FLAG, _S(dry_run), NULL,
     "print the resolved configuration and schedule, then exit; with a "
     "cuda backend also the plan it would run (each BN's cuDNN call and "
     "fused ops, how convolution algorithms are chosen), no GPU needed"},
    {"verbose", _FLAG, _S(verbose), NULL,
     "print the network and backend details, and why --bucket-kb auto "
     "chose its size (the trial's times, the cost model's numbers)"},
    {"config", _SPECIAL, 0, 0, "FILE",
     "read settings from FILE first (key = value, keys as the long options)"},
};
#define _NOPTS (int)(sizeof(_opts) / sizeof(_opts[0]))

void ttrain_config_defaults(ttrain_config *c)
{
    memset(c, 0, sizeof(*c));
    c->model = tmodel_defaults(TMODEL_RESNET50);
    topt_schedule_defaults(&c->sched);
    /* Not given: 5 epochs, or half of a shorter run (_validate_schedule),
     * so that --epochs alone never fails on the default. */
    c->sched.warmup_epochs = NAN;
    topt_config_defaults(&c->opt);
    snprintf(c->backend, sizeof(c->backend), "auto");
    snprintf(c->algo, sizeof(c->algo), "hybrid");
    snprintf(c->wire, sizeof(c->wire), "fp16");
    snprintf(c->loss_scale, sizeof(c->loss_scale), "auto");
    snprintf(c->input, sizeof(c->input), "auto");
    c->bucket_kb = -1; /* auto */
    c->threads = 2;
    c->world = 1;
    c->seed = 1;
    c->print_every = 20;
    c->keep = 3;
    c->max_nonfinite = 3;
    c->diverge_points = 3;
    c->ckpt_timeout = 600;
}

/* The setters by type: each parses v into field, or records what is wrong
 * with it at where ("--name" or "FILE:LINE") and returns
 * TTRAIN_EXIT_USAGE. The caller has cleared errno. */
static int _set_integer(void *field, _type type, const char *v,
                        const char *where)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno ||
        (type == _INT && (x < -2147483647L || x > 2147483647L))) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE, "%s: '%s' is not an integer",
                                where, v);
    }
    if (type == _INT)
        *(int *)field = (int)x;
    else
        *(long *)field = x;
    return 0;
}

static int _set_real(void *field, _type type, const char *v, const char *where)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x)) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE, "%s: '%s' is not a number",
                                where, v);
    }
    if (type == _FLT)
        *(float *)field = (float)x;
    else
        *(double *)field = x;
    return 0;
}

static int _set_string(void *field, size_t size, const char *v,
                       const char *where)
{
    if (strlen(v) >= size) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "%s: value longer than %zu characters", where,
                                size - 1);
    }
    snprintf(field, size, "%s", v);
    return 0;
}

/* A flag given alone (v NULL) is on; _NOFLAG stores the opposite. */
static int _set_flag(void *field, _type type, const char *v, const char *where)
{
    int on = !v || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "true");
    int off = v && (!strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "false"));
    if (!on && !off) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE, "%s: '%s' is not yes or no",
                                where, v);
    }
    *(int *)field = type == _FLAG ? on : !on;
    return 0;
}

/* The _SPECIAL settings, one parser each (see _specials). */
static int _set_model(ttrain_config *c, const char *v, const char *where)
{
    tmodel_kind k;
    if (tmodel_parse(v, &k)) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "%s: unknown model '%s' (resnet50, "
                                "resnet18, cifar-resnet, alexnet-bn, tiny-cnn)",
                                where, v);
    }
    /* A model brings its own defaults for what was not set yet. */
    tmodel_spec d = tmodel_defaults(k), old = tmodel_defaults(c->model.kind);
    tmodel_spec *m = &c->model;
    m->kind = k;
    if (m->in_channels == old.in_channels)
        m->in_channels = d.in_channels;
    if (m->image_size == old.image_size)
        m->image_size = d.image_size;
    if (m->classes == old.classes)
        m->classes = d.classes;
    if (m->depth == old.depth)
        m->depth = d.depth;
    if (m->dropout == old.dropout)
        m->dropout = d.dropout;
    return 0;
}

static int _set_batch(ttrain_config *c, const char *v, const char *where)
{
    if (topt_stages_parse(v, &c->sched)) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE, "%s: %s", where,
                                torus_error_msg());
    }
    return 0;
}

static int _set_decay(ttrain_config *c, const char *v, const char *where)
{
    if (topt_decay_parse(v, &c->sched.decay)) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "%s: unknown decay '%s' (poly, step, "
                                "cosine, none)",
                                where, v);
    }
    return 0;
}

static int _set_milestones(ttrain_config *c, const char *v, const char *where)
{
    const char *p = v;
    char *end;
    int n = 0;
    while (*p) {
        double e = strtod(p, &end);
        if (end == p || (*end && *end != ',') || n == TOPT_MAX_MILESTONES) {
            return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                    "%s: '%s' is not a list of at "
                                    "most %d epochs like 30,60,80",
                                    where, v, TOPT_MAX_MILESTONES);
        }
        c->sched.milestones[n++] = e;
        p = *end ? end + 1 : end;
    }
    c->sched.nmilestones = n;
    return 0;
}

/* --bucket-kb: KiB, or auto (-1: chosen from the links at start-up). */
static int _set_bucket_kb(ttrain_config *c, const char *v, const char *where)
{
    if (!strcmp(v, "auto")) {
        c->bucket_kb = -1;
        return 0;
    }
    return _set_integer(&c->bucket_kb, _INT, v, where);
}

static int _set_seed(ttrain_config *c, const char *v, const char *where)
{
    char *end;
    unsigned long long s = strtoull(v, &end, 10);
    if (end == v || *end || errno || *v == '-') {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "%s: '%s' is not a non-negative "
                                "integer",
                                where, v);
    }
    c->seed = s;
    return 0;
}

/* --config is not here: the caller reads the file. */
static const struct {
    const char *name;
    int (*set)(ttrain_config *c, const char *v, const char *where);
} _specials[] = {
    {"model", _set_model}, {"batch", _set_batch},
    {"decay", _set_decay}, {"milestones", _set_milestones},
    {"seed", _set_seed},   {"bucket-kb", _set_bucket_kb},
};

/* Parses value for option o into c; where is "--name" or "FILE:LINE". */
static int _set(ttrain_config *c, const _opt *o, const char *v,
                const char *where)
{
    void *field = (char *)c + o->off;
    errno = 0;
    switch (o->type) {
    case _INT:
    case _LONG:
        return _set_integer(field, o->type, v, where);
    case _DBL:
    case _FLT:
        return _set_real(field, o->type, v, where);
    case _STR:
        return _set_string(field, o->size, v, where);
    case _FLAG:
    case _NOFLAG:
        return _set_flag(field, o->type, v, where);
    case _SPECIAL:
        break;
    }
    for (size_t i = 0; i < sizeof(_specials) / sizeof(_specials[0]); i++)
        if (!strcmp(o->name, _specials[i].name))
            return _specials[i].set(c, v, where);
    return 0;
}

static const _opt *_find(const char *name)
{
    for (int i = 0; i < _NOPTS; i++)
        if (!strcmp(_opts[i].name, name))
            return &_opts[i];
    return NULL;
}

static char *_trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    char *e = s + strlen(s);
    while (e > s &&
           (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
        *--e = '\0';
    return s;
}

/* key = value lines; '#' starts a comment; keys are long option names. */
static int _read_file(ttrain_config *c, const char *path)
{
    FILE *f = fopen(path, "r");
    char line[1024], where[600];
    int ln = 0, rc = 0;
    if (!f) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--config: cannot open '%s': %s", path,
                                strerror(errno));
    }
    while (!rc && fgets(line, sizeof(line), f)) {
        ln++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = _trim(line);
        if (!*s)
            continue;
        snprintf(where, sizeof(where), "%s:%d", path, ln);
        char *eq = strchr(s, '='), *val = NULL;
        if (eq) {
            *eq = '\0';
            val = _trim(eq + 1);
        }
        char *key = _trim(s);
        const _opt *o = _find(key);
        if (!o || !strcmp(key, "config")) {
            rc = TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                  "%s: unknown setting '%s' (see "
                                  "--help)",
                                  where, key);
        } else if (!val && o->type != _FLAG && o->type != _NOFLAG) {
            rc = TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE, "%s: '%s' needs '= VALUE'",
                                  where, key);
        } else {
            rc = _set(c, o, val, where);
        }
    }
    fclose(f);
    return rc;
}

/* --comm-timeout, else TCOMM_TIMEOUT (which libtcomm also reads), else
 * 30 s; --checkpoint-timeout. Returns 0 or TTRAIN_EXIT_USAGE. */
static int _resolve_timeouts(ttrain_config *c)
{
    const char *env = getenv("TCOMM_TIMEOUT");
    c->comm_timeout_from = "--comm-timeout";
    if (c->comm_timeout == 0 && env && *env) {
        char *end;
        errno = 0;
        c->comm_timeout = strtod(env, &end);
        if (end == env || *end || errno || !(c->comm_timeout > 0)) {
            return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                    "TCOMM_TIMEOUT: '%s' is not a positive "
                                    "number of seconds",
                                    env);
        }
        c->comm_timeout_from = "TCOMM_TIMEOUT";
    } else if (c->comm_timeout == 0) {
        c->comm_timeout = 30;
        c->comm_timeout_from = "default";
    }
    if (!(c->comm_timeout > 0 && c->comm_timeout <= 86400)) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--comm-timeout: %g is not in (0, 86400]",
                                c->comm_timeout);
    }
    if (!(c->ckpt_timeout > 0 && c->ckpt_timeout <= 7 * 86400)) {
        return TORUS_FAIL_USAGE(
            TTRAIN_EXIT_USAGE, "--checkpoint-timeout: %g is not in (0, 604800]",
            c->ckpt_timeout);
    }
    return 0;
}

int ttrain_config_parse(ttrain_config *c, int argc, char **argv)
{
    struct option lo[_NOPTS + 3];
    char where[80];
    int rc;
    for (int i = 0; i < _NOPTS; i++) {
        int flag = _opts[i].type == _FLAG || _opts[i].type == _NOFLAG;
        lo[i] = (struct option){_opts[i].name,
                                flag ? no_argument : required_argument, 0, i};
    }
    lo[_NOPTS] = (struct option){"help", no_argument, 0, 'h'};
    lo[_NOPTS + 1] = (struct option){"version", no_argument, 0, 'V'};
    lo[_NOPTS + 2] = (struct option){0, 0, 0, 0};
    /* Pass 1: --config files, so that the command line overrides them. */
    for (int i = 1; i < argc; i++) {
        const char *path = NULL;
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            path = argv[++i];
        else if (!strncmp(argv[i], "--config=", 9))
            path = argv[i] + 9;
        if (path && (rc = _read_file(c, path)))
            return rc;
    }
    opterr = 0;
    optind = 1;
    for (int ch; (ch = getopt_long(argc, argv, ":hV", lo, NULL)) != -1;) {
        if (ch == 'h')
            return TTRAIN_PARSE_HELP;
        if (ch == 'V')
            return TTRAIN_PARSE_VERSION;
        if (ch == '?' || ch == ':') {
            const char *bad = argv[optind - 1];
            return TORUS_FAIL_USAGE(
                TTRAIN_EXIT_USAGE, "%s '%s' (see --help)",
                ch == ':' ? "missing value for" : "unknown option", bad);
        }
        snprintf(where, sizeof(where), "--%s", _opts[ch].name);
        if ((rc = _set(c, &_opts[ch], optarg, where)))
            return rc;
    }
    if (optind < argc) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "unexpected argument '%s' (see --help)",
                                argv[optind]);
    }
    /* Here, not in validate: the bootstrap needs them first. */
    return _resolve_timeouts(c);
}

/* Phase 1 of validate: where the data comes from, and the model. */
static int _validate_inputs(const ttrain_config *c)
{
    if (c->synthetic && c->data[0]) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--synthetic and --data exclude each "
                                "other");
    }
    if (!c->synthetic && !c->data[0]) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "no training data: give --data PATH or "
                                "--synthetic");
    }
    if (strcmp(c->input, "auto") && strcmp(c->input, "float") &&
        strcmp(c->input, "u8")) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--input: '%s' is not auto, float or u8",
                                c->input);
    }
    if (tmodel_validate(&c->model)) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE, "model: %s",
                                torus_error_msg());
    }
    return 0;
}

/* Phase 2: the schedule, the optimizer and the batch over the ranks. */
static int _validate_schedule(ttrain_config *c)
{
    /* --eval-only trains nothing: the warmup needs no room in the run
     * (the batch still sets the evaluation batch). */
    if (c->eval_only)
        c->sched.warmup_epochs = 0;
    if (isnan(c->sched.warmup_epochs))
        c->sched.warmup_epochs = fmin(5, c->sched.epochs / 2.0);
    if (topt_schedule_validate(&c->sched) || topt_config_validate(&c->opt)) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE, "%s", torus_error_msg());
    }
    /* Any rank count: the shares may be uneven (common/torus_share.h),
     * but every rank needs a sample. */
    for (int i = 0; i < c->sched.nstages; i++)
        if (c->sched.stage[i].global_batch < c->world) {
            return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                    "--batch: global batch %d (epoch %d) "
                                    "is smaller than the %d ranks: every "
                                    "rank needs at least one sample",
                                    c->sched.stage[i].global_batch,
                                    c->sched.stage[i].epoch, c->world);
        }
    return 0;
}

/* Phase 3: how the run executes (threads, buckets, wire, logs). */
static int _validate_runtime(const ttrain_config *c)
{
    if (c->threads < 1 || c->threads > 1024) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--threads: %d is not in 1..1024", c->threads);
    }
    if (c->decode_threads < 0 || c->decode_threads > 256) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--decode-threads: %d is not in 0..256",
                                c->decode_threads);
    }
    if (c->bucket_kb < -1 || c->bucket_kb > TTRAIN_BUCKET_KB_MAX) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--bucket-kb: %d is not in 0..%d (or auto)",
                                c->bucket_kb, TTRAIN_BUCKET_KB_MAX);
    }
    if (strcmp(c->wire, "fp16") && strcmp(c->wire, "bf16") &&
        strcmp(c->wire, "fp32")) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--wire: '%s' is not fp16, bf16 or fp32",
                                c->wire);
    }
    topt_loss_scale_mode lsm;
    topt_loss_scale_config lsc;
    if (topt_loss_scale_parse(c->loss_scale, &lsm, &lsc)) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE, "--loss-scale: %s",
                                torus_error_msg());
    }
    if (c->print_every < 1) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--print-every: %d must be >= 1",
                                c->print_every);
    }
    return 0;
}

/* Phase 4: the rules that stop a run as diverged. */
static int _validate_divergence(const ttrain_config *c)
{
    if (c->max_nonfinite < 0) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--max-nonfinite: %d must be >= 0",
                                c->max_nonfinite);
    }
    if (c->diverge_loss < 0) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--diverge-loss: %g must be > 0 (0: off)",
                                c->diverge_loss);
    }
    if (c->diverge_points < 1 || c->diverge_points > 1000000) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--diverge-points: %d is not in 1..1000000",
                                c->diverge_points);
    }
    return 0;
}

/* Phase 5: checkpoints, resume, the other stopping rules and the backend. */
static int _validate_checkpoints(const ttrain_config *c)
{
    if (c->resume && !c->ckpt_dir[0]) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--resume needs --checkpoint-dir");
    }
    if (c->eval_only && (!c->ckpt_dir[0] || !c->data[0])) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--eval-only needs --checkpoint-dir "
                                "(the checkpoint) and --data (the test split)");
    }
    if (c->ckpt_every < 0 || c->keep < 1) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--checkpoint-every must be >= 0 and "
                                "--keep >= 1");
    }
    if (c->max_steps < 0) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--max-steps: %ld must be >= 0", c->max_steps);
    }
    if (c->eval_every < 0 || !(c->target_top1 >= 0 && c->target_top1 <= 100)) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--eval-every must be >= 0 and "
                                "--target-top1 in 0..100");
    }
    if ((c->target_top1 > 0 || c->eval_every) &&
        (!c->data[0] || c->synthetic)) {
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--target-top1 and --eval-every need "
                                "--data (the test split)");
    }
    if (!tbackends_known(c->backend)) {
        return TORUS_FAIL_USAGE(
            TTRAIN_EXIT_USAGE, "--backend: unknown backend '%s' (auto%s%s)",
            c->backend, *tbackends_list() ? ", " : "", tbackends_list());
    }
    return 0;
}

int ttrain_config_validate(ttrain_config *c)
{
    int rc;
    if ((rc = _validate_inputs(c)) || (rc = _validate_schedule(c)) ||
        (rc = _validate_runtime(c)) || (rc = _validate_divergence(c)) ||
        (rc = _validate_checkpoints(c)))
        return rc;
    return 0;
}

/* Where path would be created: its directory, "." for a bare name
 * (trailing slashes are not a level: "runs/ck/" is made in "runs"). */
static void _parent(const char *path, char *out, size_t len)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *slash = memrchr(path, '/', n);
    if (!slash)
        snprintf(out, len, ".");
    else if (slash == path)
        snprintf(out, len, "/");
    else
        snprintf(out, len, "%.*s", (int)(slash - path), path);
}

/* A path that does not exist yet: its directory must take a new entry. */
static int _creatable(const char *opt, const char *path)
{
    char dir[4096];
    struct stat st;
    _parent(path, dir, sizeof(dir));
    int bad = stat(dir, &st) ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    if (bad)
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--%s: cannot create '%s': '%s': %s", opt, path,
                                dir, strerror(bad));
    if (access(dir, W_OK | X_OK))
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--%s: cannot create '%s' in '%s': %s", opt,
                                path, dir, strerror(errno));
    return 0;
}

/* An output file (appended to or replaced): anything but a directory. */
static int _check_out_file(const char *opt, const char *path)
{
    struct stat st;
    if (!path[0])
        return 0;
    if (stat(path, &st))
        return errno == ENOENT
                   ? _creatable(opt, path)
                   : TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE, "--%s: '%s': %s", opt,
                                      path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--%s: '%s' is a directory, not a file", opt,
                                path);
    if (access(path, W_OK))
        return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                "--%s: cannot write '%s': %s", opt, path,
                                strerror(errno));
    return 0;
}

int ttrain_config_check_paths(const ttrain_config *c, int rank)
{
    const char *d = c->ckpt_dir;
    struct stat st;
    int rc;
    if (d[0] && stat(d, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                    "--checkpoint-dir: '%s' is not a "
                                    "directory",
                                    d);
        if (!c->eval_only && access(d, W_OK | X_OK))
            return TORUS_FAIL_USAGE(TTRAIN_EXIT_USAGE,
                                    "--checkpoint-dir: cannot write in "
                                    "'%s': %s",
                                    d, strerror(errno));
    } else if (d[0] && !c->eval_only &&
               (rc = _creatable("checkpoint-dir", d))) {
        return rc;
    }
    if (rank != 0) /* only rank 0 writes them */
        return 0;
    if ((rc = _check_out_file("metrics", c->metrics)))
        return rc;
    return _check_out_file("trace", c->trace);
}

/* Prints "    LEFT  help..." with the help wrapped at 79 columns. */
static void _option_help(FILE *f, const char *left, const char *help)
{
    int col = fprintf(f, "    %-28s", left);
    if (col > 32) {
        fprintf(f, "\n%32s", "");
        col = 32;
    }
    while (*help) {
        int n = (int)strcspn(help, " ");
        if (col + 1 + n > 79) {
            fprintf(f, "\n%32s", "");
            col = 32;
        }
        col += fprintf(f, " %.*s", n, help);
        help += n;
        while (*help == ' ')
            help++;
    }
    fputc('\n', f);
}

/* Usage, part 1: name, synopsis and description. */
static void _usage_head(FILE *f)
{
    fprintf(f,
            "NAME\n"
            "    torus-train - train a CNN with the large-batch recipe "
            "(LARS, warmup,\n"
            "    linear scaling, batch-size control) on the torus engine\n"
            "\n"
            "SYNOPSIS\n"
            "    torus-train --synthetic|--data PATH [OPTIONS]\n"
            "    srun --mpi=pmix --kill-on-bad-exit=1 --torus=auto torus-train "
            "...\n"
            "\n"
            "DESCRIPTION\n"
            "    Builds the model, initialises it (He init, zero-gamma on "
            "the last BN of\n"
            "    every residual block), and trains it with momentum SGD: "
            "weight decay is\n"
            "    added to the gradient, LARS scales each tensor's step by "
            "its trust\n"
            "    ratio, the learning rate is base_lr * global_batch / "
            "ref_batch after a\n"
            "    linear warmup and then decays (poly, step or cosine), and "
            "a batch\n"
            "    schedule can grow the global batch mid-run with the "
            "learning rate\n"
            "    following it. The loss is normalised by the global batch.\n"
            "\n"
            "    Launched by srun or mpirun (a PMIx server), every task is a "
            "rank: it\n"
            "    trains on its slice of each epoch (--data) at the global "
            "batch / ranks,\n"
            "    and gradients are summed across ranks in fusion buckets "
            "that start\n"
            "    while backward goes on (--algo). BN running statistics are "
            "averaged\n"
            "    before each evaluation and checkpoint; evaluation is split "
            "over the\n"
            "    ranks; rank 0 prints and writes checkpoints. Without a "
            "PMIx server it\n"
            "    runs as one process.\n"
            "    Settings come from defaults, then --config FILE, then the "
            "command line.\n"
            "\n"
            "OPTIONS\n");
}

/* Usage, part 2: every option from the table, wrapped. */
static void _usage_options(FILE *f)
{
    for (int i = 0; i < _NOPTS; i++) {
        char left[64];
        snprintf(left, sizeof(left), "--%s%s%s", _opts[i].name,
                 _opts[i].arg ? " " : "", _opts[i].arg ? _opts[i].arg : "");
        _option_help(f, left, _opts[i].help);
    }
    _option_help(f, "--help", "print this help and exit");
    _option_help(f, "--version", "print the version and the backends");
}

/* Usage, part 3: examples, signals, environment and exit status. */
static void _usage_examples(FILE *f)
{
    fprintf(
        f,
        "\n"
        "EXAMPLES\n"
        "    Show the plan of the Goyal et al. ImageNet recipe at batch 8192:\n"
        "        torus-train --synthetic --batch 8192 --lr 0.1 --dry-run\n"
        "    LARS with poly decay and a growing batch (Sony), CIFAR-style "
        "ResNet:\n"
        "        torus-train --synthetic --model cifar-resnet --dataset-size "
        "60000 \\\n"
        "            --epochs 10 --batch 0:128,5:256 --lars --decay poly\n"
        "    ResNet-20 on Fashion-MNIST packed into fm/ (torus-pack -o fm\n"
        "    train-images-..., then -s test t10k-images-...), 4 ranks on 2 "
        "nodes,\n"
        "    test accuracy after each epoch:\n"
        "        srun --mpi=pmix -K1 --torus=auto -N2 -n4 torus-train --data "
        "fm "
        "\\\n"
        "            --model cifar-resnet --batch 128 --epochs 10 --lr 0.2 "
        "--threads 1\n"
        "\n"
        "SIGNALS\n"
        "    SIGUSR1 or SIGTERM (sbatch --signal=B:USR1@120): write a\n"
        "    checkpoint at the next step boundary and exit with status 3, so\n"
        "    the job script can requeue; --resume then continues.\n"
        "\n");
}

static void _usage_env(FILE *f)
{
    fprintf(
        f,
        "ENVIRONMENT\n"
        "    TORUS_DIMS, TORUS_COORD, TORUS_GROUP, ... (set by srun --torus)\n"
        "    lay the ranks out on the grid and in groups "
        "(docs/env-contract.md).\n"
        "    TCOMM_TIMEOUT=S: seconds without progress before a peer counts "
        "as\n"
        "    lost (default 30; start-up may take 4x as long, at least 20 s);\n"
        "    the other ranks then name it and the job ends. --comm-timeout\n"
        "    wins over it. While rank 0 writes a checkpoint the others wait\n"
        "    up to --checkpoint-timeout, exchanging heartbeats with it.\n"
        "    TCOMM_SHM=0: no shared memory between the ranks of a node (by\n"
        "    default the gradients live in memory they share, and each bucket\n"
        "    is summed where it lies). More in docs/comm.md.\n"
        "    TORUS_BACKEND_PATH=DIR[:DIR...]: folders searched for the cuda\n"
        "    backend's module torus_cuda.so before LIBDIR/torus.\n"
        "    TCOMM_GPU=auto|nccl|staged: with a cuda backend and several "
        "ranks,\n"
        "    reduce the gradients with NCCL (one GPU per rank) or with MPI\n"
        "    through pinned host memory (ranks sharing a GPU); auto picks.\n");
}

/* The cuda backend's switches, one per fast path (run-gpu turns each off
 * in turn to rank them). */
static void _usage_cuda_env(FILE *f)
{
    fprintf(
        f,
        "    TCUDA_GRAPH=0: on a cuda backend, launch every step's forward,\n"
        "    backward and NCCL exchange as calls (by default they are\n"
        "    recorded once as a CUDA graph and replayed; the start-up line\n"
        "    says whether graphs are on, and why not).\n"
        "    TCUDA_BN_EX=0: in cuda-fp16, run BatchNorm through cuDNN's\n"
        "    legacy calls, a ReLU after it as separate passes (by default\n"
        "    every BN runs cuDNN's Ex calls with the ReLU, or the residual\n"
        "    add and ReLU, inside; --dry-run shows the plan).\n"
        "    TCUDA_FUSE=0: in cuda-fp16, run a block's last BN, residual add\n"
        "    and ReLU as separate calls (by default one Ex call).\n"
        "    TCUDA_PAD_STEM=0: in cuda-fp16, keep the 3-channel input (by\n"
        "    default the first convolution reads it padded to 4 channels of\n"
        "    zeros, so that cuDNN can pick tensor-core kernels).\n"
        "    TCUDA_TUNE=0: on a cuda backend, take each convolution's\n"
        "    algorithms from cuDNN's heuristics (by default each shape is\n"
        "    measured once, cudnnFind*Ex under a 1 GiB workspace, and kept\n"
        "    in --tune-cache, which later runs read).\n"
        "    TCUDA_DETERMINISTIC=1: measure and keep only deterministic\n"
        "    convolution algorithms.\n"
        "    TCUDA_VEC=0: on a cuda backend, run the element-wise kernels\n"
        "    (add, ReLU backward, gradient sums, fp16 casts, the NCCL wire\n"
        "    casts, the loss-scale inf/nan count) one element per thread\n"
        "    and the cross-entropy one row per thread (by default 16 bytes\n"
        "    per access, a warp per row).\n"
        "    The summary of a cuda run ends with one \"fastpath:\" line\n"
        "    counting what the fast paths did (graphs, BN calls,\n"
        "    convolution algorithms measured, cached or heuristic).\n"
        "    TCUDA_DSTEP=0: on a cuda backend, decide skips and the loss\n"
        "    scale on the host after every step (waiting for the device).\n"
        "    By default the device decides them and runs the update (LARS\n"
        "    included) with no host wait; the host reads its state at each\n"
        "    progress line, before a checkpoint and at the end, so warnings\n"
        "    about skipped steps and a --max-nonfinite stop come late, at\n"
        "    the next such read (checkpoints record the true state).\n"
        "\n");
}

static void _usage_exit(FILE *f)
{
    fprintf(
        f,
        "EXIT STATUS\n"
        "    0 success, 1 runtime failure, 2 bad command line or\n"
        "    configuration (an output path that cannot be written is found\n"
        "    before any work), 3 stopped by a signal after a checkpoint "
        "(requeue),\n"
        "    4 the job's start-up did not finish (a rank that never started, "
        "or\n"
        "    connections between nodes that never opened), 5 a rank was "
        "lost:\n"
        "    the comm layer gave up waiting on a peer that died or stalled "
        "(the\n"
        "    rest can resume from the last checkpoint on the nodes still "
        "up).\n");
}

static void _usage_tail(FILE *f)
{
    _usage_examples(f);
    _usage_env(f);
    _usage_cuda_env(f);
    _usage_exit(f);
}

void ttrain_usage(FILE *f)
{
    _usage_head(f);
    _usage_options(f);
    _usage_tail(f);
}

void ttrain_print_plan(const ttrain_config *c, FILE *f)
{
    const topt_schedule *s = &c->sched;
    const topt_config *o = &c->opt;
    fprintf(f, "model          %s", tmodel_name(c->model.kind));
    if (c->model.kind == TMODEL_CIFAR_RESNET)
        fprintf(f, " depth %d", c->model.depth);
    fprintf(f, ", %d x %d x %d input, %d classes, label smoothing %g",
            c->model.in_channels, c->model.image_size, c->model.image_size,
            c->model.classes, c->model.label_smoothing);
    if (c->model.kind == TMODEL_ALEXNET_BN)
        fprintf(f, ", dropout %g", c->model.dropout);
    fprintf(f, "\ndata           %s, %ld samples per epoch\n",
            c->synthetic ? "synthetic" : c->data, s->dataset_size);
    fprintf(f,
            "ranks          %d (all-reduce %s, %s wire), %d threads each, "
            "backend %s, seed %llu\n",
            c->world, c->algo, c->wire, c->threads, c->backend,
            (unsigned long long)c->seed);
    fprintf(f, "loss scale     %s\n", c->loss_scale);
    fprintf(f, "timeouts       comm %g s (%s), checkpoint wait %g s\n",
            c->comm_timeout,
            c->comm_timeout_from ? c->comm_timeout_from : "default",
            c->ckpt_timeout);
    fprintf(f, "optimizer      momentum %g%s,\n               weight decay %g",
            o->momentum,
            o->momentum_correction ? " (corrected on LR change)" : "",
            o->weight_decay);
    if (o->lars)
        fprintf(f, ", LARS eta %g eps %g", o->lars_eta, o->lars_eps);
    fprintf(f, "%s\n",
            o->exclude_bn_bias ? ", bias/BN excluded from wd and LARS"
                               : ", wd and LARS on every tensor");
    fprintf(f,
            "learning rate  base %g at batch %d, warmup %g epochs,\n"
            "               decay %s",
            s->base_lr, s->ref_batch, s->warmup_epochs,
            topt_decay_name(s->decay));
    if (s->decay == TOPT_DECAY_POLY)
        fprintf(f, " (power %g, end %g)", s->poly_power, s->end_lr);
    if (s->decay == TOPT_DECAY_COSINE)
        fprintf(f, " (end %g)", s->end_lr);
    if (s->decay == TOPT_DECAY_STEP) {
        fprintf(f, " (x%g at", s->step_gamma);
        for (int i = 0; i < s->nmilestones; i++)
            fprintf(f, "%s%g", i ? "," : " ", s->milestones[i]);
        fprintf(f, ")");
    }
    fprintf(f, "\n\n%5s %12s %11s %8s %12s %12s\n", "epoch", "global_batch",
            "local_batch", "steps", "lr_start", "lr_end");
    long total = 0;
    for (int e = 0; e < s->epochs; e++) {
        int b = topt_batch_at(s, e);
        long n = topt_steps_in_epoch(s, e);
        total += n;
        int first, lb = torus_share(b, c->world, 0, &first); /* rank 0's */
        fprintf(f, "%5d %12d %11d %8ld %12.6g %12.6g\n", e, b, lb, n,
                topt_lr_at_step(s, e, 0), topt_lr_at_step(s, e, n - 1));
    }
    fprintf(f, "total %ld steps\n", total);
}
