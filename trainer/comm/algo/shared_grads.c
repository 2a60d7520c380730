/* algo/shared_grads.c: gradient memory shared by the ranks of a node
 * (tcomm_shared_alloc) and the in-place all-reduce of buckets in it.
 *
 * On a node an all-reduce costs memory traffic, not messages. The packed
 * shared-memory path (algo/segs.c) casts every gradient into a shared
 * segment, sums each chunk, and decodes everything back: 60 bytes per
 * gradient element over 4 ranks at fp16. When the gradients themselves
 * live in memory the node's ranks share, none of those copies are needed:
 * after a barrier member i reads chunk i of every member's gradients,
 * sums them in member order (the same bits on every run), rounds the sum
 * to the wire precision so the result is the one the other paths give
 * (with one row; with columns the ring's all-gather has rounded it),
 * and writes it into every member's gradients; a second barrier ends the
 * bucket. Each element is read once and written once per rank: 32 bytes
 * per element over 4 ranks, what a bare pass over the gradients costs.
 * Across nodes (torus2d columns, hier-rs peers) the chunk's sum goes
 * through the usual column ring in between; a large bucket goes in pieces
 * (pipeline.c), the ring of one overlapping the sums and the write-back
 * of the others. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm/algo/algo.h"
#include "trainer/comm/core/wire.h"

/* After every rank's usable bytes: the inf/nan count of its last chunk,
 * read by the other members after the closing barrier. */
enum { HEADER = 64, BLOCK = 2048 };

static size_t _round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

/* Map g's members to their blocks in the shared domain dom. */
static tcomm_rc _map_group(tc_group *g, MPI_Comm dom, unsigned char **base)
{
    if (!g->on_node || g->comm == MPI_COMM_NULL || g->size < 2)
        return TCOMM_OK;
    MPI_Group gg, dg;
    int *in = malloc(sizeof(int) * 2 * (size_t)g->size);
    g->arena = calloc((size_t)g->size, sizeof *g->arena);
    if (!in || !g->arena) {
        free(in);
        free(g->arena);
        g->arena = NULL;
        return TORUS_FAIL(TCOMM_ERR_NOMEM,
                          "no memory to map the %s's shared gradients",
                          g->name);
    }
    for (int j = 0; j < g->size; j++)
        in[j] = j;
    MPI_Comm_group(g->comm, &gg);
    MPI_Comm_group(dom, &dg);
    MPI_Group_translate_ranks(gg, g->size, in, dg, in + g->size);
    MPI_Group_free(&gg);
    MPI_Group_free(&dg);
    int ok = 1;
    for (int j = 0; j < g->size; j++) {
        if (in[g->size + j] == MPI_UNDEFINED)
            ok = 0;
        else
            g->arena[j] = base[in[g->size + j]];
    }
    free(in);
    /* on_node says every member shares this node; the domain split should
     * agree, but if it does not, the group keeps the packed path. */
    if (!ok) {
        free(g->arena);
        g->arena = NULL;
    }
    return TCOMM_OK;
}

/* A block in this rank's own memory: no one to share it with. */
static tcomm_rc _alloc_plain(tcomm_t *c, size_t want, void **out)
{
    void *p = aligned_alloc(64, _round_up(want + HEADER, 64));
    if (!p)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no %zu bytes of gradient memory",
                          want);
    memset(p, 0, want + HEADER);
    c->arena.mine = p;
    c->arena.bytes = want;
    *out = p;
    return TCOMM_OK;
}

/* Every rank asks for the same size: the in-place path finds a member's
 * header at the same offset. Deadline-guarded (world). */
static tcomm_rc _same_size(tcomm_t *c, size_t want)
{
    unsigned long long mm[2] = {want, ~(unsigned long long)want}, all[2];
    MPI_Request r = MPI_REQUEST_NULL;
    tcomm_rc rc =
        tc_coll_start(c, &c->world,
                      MPI_Iallreduce(mm, all, 2, MPI_UNSIGNED_LONG_LONG,
                                     MPI_MAX, c->world.comm, &r),
                      &r, "tcomm_shared_alloc size check");
    if (rc)
        return rc;
    if (all[0] != want || ~all[1] != want)
        return TORUS_FAIL(
            TCOMM_ERR_LAYOUT,
            "tcomm_shared_alloc: rank %d asks for %zu bytes, "
            "another rank for %llu: every rank must ask for the same size",
            c->info.rank, want, all[0] != want ? all[0] : ~all[1]);
    return TCOMM_OK;
}

