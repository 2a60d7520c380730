/*
 * switchmap.c: the switch map: which leaf switch (or block) each node hangs
 * under and how switches nest. Filled from Slurm's topology.conf
 * (SwitchName= lines of topology/tree, BlockName=/BlockSizes= lines of
 * topology/block), from topology.yaml (yaml.c), or from SLURM_TOPOLOGY_ADDR
 * strings ("spine.leaf1.n2"; the coordinate forms of topology/torus3d and
 * topology/ring, "t0:1:2:3.n5" and "r0:7.n5", are kept by coords.c).
 *
 * A block is a leaf with no parent: the layout's rule "rows inside the
 * lowest level" then reads "inside one block", and the cost model prices a
 * block as a leaf. One file may hold both forms (Slurm 22.05 to 23.02 only
 * know SwitchName; each plugin of 23.11+ reads its own lines): the caller
 * says which it wants and the other lines are checked, then set aside.
 *
 * Every slurmstepd of a step parses the same topology.conf that Slurm itself
 * reads, which is what lets the plugin lay out a step with zero controller
 * RPCs. The file is trusted less than Slurm trusts it: lines and names are
 * bounded and every error names the file and line.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <slurm/slurm.h>

#include "topology/internal.h"

#define _LINE_MAX   (1u << 20) /* one logical line, continuations included */
#define _SWITCH_MAX (1u << 20)
#define _TOPO_NODES_MAX                                  \
    (1u << 22) /* nodes of the whole cluster, all leaves \
                */

typedef struct {
    char *name;
    char *nodes;     /* Nodes= hostlist, or NULL */
    char *children;  /* Switches= hostlist, or NULL */
    uint32_t parent; /* TORUS_NO_SWITCH at a root */
    uint32_t line;   /* where it was defined, for messages */
    bool block;      /* a BlockName= line (else SwitchName=) */
    bool ignored;    /* the other kind than the one asked for */
} _switch_t;

struct torus_layout_topo {
    _switch_t *sw;
    size_t count, cap;
    uint32_t *slots; /* open-addressing table of switch indices + 1 */
    size_t nslots;
    torus_layout_topo_kind kind; /* TORUS_TOPO_ANY until something is added */
    uint32_t block_sizes[TORUS_LAYOUT_BLOCK_LEVELS_MAX];
    uint32_t nblock_sizes, block_sizes_line;
    torus_layout_coords_t *coords; /* torus3d / ring addresses (coords.c) */
};

torus_layout_rc torus_layout_topo_new(torus_layout_topo_t **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? TORUS_LAYOUT_OK : TORUS_LAYOUT_ENOMEM;
}

void torus_layout_topo_free(torus_layout_topo_t *topo)
{
    if (!topo)
        return;
    for (size_t i = 0; i < topo->count; i++) {
        free(topo->sw[i].name);
        free(topo->sw[i].nodes);
        free(topo->sw[i].children);
    }
    free(topo->sw);
    free(topo->slots);
    torus_layout_coords_free(topo->coords);
    free(topo);
}

size_t torus_layout_topo_switch_count(const torus_layout_topo_t *topo)
{
    return topo ? topo->count : 0;
}

torus_layout_topo_kind torus_layout_topo_kind_of(const torus_layout_topo_t *t)
{
    return t ? t->kind : TORUS_TOPO_ANY;
}

const char *torus_layout_topo_kind_name(torus_layout_topo_kind kind)
{
    switch (kind) {
    case TORUS_TOPO_TREE:
        return "tree";
    case TORUS_TOPO_BLOCK:
        return "block";
    case TORUS_TOPO_TORUS3D:
        return "torus3d";
    case TORUS_TOPO_RING:
        return "ring";
    case TORUS_TOPO_ANY:
        break;
    }
    return "any";
}

uint32_t torus_layout_topo_block_sizes(const torus_layout_topo_t *t,
                                       const uint32_t **sizes)
{
    *sizes = t->block_sizes;
    return t->nblock_sizes;
}

const torus_layout_coords_t *
torus_layout_topo_coords(const torus_layout_topo_t *t)
{
    return t ? t->coords : NULL;
}

