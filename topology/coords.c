/*
 * coords.c: the coordinate topologies of Slurm 26.05, topology/torus3d and
 * topology/ring. slurmstepd gives each node its own place only, as
 * SLURM_TOPOLOGY_ADDR "NAME:X:Y:Z.node" (a torus) or "NAME:POS.node" (a
 * ring); a list of every node's address (torus-layout --topology-addr, the
 * plugin's topology_file=) is the map.
 *
 * The layout rule is the tree's: rows inside a node, then inside the lowest
 * level, columns across. Here the lowest level is a physical ring:
 *   - torus3d: when the step's nodes fill a box, rows run along one axis
 *     (node, then the next node on that axis) and the columns visit the
 *     plane of the two other axes along a Hamiltonian cycle, so that every
 *     hop of a column ring, the closing one included, is one torus link.
 *     A row along an axis closes through the torus's wrap link when the
 *     step spans that axis (or holds at most 2 nodes on it).
 *   - ring: rows stay inside a node and the columns follow the ring in
 *     position order.
 * Anything else (nodes off a box, two tori, a plane with no cycle) keeps
 * rows inside nodes with the nodes in coordinate order, and says so.
 * Deterministic: a pure function of the addresses and the step's names.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "topology/internal.h"

#define _NAMES_MAX   4096u                         /* tori / rings per map */
#define _ENTRIES_MAX (4u * TORUS_LAYOUT_NODES_MAX) /* addresses per map */
#define _COORD_MAX   (1u << 20)                    /* largest coordinate */

typedef struct {
    char *node;
    uint32_t net; /* index into names */
    uint32_t c[3];
} _entry_t;

struct torus_layout_coords {
    _entry_t *e;
    size_t count, cap;
    char **names;
    uint32_t nnames;
    int ndims; /* 3 (torus3d) or 1 (ring) */
};

torus_layout_rc torus_layout_coords_new(torus_layout_coords_t **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? TORUS_LAYOUT_OK : TORUS_LAYOUT_ENOMEM;
}

void torus_layout_coords_free(torus_layout_coords_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->count; i++)
        free(c->e[i].node);
    for (uint32_t i = 0; i < c->nnames; i++)
        free(c->names[i]);
    free(c->e);
    free(c->names);
    free(c);
}

/* A name: printable, no blanks and none of = . : # " ; bounded. */
static bool _name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= TORUS_LAYOUT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch >= 127 || strchr("=.:#\"", ch))
            return false;
    }
    return true;
}

/* Index of torus/ring `name` (n bytes), added when new. */
static torus_layout_rc _net(torus_layout_coords_t *c, const char *name,
                            size_t n, uint32_t *idx)
{
    for (uint32_t i = 0; i < c->nnames; i++)
        if (strlen(c->names[i]) == n && memcmp(c->names[i], name, n) == 0) {
            *idx = i;
            return TORUS_LAYOUT_OK;
        }
    if (c->nnames >= _NAMES_MAX)
        return TORUS_LAYOUT_ERANGE;
    char **names = realloc(c->names, (c->nnames + 1) * sizeof *names);
    if (!names)
        return TORUS_LAYOUT_ENOMEM;
    c->names = names;
    if (!(names[c->nnames] = strndup(name, n)))
        return TORUS_LAYOUT_ENOMEM;
    *idx = c->nnames++;
    return TORUS_LAYOUT_OK;
}

/* Split "NAME:a[:b:c]" (up to the node's dot) into its numbers. */
static int _numbers(const char *p, const char *end, uint32_t *v)
{
    int n = 0;
    while (p < end) {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        const char *stop = colon ? colon : end;
        uint64_t x;
        if (n == 3 || !torus_layout_parse_uint(p, stop, _COORD_MAX, &x))
            return -1;
        v[n++] = (uint32_t)x;
        p = colon ? colon + 1 : end;
        if (colon && p == end)
            return -1;
    }
    return n;
}

static torus_layout_rc _push(torus_layout_coords_t *c, const _entry_t *e)
{
    if (c->count >= _ENTRIES_MAX)
        return TORUS_LAYOUT_ERANGE;
    if (c->count == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        _entry_t *ne = realloc(c->e, cap * sizeof *ne);
        if (!ne)
            return TORUS_LAYOUT_ENOMEM;
        c->e = ne;
        c->cap = cap;
    }
    c->e[c->count++] = *e;
    return TORUS_LAYOUT_OK;
}

