/*
 * yaml.c: topology.yaml (Slurm 25.05+), several topologies in one file, one
 * per partition, read with libyaml into the same switch map as
 * topology.conf, plus the one slurm.conf lookup the choice needs (the
 * partition's Topology=).
 *
 *   - topology: NAME            (first key of each entry)
 *     cluster_default: true     (optional)
 *     tree:  {switches: [{switch: S, children: HOSTLIST, nodes: HOSTLIST}]}
 *     block: {block_sizes: [4, 16], blocks: [{block: B, nodes: HOSTLIST}]}
 *     flat: true
 *
 * The choice is Slurm's: the partition's Topology= names one; without it
 * the first with cluster_default: true, else the first. Every entry is
 * checked (a broken entry breaks the file for Slurm too), and every error
 * names the file and line. The file is hostile: its size is bounded before
 * libyaml sees it, its nesting is bounded (_DEPTH_MAX) by a pass of
 * libyaml's event parser before the document is built (building deep flow
 * collections is superlinear in libyaml: 100 KB of "[[[" took 7 s, and
 * slurmstepd reads the file for every step), aliases are refused (a
 * walk through them could repeat work without bound), and names and lists
 * go through the same checks as topology.conf's. topology.yaml's ring/torus3d
 * sections (26.05) are not read: give those nodes' addresses instead
 * (coords.c).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "topology/internal.h"

#define _TOPOLOGIES_MAX 1024u
/* Deepest nesting of collections taken; a real file has about 6. */
#define _DEPTH_MAX 64

typedef struct {
    yaml_document_t doc;
    const char *file;
    unsigned char *seen; /* node index -> visited (aliases are refused) */
    size_t nnodes;
} _ctx;

static unsigned _line(const yaml_node_t *n)
{
    return (unsigned)n->start_mark.line + 1;
}

/* The node `id`, visited once only. */
static torus_layout_rc _get(_ctx *x, int id, yaml_node_type_t type,
                            const char *what, yaml_node_t **out)
{
    yaml_node_t *n = yaml_document_get_node(&x->doc, id);
    if (!n || (size_t)id > x->nnodes)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s: %s missing", x->file, what);
    if (x->seen[id])
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s:%u: %s: YAML aliases are not accepted", x->file,
                          _line(n), what);
    x->seen[id] = 1;
    if (n->type != type)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s:%u: %s: expected a %s",
                          x->file, _line(n), what,
                          type == YAML_SCALAR_NODE     ? "value"
                          : type == YAML_SEQUENCE_NODE ? "list"
                                                       : "mapping");
    *out = n;
    return TORUS_LAYOUT_OK;
}

/* A scalar's text (NUL-terminated by libyaml; embedded NULs refused). */
static torus_layout_rc _scalar(_ctx *x, int id, const char *what,
                               const char **out)
{
    yaml_node_t *n;
    torus_layout_rc rc = _get(x, id, YAML_SCALAR_NODE, what, &n);
    if (rc)
        return rc;
    const char *v = (const char *)n->data.scalar.value;
    if (strlen(v) != n->data.scalar.length)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s:%u: %s: NUL byte", x->file,
                          _line(n), what);
    *out = v;
    return TORUS_LAYOUT_OK;
}

static torus_layout_rc _bool(_ctx *x, int id, const char *what, bool *out)
{
    const char *v;
    torus_layout_rc rc = _scalar(x, id, what, &v);
    if (rc)
        return rc;
    if (strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0)
        *out = true;
    else if (strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0)
        *out = false;
    else
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s:%u: %s: expected true or false", x->file,
                          _line(yaml_document_get_node(&x->doc, id)), what);
    return TORUS_LAYOUT_OK;
}