/* Fix the kind of a map being filled; a second kind is an error. */
torus_layout_rc torus_layout_topo_set_kind(torus_layout_topo_t *t,
                                           torus_layout_topo_kind kind)
{
    if (t->kind != TORUS_TOPO_ANY && t->kind != kind)
        return TORUS_LAYOUT_EINVAL;
    t->kind = kind;
    if ((kind == TORUS_TOPO_TORUS3D || kind == TORUS_TOPO_RING) && !t->coords &&
        torus_layout_coords_new(&t->coords))
        return TORUS_LAYOUT_ENOMEM;
    return TORUS_LAYOUT_OK;
}

uint32_t torus_layout_topo_parent(const torus_layout_topo_t *topo, uint32_t sw)
{
    return topo->sw[sw].parent;
}

const char *torus_layout_topo_name(const torus_layout_topo_t *topo, uint32_t sw)
{
    return topo->sw[sw].name;
}

static uint32_t _find(const torus_layout_topo_t *topo, const char *name)
{
    if (!topo->nslots)
        return TORUS_NO_SWITCH;
    size_t mask = topo->nslots - 1;
    for (size_t i = torus_layout_hash(name) & mask;; i = (i + 1) & mask) {
        uint32_t v = topo->slots[i];
        if (v == 0)
            return TORUS_NO_SWITCH;
        if (strcmp(topo->sw[v - 1].name, name) == 0)
            return v - 1;
    }
}

/* Rebuild the hash table at twice the size (load factor stays <= 1/2). */
static torus_layout_rc _rehash(torus_layout_topo_t *topo, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return TORUS_LAYOUT_ENOMEM;
    for (size_t s = 0; s < topo->count; s++) {
        size_t i = torus_layout_hash(topo->sw[s].name) & (nslots - 1);
        while (slots[i])
            i = (i + 1) & (nslots - 1);
        slots[i] = (uint32_t)s + 1;
    }
    free(topo->slots);
    topo->slots = slots;
    topo->nslots = nslots;
    return TORUS_LAYOUT_OK;
}

/* Index of switch `name`, created when absent. */
static torus_layout_rc _get_or_add(torus_layout_topo_t *topo, const char *name,
                                   uint32_t line, uint32_t *idx, bool *created)
{
    *created = false;
    if ((*idx = _find(topo, name)) != TORUS_NO_SWITCH)
        return TORUS_LAYOUT_OK;
    if (topo->count >= _SWITCH_MAX)
        return TORUS_LAYOUT_ERANGE;
    if (topo->count == topo->cap) {
        size_t cap = topo->cap ? topo->cap * 2 : 16;
        _switch_t *sw = realloc(topo->sw, cap * sizeof *sw);
        if (!sw)
            return TORUS_LAYOUT_ENOMEM;
        topo->sw = sw;
        topo->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return TORUS_LAYOUT_ENOMEM;
    topo->sw[topo->count] =
        (_switch_t){.name = copy, .parent = TORUS_NO_SWITCH, .line = line};
    *idx = (uint32_t)topo->count++;
    *created = true;
    if (topo->count * 2 > topo->nslots)
        return _rehash(topo, topo->nslots ? topo->nslots * 2 : 32);
    size_t i = torus_layout_hash(name) & (topo->nslots - 1);
    while (topo->slots[i])
        i = (i + 1) & (topo->nslots - 1);
    topo->slots[i] = *idx + 1;
    return TORUS_LAYOUT_OK;
}

/* A switch or node name: printable, no blanks, no '=' or '.', bounded. */
static bool _valid_name(const char *s, size_t len)
{
    if (len == 0 || len >= TORUS_LAYOUT_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch >= 127 || ch == '=' || ch == '.' || ch == '#' ||
            ch == '"')
            return false;
    }
    return true;
}

/* Append ",name" (or "name") to a hostlist string. */
static torus_layout_rc _append(char **list, const char *name)
{
    size_t old = *list ? strlen(*list) : 0, add = strlen(name);
    if (old + add + 2 > TORUS_LAYOUT_LIST_MAX)
        return TORUS_LAYOUT_ERANGE;
    char *s = realloc(*list, old + add + 2);
    if (!s)
        return TORUS_LAYOUT_ENOMEM;
    if (old)
        s[old++] = ',';
    memcpy(s + old, name, add + 1);
    *list = s;
    return TORUS_LAYOUT_OK;
}

