/*
 * layout.c: the 2D-torus layout itself. Orders the step's nodes so that
 * nodes under one leaf switch are adjacent, lays tasks out row-major over
 * that order, and picks the number of columns C (for `auto`) by the one
 * alpha-beta model, libtoruscost (cost_model.c), that libtcomm's hybrid
 * algorithm prices with too.
 *
 * Rules it enforces: a row never splits a node's tasks unless
 * C < tasks per node, in which case a node holds whole rows; `auto` only
 * considers shapes whose rows stay inside one leaf (C = tasks per node always
 * qualifies, so such a shape always exists); ties are broken by a fixed rule
 * so every node computes the same answer. Memory is O(nodes + switches).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "topology/internal.h"

struct torus_layout {
    bool enabled;
    uint32_t rows, cols, tpn, ngroups, crossing;
    size_t nnodes;
    uint64_t tasks;
    torus_layout_source source;
    size_t *order;       /* torus position -> Slurm node id */
    size_t *pos;         /* Slurm node id -> torus position */
    uint32_t *group;     /* Slurm node id -> group */
    size_t *group_start; /* group -> first torus position; [ngroups] = nnodes */
    char **group_switch; /* group -> leaf switch name */
    uint32_t
        leaf_ranks; /* tasks per leaf the model may assume (see _leaf_ranks) */
    size_t coord_row; /* torus3d/ring: nodes per row that keep rings
                       * physical (0: not a coordinate map) */
    char reason[512];
};

void torus_layout_free(torus_layout_t *l)
{
    if (!l)
        return;
    free(l->order);
    free(l->pos);
    free(l->group);
    free(l->group_start);
    if (l->group_switch)
        for (uint32_t g = 0; g < l->ngroups; g++)
            free(l->group_switch[g]);
    free(l->group_switch);
    free(l);
}

bool torus_layout_enabled(const torus_layout_t *l)
{
    return l->enabled;
}
uint32_t torus_layout_rows(const torus_layout_t *l)
{
    return l->rows;
}
uint32_t torus_layout_cols(const torus_layout_t *l)
{
    return l->cols;
}
uint32_t torus_layout_tasks_per_node(const torus_layout_t *l)
{
    return l->tpn;
}
size_t torus_layout_node_count(const torus_layout_t *l)
{
    return l->nnodes;
}
uint64_t torus_layout_task_count(const torus_layout_t *l)
{
    return l->tasks;
}
uint32_t torus_layout_group_count(const torus_layout_t *l)
{
    return l->ngroups;
}
torus_layout_source torus_layout_source_of(const torus_layout_t *l)
{
    return l->source;
}
const char *torus_layout_reason(const torus_layout_t *l)
{
    return l->reason;
}
size_t torus_layout_node_at(const torus_layout_t *l, size_t pos)
{
    return l->order[pos];
}
uint32_t torus_layout_node_group(const torus_layout_t *l, size_t node)
{
    return l->group[node];
}
uint32_t torus_layout_rows_crossing_leaves(const torus_layout_t *l)
{
    return l->crossing;
}

const char *torus_layout_group_switch(const torus_layout_t *l, uint32_t g)
{
    return g < l->ngroups && l->group_switch[g] ? l->group_switch[g] : "-";
}

const char *torus_layout_source_name(torus_layout_source source)
{
    switch (source) {
    case TORUS_SOURCE_TREE:
        return "topology/tree";
    case TORUS_SOURCE_ADDR:
        return "SLURM_TOPOLOGY_ADDR";
    case TORUS_SOURCE_NODELIST:
        return "nodelist";
    case TORUS_SOURCE_BLOCK:
        return "topology/block";
    case TORUS_SOURCE_TORUS3D:
        return "topology/torus3d";
    case TORUS_SOURCE_RING:
        return "topology/ring";
    }
    return "nodelist";
}