/* This rank's segment of the window over the node's ranks (c->shmdom),
 * and where every member's segment is mapped here (base[j]). All members
 * succeed or fail together (tc_win_alloc). */
static tcomm_rc _alloc_window(tcomm_t *c, size_t want,
                              unsigned char ***base_out, int *who)
{
    const tc_group *dom = &c->shmdom;
    int n = dom->size;
    unsigned char **base = calloc((size_t)n, sizeof *base);
    if (!base)
        TORUS_FAIL(TCOMM_ERR_NOMEM, "rank %d: no memory to map %d segments",
                   c->info.rank, n);
    /* Every rank's segment on pages of its own, first touched by it. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    unsigned char *mine = NULL;
    tcomm_rc rc = tc_win_alloc(c, dom, base != NULL, want + HEADER, 64, info,
                               &mine, &c->arena.win, who);
    MPI_Info_free(&info);
    if (rc) {
        free(base);
        c->arena.win = MPI_WIN_NULL;
        return rc;
    }
    for (int j = 0; j < n; j++) {
        MPI_Aint sz;
        int disp;
        MPI_Win_shared_query(c->arena.win, j, &sz, &disp, &base[j]);
    }
    MPI_Win_lock_all(MPI_MODE_NOCHECK, c->arena.win);
    memset(mine, 0, want + HEADER);
    c->arena.mine = mine;
    c->arena.bytes = want;
    *base_out = base;
    return TCOMM_OK;
}

tcomm_rc tcomm_shared_alloc(tcomm_t *c, size_t bytes, void **out)
{
    if (c->arena.mine)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "tcomm_shared_alloc: rank %d already has a shared "
                          "block (%zu bytes)",
                          c->info.rank, c->arena.bytes);
    if (bytes > ((size_t)-1) / 2)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "tcomm_shared_alloc: rank %d asks for %zu bytes",
                          c->info.rank, bytes);
    size_t want = _round_up(bytes ? bytes : 1, 64);
    c->arena.win = MPI_WIN_NULL;
    if (c->singleton || !c->use_shm || c->info.size == 1 ||
        c->shmdom.comm == MPI_COMM_NULL)
        return _alloc_plain(c, want, out);
    tcomm_rc rc = _same_size(c, want);
    if (rc)
        return rc;
    unsigned char **base = NULL;
    int who = -1;
    rc = _alloc_window(c, want, &base, &who);
    if (!rc)
        rc = _map_group(&c->row, c->shmdom.comm, base);
    if (!rc)
        rc = _map_group(&c->group, c->shmdom.comm, base);
    free(base);
    /* A lost rank: every rank times out on its own, and a collective
     * free would wait for the lost one. */
    if (rc == TCOMM_ERR_TIMEOUT || rc == TCOMM_ERR_TRANSPORT)
        return rc;
    /* The window is per node: a failure on one node fails every rank, the
     * others naming the rank at fault, so that no rank trains with shared
     * gradients while another has none. */
    tcomm_rc all =
        tc_agree_why(c, &c->world, rc == TCOMM_OK, &who,
                     "allocate its shared gradient memory", TCOMM_ERR_NOMEM);
    if (all == TCOMM_ERR_TIMEOUT || all == TCOMM_ERR_TRANSPORT)
        return all;
    if (all) {
        tcomm_shared_free(c); /* with the rest of this node, if mapped */
        return all;
    }
    *out = c->arena.mine;
    return TCOMM_OK;
}

void tcomm_shared_free(tcomm_t *c)
{
    if (!c || !c->arena.mine)
        return;
    free(c->row.arena);
    free(c->group.arena);
    c->row.arena = c->group.arena = NULL;
    if (c->arena.win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(c->arena.win);
        MPI_Win_free(&c->arena.win);
    } else {
        free(c->arena.mine);
    }
    memset(&c->arena, 0, sizeof c->arena);
    c->arena.win = MPI_WIN_NULL;
}