/* A coordinate address (torus3d, ring): its kind must be the map's, and
 * coords.c keeps it in the map's coordinate table. */
static torus_layout_rc _add_coords(torus_layout_topo_t *topo, const char *addr,
                                   size_t len)
{
    torus_layout_topo_kind kind;
    torus_layout_rc rc = torus_layout_coords_kind(addr, len, &kind);
    if (rc)
        return rc;
    rc = torus_layout_topo_set_kind(topo, kind);
    if (rc == TORUS_LAYOUT_EINVAL)
        return TORUS_FAIL(rc,
                          "SLURM_TOPOLOGY_ADDR '%.80s': a %s address among "
                          "%s addresses",
                          addr, torus_layout_topo_kind_name(kind),
                          torus_layout_topo_kind_name(topo->kind));
    if (rc)
        return TORUS_FAIL(rc, "SLURM_TOPOLOGY_ADDR: %s",
                          torus_layout_strerror(rc));
    return torus_layout_coords_add_addr(topo->coords, addr, len);
}

torus_layout_rc torus_layout_topo_add_addr(torus_layout_topo_t *topo,
                                           const char *addr)
{
    size_t len = strnlen(addr, TORUS_LAYOUT_LIST_MAX + 1);
    if (len == 0 || len > 16 * TORUS_LAYOUT_NAME_MAX)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "SLURM_TOPOLOGY_ADDR: empty or too long");
    const char *first_dot = memchr(addr, '.', len);
    if (memchr(addr, ':', first_dot ? (size_t)(first_dot - addr) : len))
        return _add_coords(topo, addr, len);
    if (len > 0 && memchr(addr, '.', len) &&
        torus_layout_topo_set_kind(topo, TORUS_TOPO_TREE))
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "SLURM_TOPOLOGY_ADDR '%.80s': a switch address "
                          "among %s addresses",
                          addr, torus_layout_topo_kind_name(topo->kind));
    char name[TORUS_LAYOUT_NAME_MAX];
    uint32_t parent = TORUS_NO_SWITCH;
    const char *p = addr, *end = addr + len;
    for (int depth = 0; p <= end; depth++) {
        if (depth > TORUS_LAYOUT_DEPTH_MAX)
            return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                              "SLURM_TOPOLOGY_ADDR: more than %d switch levels",
                              TORUS_LAYOUT_DEPTH_MAX);
        const char *dot = memchr(p, '.', (size_t)(end - p));
        const char *stop = dot ? dot : end;
        size_t n = (size_t)(stop - p);
        if (!_valid_name(p, n))
            return TORUS_FAIL(
                TORUS_LAYOUT_EINVAL,
                "SLURM_TOPOLOGY_ADDR '%.80s': bad component at offset %zu",
                addr, (size_t)(p - addr));
        memcpy(name, p, n);
        name[n] = '\0';
        if (!dot) {
            /* The last component is the node itself. */
            if (parent == TORUS_NO_SWITCH)
                return TORUS_LAYOUT_OK;
            torus_layout_rc rc = _append(&topo->sw[parent].nodes, name);
            return rc ? TORUS_FAIL(rc, "SLURM_TOPOLOGY_ADDR: %s",
                                   torus_layout_strerror(rc))
                      : TORUS_LAYOUT_OK;
        }
        uint32_t idx;
        bool created;
        torus_layout_rc rc = _get_or_add(topo, name, 0, &idx, &created);
        if (rc)
            return TORUS_FAIL(rc, "SLURM_TOPOLOGY_ADDR: %s",
                              torus_layout_strerror(rc));
        if (created)
            topo->sw[idx].parent = parent;
        else if (topo->sw[idx].parent != parent)
            return TORUS_FAIL(
                TORUS_LAYOUT_EINVAL,
                "SLURM_TOPOLOGY_ADDR '%.80s': switch %s has two parents", addr,
                name);
        parent = idx;
        p = dot + 1;
    }
    return TORUS_LAYOUT_OK;
}