/* addr's numbers into v and their count (1 or 3) into *n, the separators
 * into *colon and *dot; TORUS_LAYOUT_EINVAL naming addr when it is not a
 * coordinate address. */
static torus_layout_rc _parse(const char *addr, size_t len, uint32_t v[3],
                              int *n, const char **colon, const char **dot)
{
    const char *end = addr + len;
    *dot = memchr(addr, '.', len);
    *colon = memchr(addr, ':', len);
    *n = *dot && *colon && *colon < *dot ? _numbers(*colon + 1, *dot, v) : -1;
    if (!*dot || memchr(*dot + 1, '.', (size_t)(end - *dot - 1)) || *n < 0 ||
        (*n != 1 && *n != 3) || !_name_ok(addr, (size_t)(*colon - addr)) ||
        !_name_ok(*dot + 1, (size_t)(end - *dot - 1)))
        return TORUS_FAIL(
            TORUS_LAYOUT_EINVAL,
            "SLURM_TOPOLOGY_ADDR '%.80s': expected NAME:X:Y:Z.node "
            "(torus3d) or NAME:POS.node (ring), coordinates "
            "0..%u",
            addr, _COORD_MAX);
    return TORUS_LAYOUT_OK;
}

torus_layout_rc torus_layout_coords_kind(const char *addr, size_t len,
                                         torus_layout_topo_kind *kind)
{
    uint32_t v[3];
    int n;
    const char *colon, *dot;
    torus_layout_rc rc = _parse(addr, len, v, &n, &colon, &dot);
    if (!rc)
        *kind = n == 3 ? TORUS_TOPO_TORUS3D : TORUS_TOPO_RING;
    return rc;
}

torus_layout_rc torus_layout_coords_add_addr(torus_layout_coords_t *c,
                                             const char *addr, size_t len)
{
    uint32_t v[3] = {0, 0, 0};
    int n;
    const char *colon, *dot, *end = addr + len;
    torus_layout_rc rc = _parse(addr, len, v, &n, &colon, &dot);
    if (rc)
        return rc;
    _entry_t e = {.c = {v[0], v[1], v[2]}};
    c->ndims = n;
    rc = _net(c, addr, (size_t)(colon - addr), &e.net);
    if (!rc && !(e.node = strndup(dot + 1, (size_t)(end - dot - 1))))
        rc = TORUS_LAYOUT_ENOMEM;
    if (!rc && (rc = _push(c, &e)))
        free(e.node);
    if (rc)
        return TORUS_FAIL(rc, "SLURM_TOPOLOGY_ADDR: %s",
                          torus_layout_strerror(rc));
    return TORUS_LAYOUT_OK;
}

/* ------------------------------------------------------------- ordering */

static int _by_node(const void *a, const void *b, void *arg)
{
    const _entry_t *e = arg;
    return strcmp(e[*(const size_t *)a].node, e[*(const size_t *)b].node);
}

/* For each step name, its entry (SIZE_MAX when the map lacks it). A node
 * listed twice with different places is an error. */
static torus_layout_rc _lookup(const torus_layout_coords_t *c,
                               const char *const *names, size_t count,
                               size_t *entry)
{
    size_t *idx = malloc((c->count + 1) * sizeof *idx);
    if (!idx)
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    for (size_t i = 0; i < c->count; i++)
        idx[i] = i;
    qsort_r(idx, c->count, sizeof *idx, _by_node, c->e);
    for (size_t i = 1; i < c->count; i++) {
        const _entry_t *a = &c->e[idx[i - 1]], *b = &c->e[idx[i]];
        if (strcmp(a->node, b->node) == 0 &&
            (a->net != b->net || memcmp(a->c, b->c, sizeof a->c))) {
            free(idx);
            return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                              "node %.64s has two different addresses",
                              a->node);
        }
    }
    for (size_t n = 0; n < count; n++) {
        size_t lo = 0, hi = c->count;
        entry[n] = SIZE_MAX;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int cmp = strcmp(c->e[idx[mid]].node, names[n]);
            if (cmp == 0) {
                entry[n] = idx[mid];
                break;
            }
            if (cmp < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
    }
    free(idx);
    return TORUS_LAYOUT_OK;
}

typedef struct {
    const _entry_t *e;
    const size_t *entry; /* node -> entry */
} _sort_ctx;

