/* bench_train.c: torus training throughput on synthetic data.
 *
 * Runs whole training steps (forward, backward, momentum-SGD update) of a
 * model at a fixed batch on one process and prints one line:
 *   torus model=resnet50 batch=32 size=224 threads=2 steps=5
 *         images_per_s=... step_s_median=... peak_rss_mb=...
 * --profile adds a per-layer-kind time table (it syncs after every layer).
 * Used by run_bench.sh for the comparison with PyTorch.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/torus_error.h"
#include "trainer/backends/tbackends.h"
#include "trainer/engine/graph.h"
#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int _cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void _usage(FILE *f)
{
    fprintf(f, "usage: bench_train [--model NAME] [--batch N] [--size PX]\n"
               "                   [--threads N] [--warmup N] [--steps N] "
               "[--profile]\n"
               "Times training steps of a model on synthetic data (defaults:\n"
               "resnet50, batch 32, 224 px, 2 threads, 2 warmup + 5 timed).\n");
}

static void _profile(const teng_net *net, const double *prof, int steps)
{
    static const char *kinds[] = {"input",   "conv",    "bn",  "relu",
                                  "maxpool", "avgpool", "gap", "fc",
                                  "add",     "dropout", "xent"};
    double f[TENG_L_NKINDS] = {0}, b[TENG_L_NKINDS] = {0}, tot = 0;
    for (int i = 0; i < net->nl; i++) {
        f[net->l[i].kind] += prof[2 * i] / steps;
        b[net->l[i].kind] += prof[2 * i + 1] / steps;
        tot += (prof[2 * i] + prof[2 * i + 1]) / steps;
    }
    printf("%-8s %10s %10s %6s\n", "layer", "fwd ms", "bwd ms", "share");
    for (int k = 0; k < TENG_L_NKINDS; k++)
        if (f[k] + b[k] > 0)
            printf("%-8s %10.1f %10.1f %5.1f%%\n", kinds[k], 1e3 * f[k],
                   1e3 * b[k], 100 * (f[k] + b[k]) / tot);
}

int main(int argc, char **argv)
{
    const char *model = "resnet50";
    int batch = 32, size = 224, threads = 2, warmup = 2, steps = 5, prof = 0;
    static const struct option opts[] = {
        {"model", 1, 0, 'm'},   {"batch", 1, 0, 'b'},  {"size", 1, 0, 's'},
        {"threads", 1, 0, 't'}, {"warmup", 1, 0, 'w'}, {"steps", 1, 0, 'n'},
        {"profile", 0, 0, 'p'}, {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (c) {
        case 'm':
            model = optarg;
            break;
        case 'b':
            batch = atoi(optarg);
            break;
        case 's':
            size = atoi(optarg);
            break;
        case 't':
            threads = atoi(optarg);
            break;
        case 'w':
            warmup = atoi(optarg);
            break;
        case 'n':
            steps = atoi(optarg);
            break;
        case 'p':
            prof = 1;
            break;
        case 'h':
            _usage(stdout);
            return 0;
        default:
            _usage(stderr);
            return 2;
        }
    }
    tmodel_kind kind;
    if (tmodel_parse(model, &kind) || batch < 1 || steps < 1 || warmup < 0) {
        _usage(stderr);
        return 2;
    }
    tmodel_spec spec = tmodel_defaults(kind);
    spec.image_size = size;
    teng_backend_opts bo = {.threads = threads};
    teng_backend *bk;
    teng_net net;
    topt_sgd opt;
    topt_config oc;
    if (tbackends_open("auto", &bo, &bk)) {
        fprintf(stderr, "bench_train: %s\n", torus_error_msg());
        return 1;
    }
    teng_net_init(&net);
    topt_config_defaults(&oc);
    if (tmodel_build(&net, &spec) < 0 || teng_net_compile(&net, bk, batch) ||
        tmodel_init(&net, 1) || topt_sgd_init(&opt, &net, &oc)) {
        fprintf(stderr, "bench_train: %s\n", torus_error_msg());
        return 1;
    }
    /* Synthetic data, written once: the timed loop has no data cost. */
    size_t nx = teng_tensor_count(&net, net.input);
    float *x = malloc(nx * sizeof(float));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)batch);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)((i * 2654435761u) >> 16 & 255) / 128.f - 1.f;
    for (int i = 0; i < batch; i++)
        y[i] = i % spec.classes;
    if (teng_net_set_input(&net, x) || teng_net_set_labels(&net, y)) {
        fprintf(stderr, "bench_train: %s\n", torus_error_msg());
        return 1;
    }
    double *t = calloc((size_t)steps, sizeof(double));
    double *pr = calloc(2 * (size_t)net.nl, sizeof(double));
    for (int s = 0; s < warmup + steps; s++) {
        if (prof && s == warmup)
            net.prof = pr;
        double t0 = _now();
        if (teng_net_forward(&net, 1) || teng_net_backward(&net) ||
            topt_sgd_step(&opt, 0.01) || teng_net_sync(&net)) {
            fprintf(stderr, "bench_train: %s\n", torus_error_msg());
            return 1;
        }
        if (s >= warmup)
            t[s - warmup] = _now() - t0;
    }
    double total = 0;
    for (int s = 0; s < steps; s++)
        total += t[s];
    qsort(t, (size_t)steps, sizeof(double), _cmp);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("torus model=%s batch=%d size=%d threads=%d steps=%d "
           "images_per_s=%.2f step_s_median=%.3f peak_rss_mb=%.0f "
           "loss=%.4f\n",
           model, batch, size, threads, steps, batch * steps / total,
           t[steps / 2], ru.ru_maxrss / 1024.0, teng_net_loss(&net));
    if (prof)
        _profile(&net, pr, steps);
    fprintf(stderr,
            "arenas MB: params %.0f (x3 with grads and momentum), "
            "activations and their gradients %.0f, scratch %.0f\n",
            net.params_bytes / 1e6, net.acts_bytes / 1e6,
            net.scratch_cap / 1e6);
    topt_sgd_free(&opt);
    teng_net_free(&net);
    teng_backend_close(bk);
    free(x), free(y), free(t), free(pr);
    return 0;
}
