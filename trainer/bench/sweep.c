/* trainer/bench/sweep.c: torus-bench's nccl-tests-style size sweep. For each
 * size from -b to -e (times -f), algorithm and wire it prints, out-of-place
 * (the data in the rank's own memory) and in-place (in memory the node's
 * ranks share), the mean time per all-reduce (the slowest rank's), algbw =
 * bytes / time, busbw = algbw * 2(P-1)/P (nccl-tests' definition, on the
 * user's fp32 bytes: comparable across P and wires), and #wrong: the
 * elements, summed over ranks, that differ from the double-precision
 * reference by more than the wire's error bound; then nccl-tests' closing
 * "# Avg bus bandwidth" line, and with --json one JSON object per line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/torus_error.h"
#include "common/torus_json.h"
#include "trainer/bench/bench.h"
#include "trainer/bench/testdata.h"

/* Where a line's calls find their data: the rank's own buffer (nccl-tests'
 * out-of-place: libtcomm packs or casts it through its own memory and
 * writes the result back) or tcomm_shared_alloc memory (in-place: rows and
 * groups that share a node reduce it where it lies, TCOMM_SHARED). */
typedef struct {
    float *x, *xs; /* xs: NULL when the shared block could not be had */
    FILE *json;    /* --json, rank 0 */
    double busbw_sum;
    int busbw_n;
} _bufs;

static void _header(const bench_opts *o, const tcomm_info *in)
{
    printf("# torus-bench sweep: %d ranks, grid %dx%d, %d groups of %d%s, "
           "%d nodes, layout %s\n",
           in->size, in->rows, in->cols, in->ngroups, in->group_size,
           in->groups_uniform ? "" : " (unequal)", in->nnodes, in->source);
    printf("# iters %d, warmup %d, %s, data bytes are fp32 (the wire may "
           "be narrower)\n",
           o->iters, o->warmup,
           o->average ? "average (pre-scaled by 1/P)" : "sum");
    printf("# out-of-place: data in the rank's own memory; in-place: in "
           "memory the node's ranks share, reduced where it lies\n");
    printf("# waits %s: %d ranks share rank 0's machine, with %d CPUs\n",
           in->waits_nap ? "nap from the first poll" : "spin, then nap",
           in->host_ranks, in->host_cpus);
    printf("#%38s %-44s %-44s\n", "", "  out-of-place", "  in-place");
    printf("#%11s %11s %5s %8s %11s %11s %11s %8s %11s %11s %11s %8s%s\n",
           "size(B)", "count", "wire", "algo", "time(us)", "algbw(GB/s)",
           "busbw(GB/s)", "#wrong", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
           "#wrong", o->probe ? "   model(us) model/meas" : "");
}

/* One placement's result: the slowest rank's time per call, its
 * bandwidths, the wrong elements summed over ranks. */
typedef struct {
    int ran;      /* 0: not measured (n/a) */
    int in_place; /* reduced where it lies (in-place placement) */
    double t, algbw, busbw, wrong;
    tcomm_result r;
} _res;

static void _bw(_res *m, size_t count, int P)
{
    m->algbw = (double)count * 4 / m->t / 1e9;
    m->busbw = m->algbw * 2.0 * (P - 1) / (P > 1 ? P : 1);
}

/* The measured fields of placement pre (oop or ip) of one line. */
static void _json_res(json_object *o, const char *pre, const _res *m)
{
    char k[32];
    snprintf(k, sizeof k, "%s_time_us", pre);
    torus_json_fixed(o, k, m->t * 1e6, 3);
    snprintf(k, sizeof k, "%s_algbw_GBps", pre);
    torus_json_fixed(o, k, m->algbw, 6);
    snprintf(k, sizeof k, "%s_busbw_GBps", pre);
    torus_json_fixed(o, k, m->busbw, 6);
    snprintf(k, sizeof k, "%s_wrong", pre);
    torus_json_fixed(o, k, m->wrong, 0);
}

/* The JSON object of one line (nccl-tests' fields, libtcomm's names). The
 * hybrid's choices come first, then the times, as torus-bench always
 * wrote them. fclose reports a write error. */
