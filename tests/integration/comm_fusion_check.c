/* comm_fusion_check.c: tensor fusion across ranks, run by comm_fusion.sh.
 * Registers tensors of varied sizes in backward order, produces their
 * gradients one by one with some work in between (a stand-in backward),
 * and checks: every gradient is the correct average; the threaded run and
 * the synchronous run, and a run with scrambled ready order, are bitwise
 * equal; with --mismatch R rank R registers a different layout and seal
 * must fail on every rank with a message naming it. With --shared the
 * gradients live in tcomm_shared_alloc memory (packed end to end, so
 * pieces start at any float), and --shared all|none|any says how many
 * buckets must be reduced in place (all: rows or groups on the node);
 * a NaN on one rank must be counted alike on every rank; with --skew R
 * rank R's gradients sit one float further on, so the offsets differ and
 * every rank must keep to the packed path (--shared none). Every step
 * runs the bucket plan resolved at seal: the cost model is asked nothing
 * between seal and destroy (tcomm_model_calls), with any algorithm. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/bench/testdata.h"
#include "trainer/comm/core/model.h"
#include "trainer/comm/tcomm_fusion.h"

enum { NT = 37 };

static size_t _size(int i)
{
    return (size_t)((i * 7919) % 3001); /* 0 .. 3000 floats, some empty */
}

static void _burn(int i)
{
    volatile double x = 0;
    for (int k = 0; k < 2000 * (i % 4); k++)
        x += k * 0.5;
}

static size_t _in_place, _buckets; /* over the runs' steps */
static unsigned long _priced;      /* cost model calls during steps */

/* Run two steps; returns the number of wrong elements on this rank. */
static double _run(tcomm_t *c, const tcomm_info *in, tcomm_fusion_options *o,
                   int order, int mismatch, float **g, int *layout_failed)
{
    tcomm_fusion_t *f;
    double wrong = 0;
    *layout_failed = 0;
    if (tcomm_fusion_create(c, o, &f))
        return -1;
    for (int i = 0; i < NT; i++) {
        size_t n = _size(i) + (in->rank == mismatch && i == NT / 2);
        tcomm_fusion_add(f, g[i], n, "grad", NULL);
    }
    if (tcomm_fusion_seal(f)) {
        fprintf(stderr, "rank %d: %s\n", in->rank, torus_error_msg());
        *layout_failed = 1;
        tcomm_fusion_destroy(f);
        return 0;
    }
    unsigned long calls = tcomm_model_calls();
    for (int step = 0; step < 2; step++) {
        for (int k = 0; k < NT; k++) {
            int i = order ? (k * 11) % NT : k;
            bench_testdata_fill(g[i], _size(i), in->rank, 77 + (uint64_t)i);
            _burn(i);
            if (tcomm_fusion_ready(f, i)) {
                fprintf(stderr, "rank %d: %s\n", in->rank, torus_error_msg());
                return -1;
            }
        }
        tcomm_fusion_stats st;
        if (tcomm_fusion_finish(f, &st)) {
            fprintf(stderr, "rank %d: %s\n", in->rank, torus_error_msg());
            return -1;
        }
        for (int i = 0; i < NT; i++)
            wrong += (double)bench_testdata_wrong(
                g[i], _size(i), in->size, 77 + (uint64_t)i, 1.0 / in->size,
                o->wire, NULL);
        _in_place += st.in_place;
        _buckets += st.buckets;
    }
    _priced += tcomm_model_calls() - calls;
    tcomm_fusion_destroy(f);
    return wrong;
}

/* One step in which the last rank's tensor 5 holds a NaN: every rank must
 * count exactly one inf/nan. Returns 0 when so. */
static int _nan_step(tcomm_t *c, const tcomm_info *in, tcomm_fusion_options *o,
                     float **g)
{
    tcomm_fusion_t *f;
    tcomm_fusion_stats st;
    if (tcomm_fusion_create(c, o, &f))
        return 1;
    for (int i = 0; i < NT; i++)
        tcomm_fusion_add(f, g[i], _size(i), "grad", NULL);
    if (tcomm_fusion_seal(f))
        return 1;
    for (int i = 0; i < NT; i++) {
        bench_testdata_fill(g[i], _size(i), in->rank, 77 + (uint64_t)i);
        if (i == 5 && in->rank == in->size - 1)
            g[i][17] = NAN;
        tcomm_fusion_ready(f, i);
    }
    int rc = tcomm_fusion_finish(f, &st) != TCOMM_OK || st.nonfinite != 1;
    if (rc)
        fprintf(stderr, "rank %d: NaN step: %zu inf/nan counted (want 1): %s\n",
                in->rank, st.nonfinite, torus_error_msg());
    tcomm_fusion_destroy(f);
    return rc;
}

