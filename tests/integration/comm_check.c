/* comm_check.c: the correctness driver the comm_*.sh tests run under
 * mpirun / srun. For every algorithm, wire and size it asks for, it
 * all-reduces reproducible data, checks every element against the double
 * reference, checks that all ranks hold bitwise-identical results and that
 * a second run gives the same bits (deterministic order). With --shared
 * every case runs again in tcomm_shared_alloc memory, reduced where it
 * lies (algo/shared_grads.c): the same checks, and on an fp32 wire with
 * rows (torus2d) or groups (hier-rs) of two, the very bits of the first
 * run: both paths cut a message into the same pieces and chunks, and a
 * sum of two is the same in either order. With a NaN on rank 0 and an inf
 * on the last rank, every rank's result must count the two non-finite
 * values it holds (loss scaling's overflow test; the count is folded
 * into the node stages' casts where they run in shared memory). Prints
 * one line per case on rank 0 and exits non-zero if any case fails on any
 * rank. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/bench/testdata.h"
#include "trainer/comm/tcomm.h"

static double _hash(const float *x, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < n * 4; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return (double)(h >> 11); /* 53 bits: exact in a double */
}

static void _usage(void)
{
    fprintf(stderr,
            "usage: comm_check [--grid RxC] [--group-size N] [--algos a,b]\n"
            "                  [--wires w,v] [--sizes n,m] [--sum] [--probe]\n"
            "                  [--shared]\n");
}

/* The case again in shared memory sh. Returns how wrong it is on this
 * rank: elements off the reference, plus one if it should have matched
 * the out-of-place result x bit for bit and did not. */
static double _shared_case(tcomm_t *c, const tcomm_info *in, float *sh,
                           const float *x, const tcomm_result *r1, size_t n,
                           int wire, int average, uint64_t seed, int *ip)
{
    tcomm_seg seg = {sh, n};
    tcomm_result r;
    bench_testdata_fill(sh, n, in->rank, seed);
    if (tcomm_allreduce_segs(c, &seg, 1, r1->algo_used, wire,
                             (average ? TCOMM_AVERAGE : 0) | TCOMM_SHARED,
                             &r)) {
        fprintf(stderr, "rank %d: in place: %s\n", in->rank, torus_error_msg());
        tcomm_abort(c, 1, "in-place all-reduce failed");
    }
    *ip = r.in_place;
    int two = r1->algo_used == TCOMM_ALGO_TORUS2D ? in->cols == 2
                                                  : in->group_size == 2;
    int same = memcmp(sh, x, n * 4) == 0;
    double bad = (double)bench_testdata_wrong(
        sh, n, in->size, seed, average ? 1.0 / in->size : 1.0, wire, NULL);
    return bad + (r.in_place && two && wire == TCOMM_WIRE_FP32 && !same);
}

/* 1 when the case with a NaN (rank 0, element 0) and an inf (last rank,
 * element n-1) does not report the 2 non-finite values this rank holds. */
static double _nonfinite_case(tcomm_t *c, const tcomm_info *in, float *y,
                              size_t n, int algo, int wire, int average,
                              uint64_t seed)
{
    if (n < 2)
        return 0;
    bench_testdata_fill(y, n, in->rank, seed);
    if (in->rank == 0)
        y[0] = NAN;
    if (in->rank == in->size - 1)
        y[n - 1] = INFINITY;
    tcomm_result r;
    if (tcomm_allreduce(c, y, n, algo, wire, average ? TCOMM_AVERAGE : 0, &r)) {
        fprintf(stderr, "rank %d: with a NaN: %s\n", in->rank,
                torus_error_msg());
        tcomm_abort(c, 1, "all-reduce failed");
    }
    size_t held = 0;
    for (size_t i = 0; i < n; i++) { /* bits: immune to -ffast-math */
        uint32_t u;
        memcpy(&u, y + i, 4);
        held += (u & 0x7f800000u) == 0x7f800000u;
    }
    return held != 2 || r.nonfinite != 2;
}

static size_t _largest(const char *sizes)
{
    size_t most = 0;
    for (const char *p = sizes; *p;) {
        char *end;
        size_t n = strtoull(p, &end, 10);
        most = n > most ? n : most;
        p = *end ? end + 1 : end;
    }
    return most;
}