torus_layout_rc torus_layout_place(const torus_layout_t *l, size_t node,
                                   uint32_t local, torus_layout_task_t *out)
{
    if (!l->enabled || node >= l->nnodes || local >= l->tpn)
        return TORUS_LAYOUT_EINVAL;
    size_t p = l->pos[node];
    uint64_t k = (uint64_t)p * l->tpn + local;
    uint32_t g = l->group[node];
    *out = (torus_layout_task_t){
        .row = (uint32_t)(k / l->cols),
        .col = (uint32_t)(k % l->cols),
        .group = g,
        .group_rank = (uint32_t)((p - l->group_start[g]) * l->tpn + local),
        .node_index = (uint32_t)p,
    };
    return TORUS_LAYOUT_OK;
}

torus_layout_rc torus_layout_block_task(const torus_layout_t *l,
                                        uint64_t procid, size_t *node,
                                        uint32_t *local)
{
    if (!l->enabled || procid >= l->tasks)
        return TORUS_LAYOUT_EINVAL;
    *node = (size_t)(procid / l->tpn);
    *local = (uint32_t)(procid % l->tpn);
    return TORUS_LAYOUT_OK;
}

/* ------------------------------------------------------------ node order */

typedef struct {
    const torus_layout_topo_t *topo;
    const size_t *first; /* switch -> smallest Slurm node id beneath it */
} _order_ctx;

/* Compare two leaves by the "first node" of their ancestors, root first:
 * this keeps leaves under one spine adjacent, and otherwise follows the
 * order in which Slurm listed the nodes. */
static int _leaf_cmp(const void *a, const void *b, void *arg)
{
    const _order_ctx *ctx = arg;
    uint32_t la = *(const uint32_t *)a, lb = *(const uint32_t *)b;
    /* The switch map guarantees depth <= TORUS_LAYOUT_DEPTH_MAX. */
    uint32_t ca[TORUS_LAYOUT_DEPTH_MAX + 1], cb[TORUS_LAYOUT_DEPTH_MAX + 1];
    size_t na = 0, nb = 0;
    for (uint32_t s = la; s != TORUS_NO_SWITCH && na <= TORUS_LAYOUT_DEPTH_MAX;
         s = torus_layout_topo_parent(ctx->topo, s))
        ca[na++] = s;
    for (uint32_t s = lb; s != TORUS_NO_SWITCH && nb <= TORUS_LAYOUT_DEPTH_MAX;
         s = torus_layout_topo_parent(ctx->topo, s))
        cb[nb++] = s;
    while (na && nb) {
        size_t fa = ctx->first[ca[--na]], fb = ctx->first[cb[--nb]];
        if (fa != fb)
            return fa < fb ? -1 : 1;
    }
    if (na != nb)
        return na < nb ? -1 : 1;
    return la < lb ? -1 : (la > lb);
}

/* The step's distinct leaves, in torus order (into leaves[], count
 * *nleaves), and each leaf switch's group number (rank[switch]). */
static void _rank_leaves(const torus_layout_t *l,
                         const torus_layout_topo_t *topo, const uint32_t *leaf,
                         size_t *first, uint32_t *rank, uint32_t *leaves,
                         uint32_t *nleaves)
{
    size_t nsw = torus_layout_topo_switch_count(topo);
    *nleaves = 0;
    for (size_t s = 0; s < nsw; s++) {
        first[s] = SIZE_MAX;
        rank[s] = UINT32_MAX; /* "not yet listed as a leaf of this step" */
    }
    /* Node ids grow, so the first visit of a switch is its minimum and its
     * ancestors are already set: stop climbing there. A switch can hold
     * nodes and also be an ancestor of another leaf, so "listed" is tracked
     * apart from "first". */
    for (size_t i = 0; i < l->nnodes; i++) {
        if (rank[leaf[i]] == UINT32_MAX) {
            rank[leaf[i]] = 0;
            leaves[(*nleaves)++] = leaf[i];
        }
        for (uint32_t s = leaf[i]; s != TORUS_NO_SWITCH && first[s] == SIZE_MAX;
             s = torus_layout_topo_parent(topo, s))
            first[s] = i;
    }
    _order_ctx ctx = {topo, first};
    qsort_r(leaves, *nleaves, sizeof *leaves, _leaf_cmp, &ctx);
    for (uint32_t g = 0; g < *nleaves; g++)
        rank[leaves[g]] = g;
}