int main(int argc, char **argv)
{
    tcomm_options opt = {0};
    int mismatch = -1, shared = 0, skew = -1;
    size_t theta = 8192;
    const char *algo = "ring";
    const char *want = "any";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--shared")) {
            shared = 1;
            want = argv[i + 1];
        } else if (!strcmp(argv[i], "--skew"))
            skew = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mismatch"))
            mismatch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--theta"))
            theta = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--algo"))
            algo = argv[i + 1];
        else if (tcomm_options_set(&opt, argv[i], argv[i + 1])) {
            fprintf(stderr, "comm_fusion_check: %s\n", torus_error_msg());
            return 2;
        }
    }
    tcomm_t *c;
    if (tcomm_init(&opt, &c)) {
        fprintf(stderr, "comm_fusion_check: %s\n", torus_error_msg());
        return 1;
    }
    tcomm_info in;
    tcomm_info_get(c, &in);
    float *g[3][NT];
    if (shared) {
        size_t total = 1; /* room for the skew */
        for (int i = 0; i < NT; i++)
            total += 3 * (_size(i) + 1);
        void *base;
        if (tcomm_shared_alloc(c, total * 4, &base)) {
            fprintf(stderr, "comm_fusion_check: %s\n", torus_error_msg());
            return 1;
        }
        float *p = (float *)base + (in.rank == skew);
        for (int v = 0; v < 3; v++)
            for (int i = 0; i < NT; i++) {
                g[v][i] = p;
                p += _size(i) + 1;
            }
    } else {
        for (int v = 0; v < 3; v++)
            for (int i = 0; i < NT; i++)
                g[v][i] = malloc((_size(i) + 1) * 4);
    }
    int fails = 0, lf = 0;
    for (int w = TCOMM_WIRE_FP32; w <= TCOMM_WIRE_FP16; w++) {
        tcomm_fusion_options o = {.bucket_bytes = theta,
                                  .algo = tcomm_algo_parse(algo),
                                  .wire = w,
                                  .flags = TCOMM_AVERAGE};
        o.synchronous = 1;
        double wrong = _run(c, &in, &o, 0, mismatch, g[0], &lf);
        if (lf) {
            fails = 100; /* expected with --mismatch; reported below */
            break;
        }
        o.synchronous = 0;
        wrong += _run(c, &in, &o, 0, -1, g[1], &lf);
        wrong += _run(c, &in, &o, 1, -1, g[2], &lf);
        double differ = 0;
        for (int i = 0; i < NT; i++)
            differ += memcmp(g[0][i], g[1][i], _size(i) * 4) != 0 ||
                      memcmp(g[0][i], g[2][i], _size(i) * 4) != 0;
        /* A failed sum counts as a wrong value. */
        int crc = tcomm_sum_double(c, &wrong, 1);
        crc |= tcomm_sum_double(c, &differ, 1);
        wrong += crc != 0;
        if (in.rank == 0)
            printf("fusion %s %s theta=%zu: wrong=%.0f "
                   "thread-vs-sync-differ=%.0f %s\n",
                   algo, tcomm_wire_name(w), theta, wrong, differ,
                   wrong == 0 && differ == 0 ? "ok" : "FAIL");
        fails += wrong != 0 || differ != 0;
        if (shared)
            fails += _nan_step(c, &in, &o, g[0]);
    }
    if (shared && fails != 100) {
        /* In place wherever the buckets' rows or groups share the node and
         * the offsets agree; the packed path (never in place) otherwise. */
        double ip = (double)_in_place, nb = (double)_buckets;
        int crc = tcomm_sum_double(c, &ip, 1);
        crc |= tcomm_sum_double(c, &nb, 1);
        if (crc) {
            if (in.rank == 0)
                printf("FAIL: summing the in-place counts: %s\n",
                       torus_error_msg());
            fails++;
        }
        if (in.rank == 0)
            printf(
                "shared gradients%s: %.0f of %.0f buckets reduced in place\n",
                skew >= 0 ? " (one rank skewed)" : "", ip, nb);
        if ((!strcmp(want, "all") && ip != nb) ||
            (!strcmp(want, "none") && ip != 0)) {
            if (in.rank == 0)
                printf("FAIL: expected %s in place\n", want);
            fails++;
        }
    }
    double priced = (double)_priced;
    if (tcomm_sum_double(c, &priced, 1))
        priced = -1; /* a failed sum fails the check */
    if (in.rank == 0)
        printf("cost model calls during steps: %.0f%s\n", priced,
               priced ? " FAIL (the bucket plan is resolved at seal)" : "");
    fails += priced != 0 && fails != 100;
    if (in.rank == 0 && fails != 100)
        printf("%s\n", fails ? "FAIL" : "PASS");
    for (int v = 0; v < 3 && !shared; v++)
        for (int i = 0; i < NT; i++)
            free(g[v][i]);
    tcomm_finalize(c);
    return fails == 100 ? 3 : fails ? 1 : 0;
}
