/* fusion/plan.c: the bucket plan, its per-step bookkeeping and the choice
 * of the device path (see plan.h for the contract). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm/core/error.h"
#include "trainer/comm/fusion/plan.h"

static tcomm_rc _grow(tc_plan *p)
{
    int cap = p->cap ? 2 * p->cap : 64;
    uintptr_t *a = realloc(p->addr, sizeof *a * (size_t)cap);
    if (a)
        p->addr = a;
    size_t *c = a ? realloc(p->count, sizeof *c * (size_t)cap) : NULL;
    if (c)
        p->count = c;
    int *b = c ? realloc(p->bucket, sizeof *b * (size_t)cap) : NULL;
    if (b)
        p->bucket = b;
    unsigned char *r = b ? realloc(p->ready, (size_t)cap) : NULL;
    if (!r)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "fusion: no memory for %d tensors",
                          cap);
    p->ready = r;
    p->cap = cap;
    return TCOMM_OK;
}

tcomm_rc tc_plan_add(tc_plan *p, const void *addr, size_t count)
{
    if (p->b)
        return TORUS_FAIL(TCOMM_ERR_ARG, "fusion: tensor added after the cut");
    if (p->nt == p->cap) {
        tcomm_rc rc = _grow(p);
        if (rc)
            return rc;
    }
    p->addr[p->nt] = (uintptr_t)addr;
    p->count[p->nt] = count;
    p->bucket[p->nt] = -1;
    p->ready[p->nt] = 0;
    p->nt++;
    return TCOMM_OK;
}

tcomm_rc tc_plan_cut(tc_plan *p, size_t theta)
{
    if (!theta)
        return TORUS_FAIL(TCOMM_ERR_ARG, "fusion: bucket size 0");
    free(p->b);
    p->nb = 0;
    p->b = calloc((size_t)(p->nt ? p->nt : 1), sizeof *p->b);
    if (!p->b)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "fusion: no memory for buckets");
    /* Greedy in backward order: a bucket closes once it holds theta bytes
     * (a count this large never overflows: counts are of real buffers). */
    for (int i = 0; i < p->nt; i++) {
        tc_pbucket *b = &p->b[p->nb];
        if (b->n == 0)
            b->first = i;
        b->n++;
        b->count += p->count[i];
        p->bucket[i] = p->nb;
        if (b->count * 4 >= theta || i == p->nt - 1)
            p->nb++;
    }
    tc_plan_reset(p);
    return TCOMM_OK;
}

tcomm_rc tc_plan_ready(tc_plan *p, int i)
{
    if (!p->b || i < 0 || i >= p->nt)
        return TORUS_FAIL(TCOMM_ERR_ARG, "fusion: ready(%d) with %d tensors%s",
                          i, p->nt, p->b ? "" : " before seal");
    if (p->ready[i])
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "fusion: gradient %d marked ready twice in one step",
                          i);
    p->ready[i] = 1;
    p->b[p->bucket[i]].pending--;
    return TCOMM_OK;
}

int tc_plan_next(tc_plan *p)
{
    if (p->next >= p->nb || p->b[p->next].pending > 0)
        return -1;
    return p->next++;
}

void tc_plan_flush(tc_plan *p)
{
    for (int i = 0; i < p->nt; i++)
        if (!p->ready[i]) {
            p->ready[i] = 1;
            p->b[p->bucket[i]].pending--;
        }
}

void tc_plan_reset(tc_plan *p)
{
    memset(p->ready, 0, (size_t)p->nt);
    for (int i = 0; i < p->nb; i++)
        p->b[i].pending = p->b[i].n;
    p->next = 0;
}

int tc_plan_launched(const tc_plan *p)
{
    return p->next;
}

/* Bucket i's span from its tensors' addresses. */
static tcomm_rc _span(tc_plan *p, int i)
{
    tc_pbucket *b = &p->b[i];
    b->lo = UINTPTR_MAX;
    b->hi = 0;
    for (int t = b->first; t < b->first + b->n; t++) {
        if (!p->count[t])
            continue;
        if (!p->addr[t])
            return TORUS_FAIL(TCOMM_ERR_LAYOUT,
                              "fusion: gradient %d of bucket %d has no buffer",
                              t, i);
        uintptr_t lo = p->addr[t], hi = lo + p->count[t] * sizeof(float);
        b->lo = lo < b->lo ? lo : b->lo;
        b->hi = hi > b->hi ? hi : b->hi;
    }
    if (b->hi == 0) /* only empty tensors */
        b->lo = b->hi = 0;
    return TCOMM_OK;
}