static void _json(FILE *f, const tcomm_info *in, size_t count, tcomm_algo a,
                  tcomm_wire w, const _res *m, double pt)
{
    if (!f)
        return;
    char grid[32];
    json_object *o = json_object_new_object();
    snprintf(grid, sizeof grid, "%dx%d", in->rows, in->cols);
    torus_json_int64(o, "ranks", in->size);
    torus_json_int64(o, "nodes", in->nnodes);
    torus_json_string(o, "grid", grid);
    torus_json_int64(o, "size", (long long)(count * 4));
    torus_json_int64(o, "count", (long long)count);
    torus_json_string(o, "wire", tcomm_wire_name(w));
    torus_json_string(o, "algo", tcomm_algo_name(a));
    if (!m[0].ran) {
        json_object_object_add(o, "supported", json_object_new_boolean(0));
        (void)torus_json_write_line(f, o);
        return;
    }
    static const char *pre[2] = {"oop", "ip"};
    for (int k = 0; k < 2 && a == TCOMM_ALGO_HYBRID; k++)
        if (m[k].ran) {
            char key[32];
            snprintf(key, sizeof key, "%s_ran", pre[k]);
            torus_json_string(o, key, tcomm_algo_name(m[k].r.algo_used));
            snprintf(key, sizeof key, "%s_ran_wire", pre[k]);
            torus_json_string(o, key, tcomm_wire_name(m[k].r.wire_used));
        }
    for (int k = 0; k < 2; k++)
        if (m[k].ran)
            _json_res(o, pre[k], &m[k]);
    if (m[1].ran)
        json_object_object_add(o, "ip_reduced_in_place",
                               json_object_new_boolean(m[1].in_place));
    if (pt >= 0)
        torus_json_fixed(o, "model_us", pt * 1e6, 3);
    (void)torus_json_write_line(f, o);
}

/* What hybrid chose per placement: the algorithm, and the wire, which on
 * one node may be fp32 where the row asked for a 16-bit one (the wire's
 * casts cost more than its bytes save there; core/pick.c). */
static void _print_hybrid(const _res *m)
{
    static const char *where[2] = {"out of place", "in place"};
    const char *sep = "";
    if (!m[0].ran && !m[1].ran)
        return;
    printf("#%11s hybrid ran", "");
    for (int k = 0; k < 2; k++) {
        if (!m[k].ran)
            continue;
        printf("%s %s on %s %s", sep, tcomm_algo_name(m[k].r.algo_used),
               tcomm_wire_name(m[k].r.wire_used), where[k]);
        sep = ",";
    }
    printf("\n");
}

/* One line on rank 0: both placements, the model's prediction. */
static void _print(tcomm_t *c, const bench_opts *o, const tcomm_info *in,
                   size_t count, tcomm_algo a, tcomm_wire w, const _res *m,
                   _bufs *b)
{
    printf(" %11zu %11zu %5s %8s", count * 4, count, tcomm_wire_name(w),
           tcomm_algo_name(a));
    for (int k = 0; k < 2; k++) {
        if (!m[k].ran) {
            printf(" %11s %11s %11s %8s", "n/a", "", "", "");
            continue;
        }
        printf(" %11.1f %11.3f %11.3f %8.0f", m[k].t * 1e6, m[k].algbw,
               m[k].busbw, m[k].wrong);
        b->busbw_sum += m[k].busbw;
        b->busbw_n++;
    }
    double pt = o->probe ? tcomm_predict(c, a, count, w) : -1;
    if (pt >= 0 && m[0].ran)
        printf(" %11.1f %10.2f", pt * 1e6, pt / m[0].t);
    printf("\n");
    if (a == TCOMM_ALGO_HYBRID)
        _print_hybrid(m);
    _json(b->json, in, count, a, w, m, pt);
}

static tcomm_rc _call(tcomm_t *c, float *x, size_t count, tcomm_algo a,
                      tcomm_wire w, unsigned flags, tcomm_result *r)
{
    if (!(flags & TCOMM_SHARED))
        return tcomm_allreduce(c, x, count, a, w, flags, r);
    tcomm_seg seg = {x, count};
    return tcomm_allreduce_segs(c, &seg, 1, a, w, flags, r);
}

/* One placement of a line: a checked call, then the timed ones. Returns
 * TCOMM_ERR_UNSUPPORTED when the algorithm cannot run here, another
 * tcomm_rc when a call failed. */