/* Group start offsets, and the node order: a counting sort by group keeps
 * Slurm order inside each group. l->group must be filled. */
static torus_layout_rc _sort_by_group(torus_layout_t *l)
{
    for (size_t i = 0; i < l->nnodes; i++)
        l->group_start[l->group[i] + 1]++;
    for (uint32_t g = 0; g < l->ngroups; g++)
        l->group_start[g + 1] += l->group_start[g];
    size_t *fill = malloc((size_t)l->ngroups * sizeof *fill);
    if (!fill)
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    memcpy(fill, l->group_start, (size_t)l->ngroups * sizeof *fill);
    for (size_t i = 0; i < l->nnodes; i++) {
        size_t p = fill[l->group[i]]++;
        l->order[p] = i;
        l->pos[i] = p;
    }
    free(fill);
    return TORUS_LAYOUT_OK;
}

/* Fill l->group/order/pos/group_start/group_switch from the per-node leaf
 * array (NULL: one group). */
static torus_layout_rc _order_nodes(torus_layout_t *l,
                                    const torus_layout_topo_t *topo,
                                    const uint32_t *leaf)
{
    size_t nsw = torus_layout_topo_switch_count(topo);
    uint32_t nleaves = 1, *leaves = NULL, *rank = NULL;
    size_t *first = NULL;
    torus_layout_rc rc = TORUS_LAYOUT_ENOMEM;
    if (leaf) {
        first = malloc(nsw * sizeof *first);
        rank = malloc(nsw * sizeof *rank);
        leaves = malloc(nsw * sizeof *leaves);
        if (!first || !rank || !leaves)
            goto out;
        _rank_leaves(l, topo, leaf, first, rank, leaves, &nleaves);
    }
    l->ngroups = nleaves;
    l->group_start = calloc((size_t)nleaves + 1, sizeof *l->group_start);
    l->group_switch = calloc(nleaves, sizeof *l->group_switch);
    if (!l->group_start || !l->group_switch)
        goto out;
    for (uint32_t g = 0; g < nleaves; g++)
        if (leaf && !(l->group_switch[g] =
                          strdup(torus_layout_topo_name(topo, leaves[g]))))
            goto out;
    for (size_t i = 0; i < l->nnodes; i++)
        l->group[i] = leaf ? rank[leaf[i]] : 0;
    rc = _sort_by_group(l);
out:
    free(first);
    free(rank);
    free(leaves);
    if (rc == TORUS_LAYOUT_ENOMEM)
        return TORUS_FAIL(rc, "out of memory");
    return rc;
}

/* ------------------------------------------------------------ candidates */

/* Rows spanning two groups when each row holds m whole nodes. Groups are
 * contiguous in torus order, so a row crosses iff its ends differ. */
static uint32_t _crossing_rows(const torus_layout_t *l, size_t m)
{
    uint32_t crossing = 0;
    for (size_t start = 0; start + m <= l->nnodes; start += m)
        if (l->group[l->order[start]] != l->group[l->order[start + m - 1]])
            crossing++;
    return crossing;
}