/* Coordinate order: torus/ring first, then Z, Y, X (ring: position). */
static int _by_place(const void *a, const void *b, void *arg)
{
    const _sort_ctx *x = arg;
    const _entry_t *ea = &x->e[x->entry[*(const size_t *)a]],
                   *eb = &x->e[x->entry[*(const size_t *)b]];
    if (ea->net != eb->net)
        return ea->net < eb->net ? -1 : 1;
    for (int d = 2; d >= 0; d--)
        if (ea->c[d] != eb->c[d])
            return ea->c[d] < eb->c[d] ? -1 : 1;
    return 0;
}

/* Cell k of a Hamiltonian cycle on a p x q grid (p*q <= 2, or p even, or
 * q even), as (u, v): along row 0 from v=1, snaking back and forth over
 * columns 1..q-1, then home along column 0. */
static void _cycle_cell(size_t p, size_t q, size_t k, size_t *u, size_t *v)
{
    if (p * q <= 2) {
        *u = k / q, *v = k % q;
        return;
    }
    if (p % 2) { /* q is even: walk the transpose */
        _cycle_cell(q, p, k, v, u);
        return;
    }
    size_t body = p * (q - 1);
    if (k < body) {
        *u = k / (q - 1);
        size_t off = k % (q - 1);
        *v = *u % 2 == 0 ? 1 + off : q - 1 - off;
    } else {
        *u = p - 1 - (k - body), *v = 0;
    }
}

static bool _has_cycle(size_t p, size_t q)
{
    return p * q <= 2 || (p >= 2 && q >= 2 && (p * q) % 2 == 0);
}

/* The step's nodes fill a box whose plane (axes other than `row`) has a
 * cycle: rows along `row`, columns around the plane. */
static void _box_order(const size_t *ext, int row, const size_t *cell,
                       torus_layout_coord_order_t *out)
{
    int pa = row == 0 ? 1 : 0, qa = row == 2 ? 1 : 2;
    size_t pos = 0;
    for (size_t k = 0; k < ext[pa] * ext[qa]; k++) {
        size_t u, v;
        _cycle_cell(ext[pa], ext[qa], k, &u, &v);
        for (size_t r = 0; r < ext[row]; r++) {
            size_t at[3];
            at[row] = r, at[pa] = u, at[qa] = v;
            size_t node = cell[(at[2] * ext[1] + at[1]) * ext[0] + at[0]];
            out->order[pos++] = node;
            out->group[node] = (uint32_t)k;
        }
    }
    out->ngroups = (uint32_t)(ext[pa] * ext[qa]);
    out->nodes_per_row = ext[row];
    snprintf(out->note, sizeof out->note,
             "torus3d: rows along the %c axis (%zu node(s)), columns around "
             "a %zux%zu cycle of the %c%c plane; ",
             "xyz"[row], ext[row], ext[pa], ext[qa], "xyz"[pa], "xyz"[qa]);
}

/* The box the step's nodes span (lo, ext); cell[] maps a box cell to its
 * node. False when the nodes are not exactly a box (or sit twice). */
static bool _box(const _entry_t *e, const size_t *entry, size_t count,
                 uint32_t *lo, size_t *ext, size_t **cell)
{
    uint32_t hi[3] = {0, 0, 0};
    lo[0] = lo[1] = lo[2] = UINT32_MAX;
    for (size_t n = 0; n < count; n++)
        for (int d = 0; d < 3; d++) {
            uint32_t x = e[entry[n]].c[d];
            lo[d] = x < lo[d] ? x : lo[d];
            hi[d] = x > hi[d] ? x : hi[d];
        }
    uint64_t vol = 1;
    for (int d = 0; d < 3; d++)
        vol *= (ext[d] = (size_t)(hi[d] - lo[d]) + 1);
    if (vol != count || !(*cell = malloc(count * sizeof **cell)))
        return false;
    memset(*cell, 0xff, count * sizeof **cell);
    for (size_t n = 0; n < count; n++) {
        const uint32_t *c = e[entry[n]].c;
        size_t k = ((c[2] - lo[2]) * ext[1] + (c[1] - lo[1])) * ext[0] +
                   (c[0] - lo[0]);
        if ((*cell)[k] != SIZE_MAX) {
            free(*cell);
            return false;
        }
        (*cell)[k] = n;
    }
    return true;
}