tcomm_rc tc_plan_spans(tc_plan *p, size_t *max_floats)
{
    size_t m = 0;
    for (int i = 0; i < p->nb; i++) {
        tcomm_rc rc = _span(p, i);
        if (rc)
            return rc;
        size_t f = (p->b[i].hi - p->b[i].lo) / sizeof(float);
        m = f > m ? f : m;
    }
    /* Buckets are few (tens to a few hundred): all pairs. */
    for (int i = 0; i < p->nb; i++)
        for (int j = i + 1; j < p->nb; j++) {
            const tc_pbucket *x = &p->b[i], *y = &p->b[j];
            if (x->lo < x->hi && y->lo < y->hi && x->lo < y->hi &&
                y->lo < x->hi)
                return TORUS_FAIL(
                    TCOMM_ERR_LAYOUT,
                    "fusion: buckets %d and %d overlap in memory: the "
                    "gradients must lie in one arena in registration order "
                    "(or its reverse) to be reduced in place",
                    i, j);
        }
    if (max_floats)
        *max_floats = m;
    return TCOMM_OK;
}

void tc_plan_free(tc_plan *p)
{
    free(p->addr);
    free(p->count);
    free(p->bucket);
    free(p->ready);
    free(p->b);
    memset(p, 0, sizeof *p);
}

void tc_plan_route(tc_plan *p, const tcomm_t *c, tcomm_algo algo,
                   tcomm_wire wire, unsigned flags, tc_route_for how)
{
    for (int i = 0; i < p->nb; i++) {
        tc_pbucket *b = &p->b[i];
        size_t n =
            how == TC_ROUTE_NCCL ? (b->hi - b->lo) / sizeof(float) : b->count;
        tc_route_pick(c, n, b->n, algo, wire, flags, how, &b->route);
    }
}

static int _same_route(const tc_route *a, const tc_route *b)
{
    return a->algo == b->algo && a->wire == b->wire && a->path == b->path;
}

int tc_plan_text(const tc_plan *p, char *buf, size_t n)
{
    size_t at = 0;
    double sum = 0;
    int priced = 1;
#define PUT(...)                                            \
    do {                                                    \
        size_t _at = at < n ? at : n - 1;                   \
        int _k = snprintf(buf + _at, n - _at, __VA_ARGS__); \
        at += _k > 0 ? (size_t)_k : 0;                      \
    } while (0)
    if (!n)
        return 0;
    PUT("%d bucket%s", p->nb, p->nb == 1 ? "" : "s");
    for (int i = 0, j; i < p->nb; i = j) {
        const tc_route *r = &p->b[i].route;
        for (j = i + 1; j < p->nb && _same_route(r, &p->b[j].route); j++)
            ;
        PUT(i ? ", " : ": ");
        if (j - i > 1)
            PUT("%d-%d", i, j - 1);
        else
            PUT("%d", i);
        PUT(" %s/%s %s", tcomm_algo_name(r->algo), tcomm_wire_name(r->wire),
            tc_path_name(r->path));
    }
    for (int i = 0; i < p->nb; i++) {
        priced &= p->b[i].route.predict_s >= 0;
        sum += p->b[i].route.predict_s;
    }
    if (p->nb && priced)
        PUT("; predicted %.1f ms a step", sum * 1e3);
#undef PUT
    return (int)at;
}

int tc_gpu_choose(int n, const int *node, const int *dev, const int *pref,
                  int have_nccl, int *a, int *b)
{
    int staged = 0, nccl = 0;
    *a = *b = -1;
    for (int r = 0; r < n; r++) {
        staged |= pref[r] == TC_GPU_STAGED;
        nccl |= pref[r] == TC_GPU_NCCL;
    }
    if (staged)
        return TC_GPU_STAGED;
    /* The first pair of ranks on one node and one device (n is the job's
     * size: a few thousand at most, checked once at start-up). */
    for (int r = 0; have_nccl && r < n && *a < 0; r++)
        for (int s = r + 1; s < n; s++)
            if (node[s] == node[r] && dev[s] == dev[r]) {
                *a = r;
                *b = s;
                break;
            }
    if (have_nccl && *a < 0)
        return TC_GPU_NCCL;
    return nccl ? -1 : TC_GPU_STAGED;
}

int tc_gpu_parse(const char *s)
{
    if (!s || !*s || !strcmp(s, "auto"))
        return TC_GPU_AUTO;
    if (!strcmp(s, "nccl"))
        return TC_GPU_NCCL;
    if (!strcmp(s, "staged"))
        return TC_GPU_STAGED;
    return -1;
}

const char *tc_gpu_name(int path)
{
    return path == TC_GPU_NCCL     ? "nccl"
           : path == TC_GPU_STAGED ? "staged"
                                   : "auto";
}