static size_t _gcd(size_t a, size_t b)
{
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The model sees ranks contiguously and leaves of leaf_ranks tasks each. With
 * uneven leaves, the gcd of their node counts is the right size: a row of m
 * nodes stays inside leaves exactly when m divides every leaf's node count
 * (groups are contiguous in torus order), i.e. divides the gcd. One leaf:
 * 0, nothing crosses the spine. */
static uint32_t _leaf_ranks(const torus_layout_t *l)
{
    /* torus3d/ring: every ring hop is one direct link, a leaf's price. */
    if (l->ngroups <= 1 || l->coord_row)
        return 0;
    size_t g = 0;
    for (uint32_t i = 0; i < l->ngroups; i++)
        g = _gcd(g, l->group_start[i + 1] - l->group_start[i]);
    return (uint32_t)(g * l->tpn);
}

/* The one cost model's view of shape R x C on this layout: `cost`'s machine
 * part, this step's ranks, grid and leaves. Groups are the leaves, as in
 * TORUS_GROUP. The plugin does not know how the trainer will run (shared
 * memory, pipelining, in-place sums), so it prices the plain schedules. */
static void _model(const torus_layout_t *l, const torus_cost_t *cost,
                   uint32_t rows, uint32_t cols, torus_cost_t *m)
{
    *m = *cost;
    m->P = (int)l->tasks;
    m->ranks_per_node = (int)l->tpn;
    m->rows = (int)rows;
    m->cols = (int)cols;
    m->leaf_ranks = (int)l->leaf_ranks;
    m->group_size = l->leaf_ranks ? (int)l->leaf_ranks : (int)l->tasks;
    m->shm = 0;
    m->pipeline = 1;
    m->in_place = 0;
}

static double _predict_2d(const torus_layout_t *l, const torus_cost_t *cost,
                          uint32_t rows, uint32_t cols)
{
    torus_cost_t m;
    _model(l, cost, rows, cols, &m);
    return torus_cost_time(&m, TORUS_COST_TORUS2D, cost->bytes / 4, 4);
}

/* Is candidate (c, t) better than the incumbent (bc, bt)? Costs within one
 * part in 1e9 tie; then the squarer grid wins (shorter rings both ways),
 * then the smaller C. All of it is a pure function of the inputs. */
static bool _better(double t, uint32_t c, uint64_t p, double bt, uint32_t bc)
{
    if (t < bt * (1 - 1e-9))
        return true;
    if (t > bt * (1 + 1e-9))
        return false;
    double sq = fabs(log((double)c * c / (double)p)),
           bsq = fabs(log((double)bc * bc / (double)p));
    if (sq < bsq - 1e-12)
        return true;
    if (sq > bsq + 1e-12)
        return false;
    return c < bc;
}

/* Pick C for `auto`: every C = T*m with m | N, and every C | T. */
static void _choose_auto(torus_layout_t *l, const torus_cost_t *cost)
{
    uint32_t best_c = 0;
    double best_t = INFINITY;
    size_t best_clean_m = 1; /* largest nodes-per-row that stays in leaves */
    /* Divisors of T below T, found in pairs up to sqrt(T). */
    for (uint32_t d = 1; (uint64_t)d * d <= l->tpn; d++) {
        if (l->tpn % d)
            continue;
        uint32_t pair[2] = {d, l->tpn / d};
        for (int k = 0; k < (pair[0] == pair[1] ? 1 : 2); k++) {
            uint32_t c = pair[k];
            /* Shorter rows send the columns along the node order, which
             * is a physical ring on a torus only row by row. */
            if (c == l->tpn || l->coord_row > 1)
                continue;
            double t = _predict_2d(l, cost, (uint32_t)(l->tasks / c), c);
            if (best_c == 0 || _better(t, c, l->tasks, best_t, best_c))
                best_c = c, best_t = t;
        }
    }
    for (size_t m = 1; m <= l->nnodes; m++) {
        if (l->nnodes % m || (uint64_t)m * l->tpn > UINT32_MAX)
            continue;
        /* torus3d/ring: only the row length whose rings are physical. */
        if (l->coord_row ? m != l->coord_row : _crossing_rows(l, m) != 0)
            continue;
        best_clean_m = m;
        uint32_t c = (uint32_t)(m * l->tpn);
        double t = _predict_2d(l, cost, (uint32_t)(l->nnodes / m), c);
        if (best_c == 0 || _better(t, c, l->tasks, best_t, best_c))
            best_c = c, best_t = t;
    }
    l->cols = best_c;
    l->rows = (uint32_t)(l->tasks / best_c);
    l->crossing = 0;
    size_t used = strlen(l->reason);
    snprintf(l->reason + used, sizeof l->reason - used,
             "auto: %ux%u predicts %.3f ms per %llu-byte all-reduce; rows stay "
             "inside %s",
             l->rows, l->cols, best_t * 1e3, (unsigned long long)cost->bytes,
             l->cols <= l->tpn                 ? "one node"
             : l->coord_row                    ? "one line of the torus"
             : l->source == TORUS_SOURCE_BLOCK ? "one block"
                                               : "one leaf switch");
    used = strlen(l->reason);
    if (l->ngroups > 1 && best_clean_m < l->nnodes / l->ngroups)
        snprintf(l->reason + used, sizeof l->reason - used,
                 " (uneven leaf groups allow at most %zu node(s) per row)",
                 best_clean_m);
}

static torus_layout_rc _apply_explicit(torus_layout_t *l,
                                       const torus_layout_spec_t *spec)
{
    uint64_t want = (uint64_t)spec->rows * spec->cols;
    if (want != l->tasks)
        return TORUS_FAIL(
            TORUS_LAYOUT_ENOFIT,
            "%ux%u holds %llu tasks but the step has %llu (%zu nodes x %u)",
            spec->rows, spec->cols, (unsigned long long)want,
            (unsigned long long)l->tasks, l->nnodes, l->tpn);
    uint32_t c = spec->cols, t = l->tpn;
    if ((c >= t && c % t) || (c < t && t % c))
        return TORUS_FAIL(
            TORUS_LAYOUT_ENOFIT,
            "%ux%u: rows of %u tasks would split the %u tasks of a node "
            "(C must be a multiple or a divisor of the tasks per node)",
            spec->rows, spec->cols, c, t);
    l->rows = spec->rows;
    l->cols = c;
    l->crossing = c > t ? _crossing_rows(l, c / t) : 0;
    size_t used = strlen(l->reason);
    if (l->crossing)
        snprintf(l->reason + used, sizeof l->reason - used,
                 "explicit %ux%u: %u of %u rows span more than one leaf switch",
                 l->rows, l->cols, l->crossing, l->rows);
    else
        snprintf(l->reason + used, sizeof l->reason - used, "explicit %ux%u",
                 l->rows, l->cols);
    return TORUS_LAYOUT_OK;
}

static torus_layout_rc _check_input(const torus_layout_input_t *in)
{
    if (in->nnodes == 0 || !in->nodes || !in->tasks)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "no nodes in the step");
    if (in->nnodes > TORUS_LAYOUT_NODES_MAX)
        return TORUS_FAIL(TORUS_LAYOUT_ERANGE, "%zu nodes (at most %u)",
                          in->nnodes, TORUS_LAYOUT_NODES_MAX);
    for (size_t i = 0; i < in->nnodes; i++)
        if (!in->nodes[i] || in->tasks[i] == 0 ||
            in->tasks[i] > TORUS_LAYOUT_TASKS_MAX)
            return TORUS_FAIL(
                TORUS_LAYOUT_EINVAL,
                "node %zu has no name or an impossible task count", i);
    /* TORUS_COST_EINVAL is TORUS_LAYOUT_EINVAL: the code passes up as is. */
    int rc = torus_cost_check(&in->cost);
    if (rc)
        return (torus_layout_rc)rc;
    return TORUS_LAYOUT_OK;
}