/* Apply one "Key=Value" token of a SwitchName line to switch `sw`. */
static torus_layout_rc _apply(torus_layout_topo_t *topo, uint32_t sw,
                              const char *key, size_t klen, const char *val,
                              size_t vlen)
{
    char **slot = NULL;
    if (klen == 5 && strncasecmp(key, "Nodes", 5) == 0)
        slot = &topo->sw[sw].nodes;
    else if (topo->sw[sw].block)
        return TORUS_LAYOUT_EINVAL; /* a block has nodes only */
    else if (klen == 8 && strncasecmp(key, "Switches", 8) == 0)
        slot = &topo->sw[sw].children;
    else if (klen == 9 && strncasecmp(key, "LinkSpeed", 9) == 0)
        return TORUS_LAYOUT_OK; /* informational in Slurm too */
    else
        return TORUS_LAYOUT_EINVAL;
    if (vlen == 0 || *slot)
        return TORUS_LAYOUT_EINVAL;
    if (!(*slot = strndup(val, vlen)))
        return TORUS_LAYOUT_ENOMEM;
    return TORUS_LAYOUT_OK;
}

/* BlockSizes=4,16,64: the base block size and the aggregated ones, each a
 * power-of-two multiple of the one before (topology.conf(5)). */
static torus_layout_rc _block_sizes(torus_layout_topo_t *topo, const char *val,
                                    size_t vlen, const char *name,
                                    uint32_t lineno)
{
    if (topo->nblock_sizes)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s:%u: BlockSizes= already given on line %u", name,
                          lineno, topo->block_sizes_line);
    const char *p = val, *end = val + vlen;
    uint32_t n = 0;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        uint64_t v = 0;
        if (n >= TORUS_LAYOUT_BLOCK_LEVELS_MAX ||
            !torus_layout_parse_uint(p, stop, TORUS_LAYOUT_NODES_MAX, &v) ||
            v == 0)
            return TORUS_FAIL(
                TORUS_LAYOUT_EINVAL,
                "%s:%u: BlockSizes: '%.*s' is not a node count "
                "from 1 to %u (at most %u sizes)",
                name, lineno, (int)(stop - p < 20 ? stop - p : 20), p,
                TORUS_LAYOUT_NODES_MAX, TORUS_LAYOUT_BLOCK_LEVELS_MAX);
        uint64_t prev = n ? topo->block_sizes[n - 1] : 0;
        if (n && (v <= prev || v % prev || ((v / prev) & (v / prev - 1))))
            return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                              "%s:%u: BlockSizes: %llu is not a power-of-two "
                              "multiple of %llu",
                              name, lineno, (unsigned long long)v,
                              (unsigned long long)prev);
        topo->block_sizes[n++] = (uint32_t)v;
        p = comma ? comma + 1 : end + 1;
        if (comma && comma + 1 == end)
            return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                              "%s:%u: BlockSizes: trailing comma", name,
                              lineno);
    }
    if (n == 0)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s:%u: BlockSizes is empty",
                          name, lineno);
    topo->nblock_sizes = n;
    topo->block_sizes_line = lineno;
    return TORUS_LAYOUT_OK;
}

/* The head of a SwitchName= or BlockName= line: a new, unique entry. */
static torus_layout_rc _define(torus_layout_topo_t *topo, const char *tok,
                               size_t klen, const char *val, size_t vlen,
                               const char *name, uint32_t lineno, uint32_t *sw)
{
    bool block = klen == 9 && strncasecmp(tok, "BlockName", 9) == 0;
    if (!block && (klen != 10 || strncasecmp(tok, "SwitchName", 10) != 0))
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s:%u: a line must start with SwitchName=, "
                          "BlockName= or BlockSizes=",
                          name, lineno);
    const char *what = block ? "block" : "switch";
    if (!_valid_name(val, vlen))
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s:%u: bad %s name", name,
                          lineno, what);
    char sname[TORUS_LAYOUT_NAME_MAX];
    memcpy(sname, val, vlen);
    sname[vlen] = '\0';
    bool created;
    torus_layout_rc rc = _get_or_add(topo, sname, lineno, sw, &created);
    if (rc)
        return TORUS_FAIL(rc, "%s:%u: %s", name, lineno,
                          torus_layout_strerror(rc));
    if (!created)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s:%u: %s %s already defined on line %u", name,
                          lineno, what, sname, topo->sw[*sw].line);
    topo->sw[*sw].block = block;
    return TORUS_LAYOUT_OK;
}