int tc_shared_holds(const tcomm_t *c, const float *p, size_t count)
{
    const tc_arena *a = &c->arena;
    if (!a->mine || a->win == MPI_WIN_NULL) /* none, or plain memory */
        return 0;
    uintptr_t lo = (uintptr_t)a->mine, hi = lo + a->bytes, q = (uintptr_t)p;
    return !count || (q >= lo && q < hi && count * 4 <= hi - q && q % 4 == 0);
}

int tc_shared_covers(const tcomm_t *c, const tc_group *g, const tcomm_seg *s,
                     int ns)
{
    if (!g->arena)
        return 0;
    for (int i = 0; i < ns; i++)
        if (!tc_shared_holds(c, s[i].p, s[i].count))
            return 0;
    return 1;
}

typedef struct {
    const tcomm_t *c;
    const tc_group *g;
    tcomm_wire w;
    float scale;
    float *acc; /* the chunk's sums (column stage); NULL: block by block */
    size_t bad;
    float blk[BLOCK];
    uint16_t tmp[BLOCK];
} _ctx;

/* dst[0..m) = sum over members, in member order, of scale * their values
 * at byte offset d of their blocks. */
static void _sum(const _ctx *x, size_t d, float *dst, size_t m)
{
    const tc_group *g = x->g;
    const float *s0 = (const float *)(g->arena[0] + d);
    for (size_t i = 0; i < m; i++)
        dst[i] = s0[i] * x->scale;
    for (int j = 1; j < g->size; j++) {
        const float *sj = (const float *)(g->arena[j] + d);
        for (size_t i = 0; i < m; i++)
            dst[i] += sj[i] * x->scale;
    }
}

/* Round to the wire (unless the column ring has: x->acc), count inf/nan,
 * write into every member's block. */
static void _put(_ctx *x, size_t d, float *v, size_t m)
{
    if (!x->acc)
        tc_round_to_wire(x->w, v, m, x->tmp);
    x->bad += tc_count_nonfinite(v, m);
    for (int j = 0; j < x->g->size; j++)
        memcpy(x->g->arena[j] + d, v, m * 4);
}

/* Byte offset of p in the blocks (the same in every member's). */
static size_t _off(const _ctx *x, const float *p)
{
    return (size_t)((const unsigned char *)p - x->c->arena.mine);
}

/* One node: sum, round and write back block by block (cache-resident). */
static void _reduce_put(float *p, size_t n, size_t at, void *arg)
{
    _ctx *x = arg;
    size_t d = _off(x, p);
    (void)at;
    for (size_t k = 0; k < n; k += BLOCK) {
        size_t m = n - k < BLOCK ? n - k : BLOCK;
        _sum(x, d + k * 4, x->blk, m);
        _put(x, d + k * 4, x->blk, m);
    }
}

static void _reduce_acc(float *p, size_t n, size_t at, void *arg)
{
    _ctx *x = arg;
    _sum(x, _off(x, p), x->acc + at, n);
}

static void _put_acc(float *p, size_t n, size_t at, void *arg)
{
    _ctx *x = arg;
    size_t d = _off(x, p);
    /* The ring's all-gather moved wire values: the sums are rounded. */
    for (size_t k = 0; k < n; k += BLOCK)
        _put(x, d + k * 4, x->acc + at + k, n - k < BLOCK ? n - k : BLOCK);
}

/* A large bucket in K pieces (pipeline.c), cut as torus2d cuts a message
 * (piece i, then this member's chunk of it), so that a column's rings pair
 * the same elements whether its ranks reduce in place or not. The column
 * ring of one piece runs on the pipeline's thread while this one sums the
 * next pieces and writes back the finished ones: without it the sums and
 * the write-back were a tenth of a 64 MiB all-reduce on the emulated
 * cluster, with the links idle. Piece i's sums live at acc + i * stride;
 * x is the caller's thread's alone (sums and write-back). */