/* Phase 1: an empty layout with its per-node arrays. */
static torus_layout_rc _alloc(const torus_layout_input_t *in,
                              torus_layout_t **out)
{
    size_t n = in->nnodes;
    torus_layout_t *l = calloc(1, sizeof *l);
    if (!l)
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    l->nnodes = n;
    /* No map: nodelist, unless the caller proved the topology flat from
     * SLURM_TOPOLOGY_ADDR (then "one group" is a fact, not a guess). */
    l->source = in->topo || in->source == TORUS_SOURCE_ADDR
                    ? in->source
                    : TORUS_SOURCE_NODELIST;
    if (in->topo && in->source == TORUS_SOURCE_TREE &&
        torus_layout_topo_kind_of(in->topo) == TORUS_TOPO_BLOCK)
        l->source = TORUS_SOURCE_BLOCK;
    l->order = malloc(n * sizeof *l->order);
    l->pos = malloc(n * sizeof *l->pos);
    l->group = malloc(n * sizeof *l->group);
    *out = l;
    if (!l->order || !l->pos || !l->group)
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    return TORUS_LAYOUT_OK;
}

/* Phase 2: each node's leaf switch (*leaf stays NULL without a map, or when
 * the map does not know one of the nodes). */
static torus_layout_rc _resolve_leaves(torus_layout_t *l,
                                       const torus_layout_input_t *in,
                                       uint32_t **leaf)
{
    size_t n = in->nnodes;
    *leaf = NULL;
    if (!in->topo)
        return TORUS_LAYOUT_OK;
    uint32_t *lf = malloc(n * sizeof *lf);
    if (!lf)
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    torus_layout_rc rc = torus_layout_topo_resolve(in->topo, in->nodes, n, lf);
    if (rc) {
        free(lf);
        return rc;
    }
    /* One node the map does not know makes the whole map useless for this
     * step: fall back for every node alike (deterministically). */
    for (size_t i = 0; i < n; i++) {
        if (lf[i] != TORUS_NO_SWITCH)
            continue;
        snprintf(l->reason, sizeof l->reason,
                 "node %.64s is not in the %s switch map, using the node "
                 "list; ",
                 in->nodes[i], torus_layout_source_name(in->source));
        free(lf);
        l->source = TORUS_SOURCE_NODELIST;
        return TORUS_LAYOUT_OK;
    }
    *leaf = lf;
    return TORUS_LAYOUT_OK;
}