/* One logical line, comments and continuations already removed. */
static torus_layout_rc _parse_line(torus_layout_topo_t *topo, char *line,
                                   const char *name, uint32_t lineno)
{
    uint32_t sw = TORUS_NO_SWITCH;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (!*p)
            break;
        char *tok = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
        size_t tlen = (size_t)(p - tok);
        char *eq = memchr(tok, '=', tlen);
        if (!eq)
            return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                              "%s:%u: '%.40s' is not Key=Value", name, lineno,
                              tok);
        size_t klen = (size_t)(eq - tok), vlen = tlen - klen - 1;
        if (sw == TORUS_NO_SWITCH) {
            if (klen == 10 && strncasecmp(tok, "BlockSizes", 10) == 0) {
                torus_layout_rc rc =
                    _block_sizes(topo, eq + 1, vlen, name, lineno);
                if (rc)
                    return rc;
                while (*p == ' ' || *p == '\t' || *p == '\r')
                    p++;
                if (*p)
                    return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                                      "%s:%u: BlockSizes= stands alone on "
                                      "its line",
                                      name, lineno);
                break;
            }
            torus_layout_rc rc =
                _define(topo, tok, klen, eq + 1, vlen, name, lineno, &sw);
            if (rc)
                return rc;
            continue;
        }
        torus_layout_rc rc = _apply(topo, sw, tok, klen, eq + 1, vlen);
        if (rc == TORUS_LAYOUT_ENOMEM)
            return TORUS_FAIL(rc, "%s:%u: out of memory", name, lineno);
        if (rc)
            return TORUS_FAIL(rc, "%s:%u: unexpected or repeated '%.*s' (%s)",
                              name, lineno, (int)(klen < 40 ? klen : 40), tok,
                              topo->sw[sw].block
                                  ? "a BlockName= line takes Nodes= only"
                                  : "expected Nodes=, Switches= or "
                                    "LinkSpeed=");
    }
    return TORUS_LAYOUT_OK;
}

/* After all lines: point every child switch at its parent, reject cycles. */
static torus_layout_rc _link(torus_layout_topo_t *topo, const char *name)
{
    for (size_t s = 0; s < topo->count; s++) {
        if (topo->sw[s].block && !topo->sw[s].ignored && !topo->sw[s].nodes)
            return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                              "%s:%u: block %s has no Nodes=", name,
                              topo->sw[s].line, topo->sw[s].name);
        if (!topo->sw[s].children || topo->sw[s].ignored)
            continue;
        hostlist_t hl = torus_layout_hostlist_sane(topo->sw[s].children)
                            ? slurm_hostlist_create(topo->sw[s].children)
                            : NULL;
        if (!hl)
            return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                              "%s:%u: Switches= is not a valid hostlist", name,
                              topo->sw[s].line);
        /* Bound before expanding: "s[1-99999999]" is short to write. */
        if (slurm_hostlist_count(hl) > (int)_SWITCH_MAX) {
            slurm_hostlist_destroy(hl);
            return TORUS_FAIL(TORUS_LAYOUT_ERANGE,
                              "%s:%u: Switches= lists more than %u switches",
                              name, topo->sw[s].line, _SWITCH_MAX);
        }
        char *child;
        torus_layout_rc rc = TORUS_LAYOUT_OK;
        while (rc == TORUS_LAYOUT_OK && (child = slurm_hostlist_shift(hl))) {
            uint32_t c = _find(topo, child);
            if (c == TORUS_NO_SWITCH || topo->sw[c].block)
                rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                                "%s:%u: switch %.64s is not defined", name,
                                topo->sw[s].line, child);
            else if (topo->sw[c].parent != TORUS_NO_SWITCH || c == s)
                rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                                "%s:%u: switch %.64s has more than one parent",
                                name, topo->sw[s].line, child);
            else
                topo->sw[c].parent = (uint32_t)s;
            free(child);
        }
        slurm_hostlist_destroy(hl);
        if (rc)
            return rc;
    }
    /* Each switch has one parent at most, so a cycle is a walk that never
     * ends; bounding the depth catches it and keeps every later walk short. */
    for (size_t s = 0; s < topo->count; s++) {
        uint32_t p = topo->sw[s].parent;
        for (size_t steps = 0; p != TORUS_NO_SWITCH; steps++) {
            if (p == s || steps >= TORUS_LAYOUT_DEPTH_MAX)
                return TORUS_FAIL(
                    TORUS_LAYOUT_EINVAL,
                    "%s:%u: switch %s is its own ancestor or more than "
                    "%d levels deep",
                    name, topo->sw[s].line, topo->sw[s].name,
                    TORUS_LAYOUT_DEPTH_MAX);
            p = topo->sw[p].parent;
        }
    }
    return TORUS_LAYOUT_OK;
}