typedef struct {
    _ctx *x;
    const tc_group *cols;
    const tcomm_seg *s;
    int ns, K;
    size_t count, stride;
    float *acc;
    tc_scratch *scr; /* the ring's: the pipeline thread has its own */
} _pieces;

static void _piece(const _pieces *p, int i, size_t *from, size_t *len)
{
    tc_piece_chunk(p->count, p->K, i, p->x->g->size, p->x->g->rank, from, len);
}

/* fn (the sums, or the write-back) over piece i of this member's chunk. */
static tcomm_rc _piece_walk(_pieces *p, int i, tc_piece_fn fn)
{
    size_t from, len;
    _piece(p, i, &from, &len);
    p->x->acc = p->acc + (size_t)i * p->stride;
    tc_seg_walk(p->s, p->ns, from, len, fn, p->x);
    return TCOMM_OK;
}

static tcomm_rc _piece_sum(tcomm_t *c, void *ctx, int i)
{
    (void)c;
    return _piece_walk(ctx, i, _reduce_acc);
}

static tcomm_rc _piece_ring(tcomm_t *c, void *ctx, int i)
{
    _pieces *p = ctx;
    size_t from, len;
    _piece(p, i, &from, &len);
    return tc_ring_allreduce(c, p->scr, p->cols, p->acc + (size_t)i * p->stride,
                             len, p->x->w);
}

static tcomm_rc _piece_put(tcomm_t *c, void *ctx, int i)
{
    (void)c;
    return _piece_walk(ctx, i, _put_acc);
}

/* The sums of this member's chunks, the column ring, the write-back:
 * whole, or in pieces when every row is on a node (as torus2d.c). */
static tcomm_rc _across(tcomm_t *c, _ctx *x, const tc_group *cols,
                        const tcomm_seg *s, int ns, size_t count, int K)
{
    const tc_group *rows = x->g;
    if (K < 2 || !rows->all_on_node)
        K = 1;
    size_t stride = tc_chunk_len(tc_chunk_len(count, K, 0), rows->size, 0);
    float *acc = tc_buf_get(&c->accum, (size_t)K * stride * 4);
    if (!acc)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for a %zu-float chunk",
                          (size_t)K * stride);
    _pieces p = {
        x, cols, s, ns, K, count, stride, acc, K > 1 ? &c->scr_pipe : &c->scr};
    if (K > 1)
        return tc_pipeline_run(c, K, _piece_sum, _piece_ring, _piece_put, &p);
    tcomm_rc rc = _piece_sum(c, &p, 0);
    if (!rc)
        rc = _piece_ring(c, &p, 0);
    return rc ? rc : _piece_put(c, &p, 0);
}

tcomm_rc tc_shared_allreduce(tcomm_t *c, tc_group *rows, const tc_group *cols,
                             const tcomm_seg *s, int ns, size_t count,
                             tcomm_wire w, int K, float scale, size_t *bad)
{
    /* Every member's gradients of this bucket are final. */
    tcomm_rc rc = tc_shm_sync_win(c, rows, c->arena.win);
    if (rc)
        return rc;
    int n = rows->size, me = rows->rank;
    size_t off = tc_chunk_off(count, n, me), len = tc_chunk_len(count, n, me);
    /* On this thread's stack (12 KiB): no allocation per bucket. */
    _ctx xs = {.c = c, .g = rows, .w = w, .scale = scale}, *x = &xs;
    if (cols->size > 1) {
        if ((rc = _across(c, x, cols, s, ns, count, K)))
            return rc;
    } else {
        tc_seg_walk(s, ns, off, len, _reduce_put, x);
    }
    /* Publish this chunk's inf/nan count beside the block; the members read
     * them after the barrier, and nobody writes them again before the next
     * bucket's opening barrier, which all members pass only after reading. */
    size_t mine = x->bad;
    memcpy(rows->arena[me] + c->arena.bytes, &mine, sizeof mine);
    if ((rc = tc_shm_sync_win(c, rows, c->arena.win)))
        return rc;
    size_t total = 0;
    for (int j = 0; j < n; j++) {
        size_t v;
        memcpy(&v, rows->arena[j] + c->arena.bytes, sizeof v);
        total += v;
    }
    *bad = total;
    return TCOMM_OK;
}