/* One {switch|block: NAME, nodes:, children:, link_speed:} entry. */
static torus_layout_rc _entry(_ctx *x, int id, bool block,
                              torus_layout_topo_t *t)
{
    const char *what = block ? "block" : "switch";
    yaml_node_t *m = NULL;
    torus_layout_rc rc = _get(x, id, YAML_MAPPING_NODE, what, &m);
    const char *name = NULL, *nodes = NULL, *children = NULL, *skip;
    for (yaml_node_pair_t *p = m ? m->data.mapping.pairs.start : NULL;
         !rc && p < m->data.mapping.pairs.top; p++) {
        const char *key;
        rc = _scalar(x, p->key, what, &key);
        if (rc)
            break;
        if (strcmp(key, what) == 0)
            rc = _scalar(x, p->value, what, &name);
        else if (strcmp(key, "nodes") == 0)
            rc = _scalar(x, p->value, "nodes", &nodes);
        else if (!block && strcmp(key, "children") == 0)
            rc = _scalar(x, p->value, "children", &children);
        else if (!block && strcmp(key, "link_speed") == 0)
            rc = _scalar(x, p->value, "link_speed", &skip);
        else
            rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                            "%s:%u: unknown key '%.40s' in a %s", x->file,
                            _line(m), key, what);
    }
    if (!rc && !name)
        rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s:%u: a %s without '%s:'",
                        x->file, _line(m), what, what);
    if (!rc)
        rc = torus_layout_topo_define(t, name, block, nodes, children, _line(m),
                                      x->file);
    return rc;
}

/* A list of entries (switches: or blocks:). */
static torus_layout_rc _entries(_ctx *x, int id, bool block,
                                torus_layout_topo_t *t)
{
    yaml_node_t *s = NULL;
    torus_layout_rc rc =
        _get(x, id, YAML_SEQUENCE_NODE, block ? "blocks" : "switches", &s);
    for (yaml_node_item_t *i = s ? s->data.sequence.items.start : NULL;
         !rc && i < s->data.sequence.items.top; i++)
        rc = _entry(x, *i, block, t);
    return rc;
}

/* block_sizes: [4, 16] into "4,16" for the topology.conf checks. */
static torus_layout_rc _sizes(_ctx *x, int id, torus_layout_topo_t *t)
{
    yaml_node_t *s = NULL;
    torus_layout_rc rc = _get(x, id, YAML_SEQUENCE_NODE, "block_sizes", &s);
    char text[TORUS_LAYOUT_BLOCK_LEVELS_MAX * 12] = "";
    size_t used = 0, n = 0;
    for (yaml_node_item_t *i = s ? s->data.sequence.items.start : NULL;
         !rc && i < s->data.sequence.items.top; i++, n++) {
        const char *v;
        rc = _scalar(x, *i, "block_sizes", &v);
        if (!rc && (n >= TORUS_LAYOUT_BLOCK_LEVELS_MAX || strlen(v) > 10))
            rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                            "%s:%u: block_sizes: more than %u sizes or a "
                            "size too long",
                            x->file, _line(s), TORUS_LAYOUT_BLOCK_LEVELS_MAX);
        if (!rc)
            used += (size_t)snprintf(text + used, sizeof text - used, "%s%s",
                                     n ? "," : "", v);
    }
    if (!rc)
        rc = torus_layout_topo_define_sizes(t, text, _line(s), x->file);
    return rc;
}

/* The body of tree: or block: (a mapping). */
static torus_layout_rc _body(_ctx *x, int id, bool block,
                             torus_layout_topo_t *t)
{
    yaml_node_t *m = NULL;
    torus_layout_rc rc =
        _get(x, id, YAML_MAPPING_NODE, block ? "block" : "tree", &m);
    for (yaml_node_pair_t *p = m ? m->data.mapping.pairs.start : NULL;
         !rc && p < m->data.mapping.pairs.top; p++) {
        const char *key;
        rc = _scalar(x, p->key, "key", &key);
        if (rc)
            break;
        if (strcmp(key, block ? "blocks" : "switches") == 0)
            rc = _entries(x, p->value, block, t);
        else if (block && strcmp(key, "block_sizes") == 0)
            rc = _sizes(x, p->value, t);
        else
            rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                            "%s:%u: unknown key '%.40s' in %s:", x->file,
                            _line(m), key, block ? "block" : "tree");
    }
    if (!rc)
        rc = torus_layout_topo_finish(
            t, x->file, block ? TORUS_TOPO_BLOCK : TORUS_TOPO_TREE);
    return rc;
}