/* Rows inside nodes, nodes in coordinate order: the fallback. */
static void _plain_order(const _entry_t *e, const size_t *entry, size_t count,
                         const char *why, torus_layout_coord_order_t *out)
{
    for (size_t n = 0; n < count; n++) {
        out->order[n] = n;
        out->group[n] = 0;
    }
    _sort_ctx x = {e, entry};
    qsort_r(out->order, count, sizeof *out->order, _by_place, &x);
    out->ngroups = 1;
    out->nodes_per_row = 1;
    snprintf(out->note, sizeof out->note, "%s; ", why);
}

static bool _one_net(const _entry_t *e, const size_t *entry, size_t count)
{
    for (size_t n = 1; n < count; n++)
        if (e[entry[n]].net != e[entry[0]].net)
            return false;
    return true;
}

/* Ring: rows inside nodes, columns in position order; two nodes at one
 * position is a broken map. */
static torus_layout_rc _ring(const torus_layout_coords_t *c,
                             const size_t *entry, size_t count,
                             torus_layout_coord_order_t *out)
{
    bool one = _one_net(c->e, entry, count);
    _plain_order(c->e, entry, count,
                 one ? "ring: rows inside nodes, columns in ring order"
                     : "ring: the step spans several rings, columns cross "
                       "between them",
                 out);
    for (size_t p = 1; p < count; p++) {
        const _entry_t *a = &c->e[entry[out->order[p - 1]]],
                       *b = &c->e[entry[out->order[p]]];
        if (a->net == b->net && a->c[0] == b->c[0])
            return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                              "ring %s: two nodes at position %u",
                              c->names[a->net], a->c[0]);
    }
    return TORUS_LAYOUT_OK;
}

static torus_layout_rc _torus(const torus_layout_coords_t *c,
                              const size_t *entry, size_t count,
                              torus_layout_coord_order_t *out)
{
    uint32_t lo[3];
    size_t ext[3], *cell = NULL;
    if (!_one_net(c->e, entry, count)) {
        _plain_order(c->e, entry, count, "torus3d: the step spans several tori",
                     out);
        return TORUS_LAYOUT_OK;
    }
    if (!_box(c->e, entry, count, lo, ext, &cell)) {
        _plain_order(c->e, entry, count,
                     "torus3d: the nodes do not fill a box, rows stay "
                     "inside nodes",
                     out);
        return TORUS_LAYOUT_OK;
    }
    /* First axis (x, y, z) whose plane has a cycle: deterministic. */
    for (int row = 0; row < 3; row++) {
        int pa = row == 0 ? 1 : 0, qa = row == 2 ? 1 : 2;
        if (_has_cycle(ext[pa], ext[qa])) {
            _box_order(ext, row, cell, out);
            free(cell);
            return TORUS_LAYOUT_OK;
        }
    }
    free(cell);
    _plain_order(c->e, entry, count,
                 "torus3d: no plane of the box has a cycle, rows stay "
                 "inside nodes",
                 out);
    return TORUS_LAYOUT_OK;
}

torus_layout_rc torus_layout_coords_order(const torus_layout_coords_t *c,
                                          const char *const *names,
                                          size_t count,
                                          torus_layout_coord_order_t *out)
{
    *out = (torus_layout_coord_order_t){0};
    size_t *entry = malloc(count * sizeof *entry);
    out->order = malloc(count * sizeof *out->order);
    out->group = malloc(count * sizeof *out->group);
    if (!entry || !out->order || !out->group || !c) {
        free(entry);
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    }
    torus_layout_rc rc = _lookup(c, names, count, entry);
    for (size_t n = 0; !rc && n < count; n++)
        if (entry[n] == SIZE_MAX) {
            snprintf(out->note, sizeof out->note,
                     "node %.64s has no address in the %s map, using the "
                     "node list; ",
                     names[n], c->ndims == 3 ? "torus3d" : "ring");
            free(entry);
            free(out->order);
            out->order = NULL;
            return TORUS_LAYOUT_OK;
        }
    if (!rc)
        rc = c->ndims == 3 ? _torus(c, entry, count, out)
                           : _ring(c, entry, count, out);
    free(entry);
    return rc;
}

const char *torus_layout_coords_net(const torus_layout_coords_t *c)
{
    return c && c->nnames ? c->names[0] : "-";
}