/* Keep the lines of `kind` (ANY: the one kind the file holds) and set the
 * others aside, so a topology.conf written for two Slurm versions serves
 * both. */
static torus_layout_rc _select(torus_layout_topo_t *topo, const char *name,
                               torus_layout_topo_kind kind)
{
    bool tree = false, block = topo->nblock_sizes > 0;
    for (size_t s = 0; s < topo->count; s++)
        topo->sw[s].block ? (block = true) : (tree = true);
    if (kind == TORUS_TOPO_ANY && tree && block)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s: holds both SwitchName= (topology/tree) and "
                          "BlockName= (topology/block) lines: say which one "
                          "to use",
                          name);
    if (kind == TORUS_TOPO_ANY)
        kind = block ? TORUS_TOPO_BLOCK : TORUS_TOPO_TREE;
    if (kind != TORUS_TOPO_TREE && kind != TORUS_TOPO_BLOCK)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s: topology.conf has no %s form (use "
                          "topology.yaml or addresses)",
                          name, torus_layout_topo_kind_name(kind));
    for (size_t s = 0; s < topo->count; s++)
        topo->sw[s].ignored = topo->sw[s].block != (kind == TORUS_TOPO_BLOCK);
    topo->kind = kind;
    return TORUS_LAYOUT_OK;
}

torus_layout_rc torus_layout_topo_parse(const char *text, size_t len,
                                        const char *name,
                                        torus_layout_topo_t **out)
{
    return torus_layout_topo_parse_kind(text, len, name, TORUS_TOPO_TREE, out);
}

torus_layout_rc torus_layout_topo_parse_kind(const char *text, size_t len,
                                             const char *name,
                                             torus_layout_topo_kind kind,
                                             torus_layout_topo_t **out)
{
    torus_layout_topo_t *topo;
    if (torus_layout_topo_new(&topo))
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "%s: out of memory", name);
    char *line = malloc(_LINE_MAX + 1);
    if (!line) {
        torus_layout_topo_free(topo);
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "%s: out of memory", name);
    }
    torus_layout_rc rc = TORUS_LAYOUT_OK;
    size_t pos = 0, used = 0;
    uint32_t lineno = 0, start = 1;
    bool comment = false;
    while (rc == TORUS_LAYOUT_OK && pos <= len) {
        char ch = pos < len ? text[pos] : '\n';
        pos++;
        if (ch == '\0') {
            rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s:%u: NUL byte", name,
                            lineno + 1);
            break;
        }
        if (ch != '\n') {
            if (ch == '#')
                comment = true;
            if (comment)
                continue;
            if (used >= _LINE_MAX) {
                rc = TORUS_FAIL(TORUS_LAYOUT_ERANGE,
                                "%s:%u: line longer than %u bytes", name,
                                lineno + 1, _LINE_MAX);
                break;
            }
            line[used++] = ch;
            continue;
        }
        lineno++;
        comment = false;
        /* A trailing backslash joins the next physical line. */
        if (used && line[used - 1] == '\\') {
            line[used - 1] = ' ';
            continue;
        }
        line[used] = '\0';
        rc = _parse_line(topo, line, name, start);
        used = 0;
        start = lineno + 1;
    }
    free(line);
    if (rc == TORUS_LAYOUT_OK)
        rc = _select(topo, name, kind);
    if (rc == TORUS_LAYOUT_OK)
        rc = _link(topo, name);
    if (rc) {
        torus_layout_topo_free(topo);
        return rc;
    }
    *out = topo;
    return TORUS_LAYOUT_OK;
}