int main(int argc, char **argv)
{
    tcomm_options o = {0};
    const char *algos = "flat,ring,hier,hier-rs,torus2d,hybrid",
               *wires = "fp32,fp16,bf16";
    const char *sizes = "0,1,7,64,1000,4099,65536";
    int average = 1, probe = 0, shared = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((!strcmp(argv[i], "--grid") || !strcmp(argv[i], "--group-size")) &&
            v) {
            if (tcomm_options_set(&o, argv[i], v)) {
                fprintf(stderr, "comm_check: %s\n", torus_error_msg());
                return 2;
            }
            i++;
        } else if (!strcmp(argv[i], "--algos") && v)
            algos = argv[++i];
        else if (!strcmp(argv[i], "--wires") && v)
            wires = argv[++i];
        else if (!strcmp(argv[i], "--sizes") && v)
            sizes = argv[++i];
        else if (!strcmp(argv[i], "--sum"))
            average = 0;
        else if (!strcmp(argv[i], "--probe"))
            probe = 1;
        else if (!strcmp(argv[i], "--shared"))
            shared = 1;
        else {
            _usage();
            return 2;
        }
    }
    tcomm_t *c;
    if (tcomm_init(&o, &c)) {
        fprintf(stderr, "comm_check: %s\n", torus_error_msg());
        return 1;
    }
    if (probe && tcomm_probe_links(c)) {
        fprintf(stderr, "comm_check: probe: %s\n", torus_error_msg());
        return 1;
    }
    tcomm_info in;
    tcomm_info_get(c, &in);
    if (in.rank == 0)
        printf("P=%d grid=%dx%d groups=%d (size %d%s) nodes=%d source=%s\n",
               in.size, in.rows, in.cols, in.ngroups, in.group_size,
               in.groups_uniform ? "" : ", unequal", in.nnodes, in.source);
    void *sh = NULL;
    if (shared && tcomm_shared_alloc(c, (_largest(sizes) + 1) * 4, &sh)) {
        fprintf(stderr, "comm_check: %s\n", torus_error_msg());
        return 1;
    }
    int failures = 0;
    char abuf[256], wbuf[64], sbuf[256];
    snprintf(abuf, sizeof abuf, "%s", algos);
    for (char *as = NULL, *a = strtok_r(abuf, ",", &as); a;
         a = strtok_r(NULL, ",", &as)) {
        int algo = tcomm_algo_parse(a);
        if (algo < 0) {
            fprintf(stderr, "comm_check: unknown algorithm '%s'\n", a);
            return 2;
        }
        snprintf(wbuf, sizeof wbuf, "%s", wires);
        for (char *ws = NULL, *w = strtok_r(wbuf, ",", &ws); w;
             w = strtok_r(NULL, ",", &ws)) {
            int wire = tcomm_wire_parse(w);
            if (wire < 0) {
                fprintf(stderr, "comm_check: unknown wire '%s'\n", w);
                return 2;
            }
            snprintf(sbuf, sizeof sbuf, "%s", sizes);
            for (char *ss = NULL, *s = strtok_r(sbuf, ",", &ss); s;
                 s = strtok_r(NULL, ",", &ss)) {
                size_t n = strtoull(s, NULL, 10);
                float *x = malloc((n + 1) * 4), *y = malloc((n + 1) * 4);
                uint64_t seed = 1000 + n;
                tcomm_result r1, r2;
                bench_testdata_fill(x, n, in.rank, seed);
                tcomm_rc rc = tcomm_allreduce(c, x, n, algo, wire,
                                              average ? TCOMM_AVERAGE : 0, &r1);
                if (rc == TCOMM_ERR_UNSUPPORTED) {
                    if (in.rank == 0)
                        printf("%-8s %-5s n=%-8zu unsupported here: %s\n", a, w,
                               n, torus_error_msg());
                    free(x);
                    free(y);
                    continue;
                }
                if (rc) {
                    fprintf(stderr, "rank %d: %s\n", in.rank,
                            torus_error_msg());
                    tcomm_abort(c, 1, "all-reduce failed");
                }
                size_t first = 0;
                double wrong = (double)bench_testdata_wrong(
                    x, n, in.size, seed, average ? 1.0 / in.size : 1.0, wire,
                    &first);
                if (wrong && in.rank < 4)
                    fprintf(
                        stderr,
                        "rank %d: %s %s n=%zu: element %zu = %.9g is wrong\n",
                        in.rank, a, w, n, first, first < n ? x[first] : 0.0);
                /* Bitwise agreement across ranks and with a second run. */
                double h = _hash(x, n), hmax = h, hmin = -h;
                bench_testdata_fill(y, n, in.rank, seed);
                rc = tcomm_allreduce(c, y, n, algo, wire,
                                     average ? TCOMM_AVERAGE : 0, &r2);
                double rerun = rc || memcmp(x, y, n * 4) != 0;
                double miscount =
                    _nonfinite_case(c, &in, y, n, algo, wire, average, seed);
                int ip = 0;
                if (sh)
                    wrong += _shared_case(c, &in, sh, x, &r1, n, wire, average,
                                          seed, &ip);
                /* Every rank makes every call (no short cut): a failed one
                 * fails the case. */
                int crc = tcomm_max_double(c, &hmax);
                crc |= tcomm_max_double(c, &hmin);
                crc |= tcomm_sum_double(c, &wrong, 1);
                crc |= tcomm_sum_double(c, &rerun, 1);
                crc |= tcomm_sum_double(c, &miscount, 1);
                int ok = !crc && wrong == 0 && hmax == -hmin && rerun == 0 &&
                         miscount == 0;
                failures += !ok;
                if (in.rank == 0)
                    printf("%-8s %-5s n=%-8zu ran=%-8s wrong=%-6.0f "
                           "ranks-agree=%s rerun-equal=%s nan-counted=%s%s "
                           "%s\n",
                           a, w, n, tcomm_algo_name(r1.algo_used), wrong,
                           hmax == -hmin ? "yes" : "NO",
                           rerun == 0 ? "yes" : "NO",
                           miscount == 0 ? "yes" : "NO",
                           !sh  ? ""
                           : ip ? " in-place=yes"
                                : " in-place=no",
                           ok ? "ok" : "FAIL");
                free(x);
                free(y);
            }
        }
    }
    if (in.rank == 0)
        printf("%s: %d failing case(s)\n", failures ? "FAIL" : "PASS",
               failures);
    tcomm_shared_free(c);
    tcomm_finalize(c);
    return failures ? 1 : 0;
}