typedef struct {
    const char *name;
    bool cluster_default, flat;
    torus_layout_topo_t *topo;
    unsigned line;
} _topology_t;

/* Phase of one key of a topology entry. */
static torus_layout_rc _topology_key(_ctx *x, const char *key,
                                     yaml_node_pair_t *p, _topology_t *out,
                                     int *types)
{
    if (strcmp(key, "cluster_default") == 0)
        return _bool(x, p->value, key, &out->cluster_default);
    bool flat = strcmp(key, "flat") == 0, block = strcmp(key, "block") == 0;
    if (!flat && !block && strcmp(key, "tree") != 0)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s:%u: topology %s: '%.40s' is not read here "
                          "(tree, block or flat; give torus3d/ring nodes as "
                          "addresses)",
                          x->file, out->line, out->name, key);
    /* One type per entry: a second would replace (and leak) the first. */
    if ((*types)++)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s:%u: topology %s needs exactly one of tree:, "
                          "block:, flat:",
                          x->file, out->line, out->name);
    if (flat)
        return _bool(x, p->value, key, &out->flat);
    if (torus_layout_topo_new(&out->topo))
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    return _body(x, p->value, block, out->topo);
}

static torus_layout_rc _topology(_ctx *x, int id, _topology_t *out)
{
    yaml_node_t *m = NULL;
    torus_layout_rc rc = _get(x, id, YAML_MAPPING_NODE, "topology", &m);
    if (rc)
        return rc;
    out->line = _line(m);
    int types = 0;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
         !rc && p < m->data.mapping.pairs.top; p++) {
        const char *key;
        rc = _scalar(x, p->key, "key", &key);
        if (rc)
            break;
        bool first = p == m->data.mapping.pairs.start;
        if (first != (strcmp(key, "topology") == 0))
            rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                            "%s:%u: 'topology: NAME' must be the first key "
                            "of each entry, and only the first",
                            x->file, out->line);
        else if (first)
            rc = _scalar(x, p->value, key, &out->name);
        else
            rc = _topology_key(x, key, p, out, &types);
    }
    if (!rc && types != 1)
        rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                        "%s:%u: topology %s needs exactly one of tree:, "
                        "block:, flat:",
                        x->file, out->line, out->name ? out->name : "?");
    return rc;
}

/* Slurm's choice: `want`, else the first cluster_default, else the first. */
static torus_layout_rc _choose(_ctx *x, _topology_t *tp, size_t n,
                               const char *want, size_t *pick)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(tp[i].name, tp[j].name) == 0)
                return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                                  "%s:%u: topology %s already defined on "
                                  "line %u",
                                  x->file, tp[i].line, tp[i].name, tp[j].line);
    *pick = 0;
    for (size_t i = n; i-- > 0;)
        if (want ? strcmp(tp[i].name, want) == 0 : tp[i].cluster_default)
            *pick = i;
    if (want && strcmp(tp[*pick].name, want) != 0)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s: no topology named '%.64s' (the partition's "
                          "Topology=)",
                          x->file, want);
    return TORUS_LAYOUT_OK;
}

static torus_layout_rc _document(_ctx *x, const char *want,
                                 torus_layout_topo_t **out, bool *flat)
{
    yaml_node_t *root = yaml_document_get_root_node(&x->doc), *s = NULL;
    if (!root)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s: empty", x->file);
    torus_layout_rc rc = _get(x, 1, YAML_SEQUENCE_NODE, "the file", &s);
    size_t n = rc ? 0
                  : (size_t)(s->data.sequence.items.top -
                             s->data.sequence.items.start);
    if (!rc && (n == 0 || n > _TOPOLOGIES_MAX))
        rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s: %zu topologies (1 to %u)",
                        x->file, n, _TOPOLOGIES_MAX);
    _topology_t *tp = rc ? NULL : calloc(n, sizeof *tp);
    if (!rc && !tp)
        rc = TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++)
        rc = _topology(x, s->data.sequence.items.start[i], &tp[i]);
    size_t pick = 0;
    if (!rc)
        rc = _choose(x, tp, n, want, &pick);
    if (!rc) {
        *flat = tp[pick].flat || !tp[pick].topo;
        *out = *flat ? NULL : tp[pick].topo;
        if (!*flat)
            tp[pick].topo = NULL;
    }
    for (size_t i = 0; tp && i < n; i++)
        torus_layout_topo_free(tp[i].topo);
    free(tp);
    return rc;
}