static tcomm_rc _measure(tcomm_t *c, const bench_opts *o, const tcomm_info *in,
                         float *x, size_t count, tcomm_algo a, tcomm_wire w,
                         unsigned place, _res *m)
{
    unsigned flags = (o->average ? TCOMM_AVERAGE : 0) | place;
    bench_testdata_fill(x, count, in->rank, 5 + count);
    tcomm_rc rc = _call(c, x, count, a, w, flags, &m->r);
    if (rc == TCOMM_ERR_UNSUPPORTED)
        return rc;
    if (rc)
        return torus_error_prefix(rc, "all-reduce");
    m->in_place = m->r.in_place;
    m->wrong = 0;
    if (o->check)
        m->wrong = (double)bench_testdata_wrong(
            x, count, in->size, 5 + count, o->average ? 1.0 / in->size : 1.0, w,
            NULL);
    tcomm_result r;
    for (int i = 0; i < o->warmup; i++)
        if ((rc = _call(c, x, count, a, w, TCOMM_AVERAGE | place, &r)))
            return torus_error_prefix(rc, "all-reduce");
    if ((rc = tcomm_barrier(c)))
        return torus_error_prefix(rc, "barrier");
    double t0 = tcomm_wtime();
    for (int i = 0; i < o->iters; i++)
        if ((rc = _call(c, x, count, a, w, TCOMM_AVERAGE | place, &r)))
            return torus_error_prefix(rc, "all-reduce");
    m->t = (tcomm_wtime() - t0) / o->iters;
    if ((rc = tcomm_max_double(c, &m->t)) ||
        (rc = tcomm_sum_double(c, &m->wrong, 1)))
        return torus_error_prefix(rc, "bench times");
    _bw(m, count, in->size);
    m->ran = 1;
    return TCOMM_OK;
}

/* One line of the sweep: out-of-place, then in-place. Returns BENCH_WRONG
 * when a checked result was wrong, BENCH_FAILED when a call failed. */
static int _line(tcomm_t *c, const bench_opts *o, const tcomm_info *in,
                 _bufs *b, size_t count, tcomm_algo a, tcomm_wire w)
{
    _res m[2] = {{0}, {0}};
    tcomm_rc rc = _measure(c, o, in, b->x, count, a, w, 0, &m[0]);
    if (rc == TCOMM_OK && b->xs)
        rc = _measure(c, o, in, b->xs, count, a, w, TCOMM_SHARED, &m[1]);
    if (rc != TCOMM_OK && rc != TCOMM_ERR_UNSUPPORTED)
        return BENCH_FAILED;
    if (in->rank == 0)
        _print(c, o, in, count, a, w, m, b);
    return m[0].wrong != 0 || m[1].wrong != 0 ? BENCH_WRONG : BENCH_OK;
}

/* The buffers: the private one, and the shared block (collective; where
 * it cannot be had the in-place columns say n/a). */
static int _open(tcomm_t *c, const bench_opts *o, const tcomm_info *in,
                 _bufs *b)
{
    size_t bytes = (o->maxbytes / 4 + 1) * 4;
    memset(b, 0, sizeof *b);
    b->x = malloc(bytes);
    if (!b->x)
        return TORUS_FAIL(BENCH_FAILED, "no memory for %zu bytes", bytes);
    memset(b->x, 0, bytes); /* touch once: first touch is slow here */
    void *p = NULL;
    if (tcomm_shared_alloc(c, bytes, &p)) {
        if (in->rank == 0)
            printf("# in-place: n/a (%s)\n", torus_error_msg());
    } else {
        b->xs = p;
    }
    if (in->rank == 0 && o->json && !(b->json = fopen(o->json, "w")))
        return TORUS_FAIL(BENCH_FAILED, "--json: cannot open '%s': %s", o->json,
                          strerror(errno));
    return BENCH_OK;
}

int bench_sweep(tcomm_t *c, const bench_opts *o)
{
    tcomm_info in;
    tcomm_info_get(c, &in);
    _bufs b;
    if (_open(c, o, &in, &b))
        return BENCH_FAILED;
    if (in.rank == 0)
        _header(o, &in);
    int bad = 0;
    for (double sz = (double)o->minbytes; sz <= (double)o->maxbytes;
         sz *= o->factor) {
        size_t count = (size_t)sz / 4;
        for (int wi = 0; wi < o->nwires; wi++)
            for (int ai = 0; ai < o->nalgos; ai++) {
                int rc =
                    _line(c, o, &in, &b, count, o->algos[ai], o->wires[wi]);
                if (rc == BENCH_FAILED)
                    return rc;
                bad += rc == BENCH_WRONG;
            }
        if (o->factor <= 1.0)
            break;
    }
    if (in.rank == 0) {
        printf("# %s\n",
               bad ? "some results were WRONG" : "all results correct");
        /* nccl-tests' closing line: the mean busbw of every result
         * (out-of-place and in-place), in GB/s */
        printf("# Avg bus bandwidth    : %.3f\n",
               b.busbw_n ? b.busbw_sum / b.busbw_n : 0.0);
    }
    if (b.json && fclose(b.json))
        return TORUS_FAIL(BENCH_FAILED, "--json: cannot write '%s': %s",
                          o->json, strerror(errno));
    free(b.x);
    return bad ? BENCH_WRONG : BENCH_OK;
}