/* Phase 2 for torus3d/ring maps: the node order that keeps rings physical
 * (coords.c). True when done; false to go on as with a switch map (the map
 * lacks one of the nodes: the node list, as for trees). */
static torus_layout_rc _coord_nodes(torus_layout_t *l,
                                    const torus_layout_input_t *in, bool *done)
{
    torus_layout_coord_order_t co;
    *done = false;
    torus_layout_rc rc = torus_layout_coords_order(
        torus_layout_topo_coords(in->topo), in->nodes, in->nnodes, &co);
    if (rc || !co.order) {
        snprintf(l->reason, sizeof l->reason, "%s", co.note);
        free(co.order);
        free(co.group);
        if (!rc)
            l->source = TORUS_SOURCE_NODELIST;
        return rc;
    }
    memcpy(l->order, co.order, l->nnodes * sizeof *l->order);
    memcpy(l->group, co.group, l->nnodes * sizeof *l->group);
    free(co.order);
    free(co.group);
    l->ngroups = co.ngroups;
    l->coord_row = co.nodes_per_row;
    l->source = torus_layout_topo_kind_of(in->topo) == TORUS_TOPO_RING
                    ? TORUS_SOURCE_RING
                    : TORUS_SOURCE_TORUS3D;
    snprintf(l->reason, sizeof l->reason, "%s", co.note);
    l->group_start = calloc((size_t)l->ngroups + 1, sizeof *l->group_start);
    l->group_switch = calloc(l->ngroups, sizeof *l->group_switch);
    if (!l->group_start || !l->group_switch)
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    /* Groups are contiguous in this order by construction. */
    for (size_t p = 0; p < l->nnodes; p++) {
        l->pos[l->order[p]] = p;
        l->group_start[l->group[l->order[p]] + 1]++;
    }
    for (uint32_t g = 0; g < l->ngroups; g++) {
        l->group_start[g + 1] += l->group_start[g];
        if (!(l->group_switch[g] = strdup(
                  torus_layout_coords_net(torus_layout_topo_coords(in->topo)))))
            return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    }
    *done = true;
    return TORUS_LAYOUT_OK;
}