/* The event pass: refuses nesting deeper than _DEPTH_MAX, stopping at the
 * first collection past it, so a deep file costs a few tokens past
 * _DEPTH_MAX whatever its size. A syntax error is left to the load
 * that follows, which reports it with its line. */
static torus_layout_rc _check_depth(const char *text, size_t len,
                                    const char *name)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    torus_layout_rc rc = TORUS_LAYOUT_OK;
    int depth = 0, done = 0;
    while (!done && !rc) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev))
            break;
        yaml_event_type_t t = ev.type;
        size_t line = ev.start_mark.line + 1;
        yaml_event_delete(&ev);
        if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
            if (++depth > _DEPTH_MAX)
                rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                                "%s:%zu: collections nested deeper than %d "
                                "levels; refused",
                                name, line, _DEPTH_MAX);
        } else if (t == YAML_SEQUENCE_END_EVENT ||
                   t == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        done = t == YAML_STREAM_END_EVENT;
    }
    yaml_parser_delete(&p);
    return rc;
}

torus_layout_rc torus_layout_topo_parse_yaml(const char *text, size_t len,
                                             const char *name, const char *want,
                                             torus_layout_topo_t **out,
                                             bool *flat)
{
    _ctx x = {.file = name};
    yaml_parser_t parser;
    *out = NULL;
    *flat = false;
    if (memchr(text, '\0', len))
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s: NUL byte", name);
    torus_layout_rc drc = _check_depth(text, len, name);
    if (drc)
        return drc;
    if (!yaml_parser_initialize(&parser))
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &x.doc)) {
        torus_layout_rc rc =
            TORUS_FAIL(TORUS_LAYOUT_EINVAL, "%s:%zu: %s", name,
                       (size_t)parser.problem_mark.line + 1,
                       parser.problem ? parser.problem : "not YAML");
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_parser_delete(&parser);
    x.nnodes = (size_t)(x.doc.nodes.top - x.doc.nodes.start);
    x.seen = calloc(x.nnodes + 1, 1);
    torus_layout_rc rc = TORUS_LAYOUT_ENOMEM;
    if (x.seen)
        rc = _document(&x, want, out, flat);
    else
        TORUS_FAIL(rc, "out of memory");
    free(x.seen);
    yaml_document_delete(&x.doc);
    return rc;
}

torus_layout_rc torus_layout_topo_load_yaml(const char *path, size_t max_bytes,
                                            const char *want,
                                            torus_layout_topo_t **out,
                                            bool *flat)
{
    char *buf = NULL;
    size_t len = 0;
    torus_layout_rc rc = torus_layout_file_read(path, max_bytes, &buf, &len);
    if (!rc)
        rc = torus_layout_topo_parse_yaml(buf, len, path, want, out, flat);
    free(buf);
    return rc;
}

/* ------------------------------------------- slurm.conf: Topology= */

/* The value of token `key` on one slurm.conf line (NULL when absent). */
static const char *_token(char *line, const char *key, size_t *vlen)
{
    size_t klen = strlen(key);
    for (char *p = line; *p;) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        char *tok = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
        if ((size_t)(p - tok) > klen && tok[klen] == '=' &&
            strncasecmp(tok, key, klen) == 0) {
            *vlen = (size_t)(p - tok) - klen - 1;
            return tok + klen + 1;
        }
    }
    return NULL;
}

/* One line: PartitionName=DEFAULT sets the default Topology=, the named
 * partition takes its own or that default. */