/* Read at most max bytes of f; one byte more fails (the file grew, or it is
 * not a regular file and fstat could not say). */
static torus_layout_rc _read_bounded(FILE *f, const char *path, size_t max,
                                     char **out, size_t *len)
{
    char *buf = malloc(max + 1);
    if (!buf)
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "%s: out of memory", path);
    size_t got = fread(buf, 1, max + 1, f);
    if (ferror(f)) {
        free(buf);
        return TORUS_FAIL(TORUS_LAYOUT_EIO, "%s: read error", path);
    }
    if (got > max) {
        free(buf);
        return TORUS_FAIL(TORUS_LAYOUT_ERANGE,
                          "%s: larger than %zu bytes (the topology.conf limit)",
                          path, max);
    }
    *out = buf;
    *len = got;
    return TORUS_LAYOUT_OK;
}

torus_layout_rc torus_layout_topo_load(const char *path, size_t max_bytes,
                                       torus_layout_topo_t **out)
{
    return torus_layout_topo_load_kind(path, max_bytes, TORUS_TOPO_TREE, out);
}

torus_layout_rc torus_layout_file_read(const char *path, size_t max_bytes,
                                       char **buf, size_t *len)
{
    if (max_bytes > TORUS_LAYOUT_TOPO_FILE_MAX)
        max_bytes = TORUS_LAYOUT_TOPO_FILE_MAX;
    FILE *f = fopen(path, "re");
    if (!f)
        return TORUS_FAIL(TORUS_LAYOUT_EIO, "%s: %s", path, strerror(errno));
    /* Refuse a big file before reading a byte of it: in slurmstepd this
     * runs as root, once per node per step. */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
        (uint64_t)st.st_size > max_bytes) {
        fclose(f);
        return TORUS_FAIL(TORUS_LAYOUT_ERANGE,
                          "%s: %llu bytes, larger than %zu (the topology.conf "
                          "limit)",
                          path, (unsigned long long)st.st_size, max_bytes);
    }
    torus_layout_rc rc = _read_bounded(f, path, max_bytes, buf, len);
    fclose(f);
    return rc;
}

torus_layout_rc torus_layout_topo_load_kind(const char *path, size_t max_bytes,
                                            torus_layout_topo_kind kind,
                                            torus_layout_topo_t **out)
{
    char *buf = NULL;
    size_t len = 0;
    torus_layout_rc rc = torus_layout_file_read(path, max_bytes, &buf, &len);
    if (rc == TORUS_LAYOUT_OK)
        rc = torus_layout_topo_parse_kind(buf, len, path, kind, out);
    free(buf);
    return rc;
}