/* Phase 3: total tasks and tasks per node (0 when not uniform). */
static torus_layout_rc _count_tasks(torus_layout_t *l,
                                    const torus_layout_input_t *in)
{
    l->tpn = in->tasks[0];
    for (size_t i = 0; i < in->nnodes; i++) {
        l->tasks += in->tasks[i];
        if (in->tasks[i] != l->tpn && l->tpn) {
            size_t used = strlen(l->reason);
            snprintf(l->reason + used, sizeof l->reason - used,
                     "torus off: tasks per node are not uniform (%.64s has %u, "
                     "%.64s has %u)",
                     in->nodes[0], in->tasks[0], in->nodes[i], in->tasks[i]);
            l->tpn = 0;
        }
    }
    l->leaf_ranks = _leaf_ranks(l);
    if (l->tasks > TORUS_LAYOUT_TASKS_MAX)
        return TORUS_FAIL(TORUS_LAYOUT_ERANGE, "%llu tasks (at most %u)",
                          (unsigned long long)l->tasks, TORUS_LAYOUT_TASKS_MAX);
    return TORUS_LAYOUT_OK;
}

/* Phase 4: the grid the spec asks for (off, explicit RxC or auto). */
static torus_layout_rc _apply_spec(torus_layout_t *l,
                                   const torus_layout_input_t *in)
{
    if (l->tpn == 0) {
        /* Non-uniform: a valid "off" result, not an error. */
        if (in->spec.kind == TORUS_SPEC_EXPLICIT)
            return TORUS_FAIL(TORUS_LAYOUT_ENOFIT, "%s", l->reason);
    } else if (in->spec.kind == TORUS_SPEC_OFF) {
        size_t used = strlen(l->reason);
        snprintf(l->reason + used, sizeof l->reason - used,
                 "torus off: spec is off");
    } else if (in->spec.kind == TORUS_SPEC_EXPLICIT) {
        torus_layout_rc rc = _apply_explicit(l, &in->spec);
        if (rc)
            return rc;
        l->enabled = true;
    } else {
        _choose_auto(l, &in->cost);
        l->enabled = true;
    }
    return TORUS_LAYOUT_OK;
}

torus_layout_rc torus_layout_compute(const torus_layout_input_t *in,
                                     torus_layout_t **out)
{
    *out = NULL;
    torus_layout_t *l = NULL;
    uint32_t *leaf = NULL;
    torus_layout_rc rc = _check_input(in);
    if (!rc)
        rc = _alloc(in, &l);
    bool coord = false;
    torus_layout_topo_kind kind = torus_layout_topo_kind_of(in->topo);
    if (!rc && (kind == TORUS_TOPO_TORUS3D || kind == TORUS_TOPO_RING))
        rc = _coord_nodes(l, in, &coord);
    if (!rc && !coord && l->source != TORUS_SOURCE_NODELIST)
        rc = _resolve_leaves(l, in, &leaf);
    if (!rc && !coord)
        rc = _order_nodes(l, leaf ? in->topo : NULL, leaf);
    if (!rc)
        rc = _count_tasks(l, in);
    if (!rc)
        rc = _apply_spec(l, in);
    free(leaf);
    if (rc) {
        torus_layout_free(l);
        return rc;
    }
    *out = l;
    return TORUS_LAYOUT_OK;
}

void torus_layout_predict(const torus_layout_t *l, const torus_cost_t *cost,
                          uint64_t bytes, torus_layout_prediction_t *out)
{
    if (!l->enabled) {
        *out = (torus_layout_prediction_t){0};
        return;
    }
    torus_cost_t m;
    _model(l, cost, l->rows, l->cols, &m);
    size_t count = (size_t)(bytes / 4);
    out->flat_ring_s = torus_cost_time(&m, TORUS_COST_RING, count, 4);
    out->hierarchical_s = torus_cost_time(&m, TORUS_COST_HIER, count, 4);
    out->torus2d_s = torus_cost_time(&m, TORUS_COST_TORUS2D, count, 4);
}