static void _partition_line(char *line, const char *partition, char *def,
                            char *buf, size_t len, bool *found)
{
    size_t plen, tlen = 0;
    const char *p = _token(line, "PartitionName", &plen);
    if (!p)
        return;
    const char *t = _token(line, "Topology", &tlen);
    bool is_def = plen == 7 && strncasecmp(p, "DEFAULT", 7) == 0;
    if (is_def && t)
        snprintf(def, TORUS_LAYOUT_NAME_MAX, "%.*s", (int)tlen, t);
    if (!*found && plen == strlen(partition) &&
        strncmp(p, partition, plen) == 0) {
        *found = true;
        if (t)
            snprintf(buf, len, "%.*s", (int)tlen, t);
        else
            snprintf(buf, len, "%s", def);
    }
}

torus_layout_rc torus_layout_partition_topology(const char *conf_path,
                                                const char *partition,
                                                char *buf, size_t len)
{
    char *text = NULL, def[TORUS_LAYOUT_NAME_MAX] = "";
    size_t n = 0;
    bool found = false;
    buf[0] = '\0';
    torus_layout_rc rc = torus_layout_file_read(
        conf_path, TORUS_LAYOUT_TOPO_FILE_MAX, &text, &n);
    if (rc)
        return rc;
    text[n] = '\0';
    for (char *line = text, *next; line && !found; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        _partition_line(line, partition, def, buf, len, &found);
    }
    free(text);
    return TORUS_LAYOUT_OK;
}

/* ------------------------------------------------- any topology file */

bool torus_layout_topo_is_yaml(const char *path)
{
    size_t n = strlen(path);
    return (n >= 5 && strcmp(path + n - 5, ".yaml") == 0) ||
           (n >= 4 && strcmp(path + n - 4, ".yml") == 0);
}

torus_layout_rc torus_layout_topo_load_any(const char *path, size_t max_bytes,
                                           torus_layout_topo_kind kind,
                                           const char *want,
                                           torus_layout_topo_t **out,
                                           bool *flat)
{
    *out = NULL;
    *flat = false;
    size_t n = strlen(path);
    if (n >= 5 && strcmp(path + n - 5, ".addr") == 0) {
        char *buf = NULL;
        size_t len = 0;
        torus_layout_rc rc =
            torus_layout_file_read(path, max_bytes, &buf, &len);
        if (!rc)
            rc = torus_layout_topo_parse_addr(buf, len, path, out);
        free(buf);
        return rc;
    }
    if (!torus_layout_topo_is_yaml(path))
        return torus_layout_topo_load_kind(path, max_bytes, kind, out);
    torus_layout_rc rc =
        torus_layout_topo_load_yaml(path, max_bytes, want, out, flat);
    torus_layout_topo_kind got = torus_layout_topo_kind_of(*out);
    if (!rc && !*flat && kind != TORUS_TOPO_ANY && got != kind) {
        torus_layout_topo_free(*out);
        *out = NULL;
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "%s: the chosen topology is %s, not %s", path,
                          torus_layout_topo_kind_name(got),
                          torus_layout_topo_kind_name(kind));
    }
    return rc;
}

torus_layout_rc torus_layout_topo_parse_addr(const char *text, size_t len,
                                             const char *name,
                                             torus_layout_topo_t **out)
{
    char line[16 * TORUS_LAYOUT_NAME_MAX + 1];
    if (torus_layout_topo_new(out))
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    unsigned lineno = 0;
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - text) - pos : len - pos;
        lineno++;
        const char *hash = memchr(text + pos, '#', n);
        size_t used = hash ? (size_t)(hash - text) - pos : n;
        while (used && strchr(" \t\r", text[pos + used - 1]))
            used--;
        torus_layout_rc rc = TORUS_LAYOUT_OK;
        if (used >= sizeof line)
            rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL, "line too long");
        else if (memchr(text + pos, '\0', used))
            rc = TORUS_FAIL(TORUS_LAYOUT_EINVAL, "NUL byte");
        else if (used) {
            memcpy(line, text + pos, used);
            line[used] = '\0';
            rc = torus_layout_topo_add_addr(*out, line);
        }
        if (rc) {
            torus_layout_topo_free(*out);
            *out = NULL;
            return torus_error_prefix(rc, "%s:%u", name, lineno);
        }
        pos += n + 1;
    }
    return TORUS_LAYOUT_OK;
}