torus_layout_rc torus_layout_topo_resolve(const torus_layout_topo_t *topo,
                                          const char *const *names,
                                          size_t count, uint32_t *leaf)
{
    /* Hash the step's nodes, then walk every leaf's node list once: memory
     * stays linear in the step, time linear in the topology file. */
    size_t nslots = 16;
    while (nslots < count * 2)
        nslots *= 2;
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    for (size_t n = 0; n < count; n++) {
        leaf[n] = TORUS_NO_SWITCH;
        size_t i = torus_layout_hash(names[n]) & (nslots - 1);
        while (slots[i])
            i = (i + 1) & (nslots - 1);
        slots[i] = (uint32_t)n + 1;
    }
    torus_layout_rc rc = TORUS_LAYOUT_OK;
    size_t total = 0;
    for (size_t s = 0; topo && s < topo->count && rc == TORUS_LAYOUT_OK; s++) {
        if (!topo->sw[s].nodes || topo->sw[s].ignored)
            continue;
        hostlist_t hl = torus_layout_hostlist_sane(topo->sw[s].nodes)
                            ? slurm_hostlist_create(topo->sw[s].nodes)
                            : NULL;
        if (!hl) {
            rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                            "switch %s: Nodes= is not a valid hostlist",
                            topo->sw[s].name);
            break;
        }
        total += (size_t)slurm_hostlist_count(hl);
        if (total > _TOPO_NODES_MAX) {
            slurm_hostlist_destroy(hl);
            rc = TORUS_FAIL(TORUS_LAYOUT_ERANGE,
                            "switch map lists more than %u nodes",
                            _TOPO_NODES_MAX);
            break;
        }
        char *node;
        while ((node = slurm_hostlist_shift(hl))) {
            for (size_t i = torus_layout_hash(node) & (nslots - 1); slots[i];
                 i = (i + 1) & (nslots - 1)) {
                uint32_t n = slots[i] - 1;
                /* Every duplicate of a name in the step gets the same leaf;
                 * the first switch listing a node wins, as in Slurm. */
                if (strcmp(names[n], node) == 0 && leaf[n] == TORUS_NO_SWITCH)
                    leaf[n] = (uint32_t)s;
            }
            free(node);
        }
        slurm_hostlist_destroy(hl);
    }
    free(slots);
    return rc;
}

torus_layout_rc torus_layout_topo_conf_path(const char *conf_path, char *buf,
                                            size_t len)
{
    return torus_layout_conf_sibling(conf_path, "topology.conf", buf, len);
}

torus_layout_rc torus_layout_conf_sibling(const char *conf_path,
                                          const char *file, char *buf,
                                          size_t len)
{
    if (!conf_path || !*conf_path)
        conf_path = getenv("SLURM_CONF");
    if (!conf_path || !*conf_path)
        conf_path = "/etc/slurm/slurm.conf";
    const char *slash = strrchr(conf_path, '/');
    int dirlen = slash ? (int)(slash - conf_path) : 1;
    const char *dir = slash ? conf_path : ".";
    if (slash == conf_path) /* "/slurm.conf" lives in "/" */
        dirlen = 0;
    int n = snprintf(buf, len, "%.*s/%s", dirlen, dir, file);
    return n < 0 || (size_t)n >= len ? TORUS_LAYOUT_ERANGE : TORUS_LAYOUT_OK;
}

/* ------------------------------------------------ filling from yaml.c */

static torus_layout_rc _set_list(char **slot, const char *val, const char *what,
                                 uint32_t line, const char *file)
{
    if (!val)
        return TORUS_LAYOUT_OK;
    size_t n = strnlen(val, TORUS_LAYOUT_LIST_MAX + 1);
    if (n == 0 || n > TORUS_LAYOUT_LIST_MAX)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s:%u: %s: empty or longer "
                          "than %u bytes",
                          file, line, what, TORUS_LAYOUT_LIST_MAX);
    if (!(*slot = strndup(val, n)))
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "%s:%u: out of memory", file,
                          line);
    return TORUS_LAYOUT_OK;
}

torus_layout_rc torus_layout_topo_define(torus_layout_topo_t *t,
                                         const char *name, bool block,
                                         const char *nodes,
                                         const char *children, uint32_t line,
                                         const char *file)
{
    size_t vlen = strnlen(name, TORUS_LAYOUT_NAME_MAX);
    const char *key = block ? "BlockName" : "SwitchName";
    uint32_t sw;
    torus_layout_rc rc =
        _define(t, key, strlen(key), name, vlen, file, line, &sw);
    if (!rc)
        rc = _set_list(&t->sw[sw].nodes, nodes, "nodes", line, file);
    if (!rc)
        rc = _set_list(&t->sw[sw].children, children, "children", line, file);
    return rc;
}

torus_layout_rc torus_layout_topo_define_sizes(torus_layout_topo_t *t,
                                               const char *text, uint32_t line,
                                               const char *file)
{
    return _block_sizes(t, text, strnlen(text, 4096), file, line);
}

torus_layout_rc torus_layout_topo_finish(torus_layout_topo_t *t,
                                         const char *file,
                                         torus_layout_topo_kind kind)
{
    torus_layout_rc rc = _select(t, file, kind);
    return rc ? rc : _link(t, file);
}
