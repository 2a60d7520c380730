/*
 * test_layout_topo.c: Check tests of the topology forms beyond trees
 * (block forms): topology/block lines, topology.yaml (with Slurm's choice of
 * the partition's topology), and the torus3d/ring address forms. Shapes are
 * held out from the code's own examples: uneven blocks, an allocation that
 * takes part of each of several blocks, one node, a torus box with an odd
 * side, a step off a box. Each layout is checked by its invariants (rows
 * inside one block; every ring of a torus3d grid a physical ring) and for
 * determinism, not by a snapshot.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "topology/torus_layout.h"

typedef struct {
    size_t n;
    char **names;
    uint32_t *tasks;
} step_t;

/* Nodes "n<id>" for the ids given, `tpn` tasks each. */
static step_t step_of(const int *ids, size_t n, uint32_t tpn)
{
    step_t s = {n, calloc(n, sizeof(char *)), calloc(n, sizeof(uint32_t))};
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_ne(asprintf(&s.names[i], "n%d", ids[i]), -1);
        s.tasks[i] = tpn;
    }
    return s;
}

static void step_free(step_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->names[i]);
    free(s->names);
    free(s->tasks);
}

static torus_layout_t *lay(const step_t *s, const torus_layout_topo_t *topo,
                           const char *spec)
{
    torus_layout_input_t in = {.nnodes = s->n,
                               .nodes = (const char *const *)s->names,
                               .tasks = s->tasks,
                               .topo = topo,
                               .source = TORUS_SOURCE_TREE};
    torus_cost_defaults(&in.cost);
    ck_assert_int_eq(torus_layout_spec_parse(spec, &in.spec), 0);
    torus_layout_t *l = NULL;
    ck_assert_msg(torus_layout_compute(&in, &l) == 0, "%s", torus_error_msg());
    return l;
}

static torus_layout_topo_t *conf(const char *text, torus_layout_topo_kind k)
{
    torus_layout_topo_t *t = NULL;
    ck_assert_msg(
        torus_layout_topo_parse_kind(text, strlen(text), "t.conf", k, &t) == 0,
        "%s", torus_error_msg());
    return t;
}

static void conf_fails(const char *text, torus_layout_topo_kind k,
                       const char *msg)
{
    torus_layout_topo_t *t = NULL;
    ck_assert_int_ne(
        torus_layout_topo_parse_kind(text, strlen(text), "t.conf", k, &t), 0);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(torus_error_msg(), msg), "'%s' lacks '%s'",
                  torus_error_msg(), msg);
}

/* Every row of the grid sits inside one group (block), and the grid is a
 * permutation of the tasks. */
static void rows_in_groups(const step_t *s, const torus_layout_t *l)
{
    uint32_t R = torus_layout_rows(l), C = torus_layout_cols(l);
    uint32_t *g = malloc(R * sizeof *g);
    unsigned char *seen = calloc((size_t)R * C, 1);
    for (uint32_t r = 0; r < R; r++)
        g[r] = UINT32_MAX;
    for (size_t n = 0; n < s->n; n++)
        for (uint32_t t = 0; t < s->tasks[n]; t++) {
            torus_layout_task_t k;
            ck_assert_int_eq(torus_layout_place(l, n, t, &k), 0);
            ck_assert(!seen[(size_t)k.row * C + k.col]);
            seen[(size_t)k.row * C + k.col] = 1;
            if (g[k.row] == UINT32_MAX)
                g[k.row] = k.group;
            ck_assert_msg(g[k.row] == k.group, "row %u spans groups %u, %u",
                          k.row, g[k.row], k.group);
        }
    free(g);
    free(seen);
}

START_TEST(block_uneven_partial)
{
    /* Blocks of 4, 2 and 6 nodes; the step takes 2 of b1, all of b2 and 2
     * of b3, listed out of block order. */
    torus_layout_topo_t *t = conf("BlockName=b1 Nodes=n[1-4]\n"
                                  "BlockName=b2 Nodes=n[5-6]\n"
                                  "BlockName=b3 Nodes=n[7-12]\n"
                                  "BlockSizes=2,4\n",
                                  TORUS_TOPO_ANY);
    ck_assert_int_eq(torus_layout_topo_kind_of(t), TORUS_TOPO_BLOCK);
    const uint32_t *sizes;
    ck_assert_uint_eq(torus_layout_topo_block_sizes(t, &sizes), 2);
    ck_assert_uint_eq(sizes[1], 4);
    int ids[] = {9, 3, 5, 10, 4, 6};
    step_t s = step_of(ids, 6, 4);
    torus_layout_t *l = lay(&s, t, "auto");
    ck_assert_int_eq(torus_layout_source_of(l), TORUS_SOURCE_BLOCK);
    ck_assert_uint_eq(torus_layout_group_count(l), 3);
    rows_in_groups(&s, l);
    /* Every block holds 2 nodes of the step: rows of up to 2 nodes. */
    ck_assert_uint_le(torus_layout_cols(l), 8);
    ck_assert(strstr(torus_layout_reason(l), "one block") ||
              strstr(torus_layout_reason(l), "one node"));
    /* Deterministic: the same inputs, the same grid and node order. */
    torus_layout_t *l2 = lay(&s, t, "auto");
    ck_assert_uint_eq(torus_layout_cols(l2), torus_layout_cols(l));
    for (size_t p = 0; p < s.n; p++)
        ck_assert_uint_eq(torus_layout_node_at(l2, p),
                          torus_layout_node_at(l, p));
    torus_layout_free(l2);
    torus_layout_free(l);
    step_free(&s);
    /* One node of b3 alone: one group, rows inside the node. */
    int one[] = {11};
    s = step_of(one, 1, 8);
    l = lay(&s, t, "auto");
    ck_assert_uint_eq(torus_layout_group_count(l), 1);
    ck_assert_uint_eq((uint64_t)torus_layout_rows(l) * torus_layout_cols(l), 8);
    torus_layout_free(l);
    step_free(&s);
    torus_layout_topo_free(t);
}
END_TEST

START_TEST(block_lines_and_errors)
{
    const char *both = "SwitchName=s1 Nodes=n[1-4]\n"
                       "BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n";
    conf_fails(both, TORUS_TOPO_ANY, "both SwitchName=");
    /* Each kind keeps its own lines. */
    torus_layout_topo_t *t = conf(both, TORUS_TOPO_TREE);
    int ids[] = {1, 2, 3, 4};
    step_t s = step_of(ids, 4, 2);
    torus_layout_t *l = lay(&s, t, "auto");
    ck_assert_uint_eq(torus_layout_group_count(l), 1);
    torus_layout_free(l);
    torus_layout_topo_free(t);
    t = conf(both, TORUS_TOPO_BLOCK);
    l = lay(&s, t, "auto");
    ck_assert_uint_eq(torus_layout_group_count(l), 2);
    torus_layout_free(l);
    torus_layout_topo_free(t);
    step_free(&s);
    conf_fails("BlockName=b1 Nodes=n1\nBlockSizes=4,12\n", TORUS_TOPO_ANY,
               "t.conf:2: BlockSizes: 12 is not a power-of-two multiple of 4");
    conf_fails("BlockSizes=4,0\n", TORUS_TOPO_ANY, "t.conf:1:");
    conf_fails("BlockSizes=4,\n", TORUS_TOPO_ANY, "trailing comma");
    conf_fails("BlockSizes=2\nBlockSizes=4\n", TORUS_TOPO_ANY,
               "t.conf:2: BlockSizes= already given on line 1");
    conf_fails("BlockName=b1\n", TORUS_TOPO_ANY, "t.conf:1: block b1 has no");
    conf_fails("BlockName=b1 Nodes=n1 Switches=b2\n", TORUS_TOPO_ANY,
               "takes Nodes= only");
    conf_fails("BlockName=b1 Nodes=n1\nBlockName=b1 Nodes=n2\n", TORUS_TOPO_ANY,
               "t.conf:2: block b1 already defined on line 1");
    conf_fails("BlockSizes=2 BlockName=b1\n", TORUS_TOPO_ANY, "stands alone");
}
END_TEST

static torus_layout_topo_t *yaml(const char *text, const char *want, bool *flat)
{
    torus_layout_topo_t *t = NULL;
    ck_assert_msg(torus_layout_topo_parse_yaml(text, strlen(text), "t.yaml",
                                               want, &t, flat) == 0,
                  "%s", torus_error_msg());
    return t;
}

static void yaml_fails(const char *text, const char *msg)
{
    torus_layout_topo_t *t = NULL;
    bool flat;
    ck_assert_int_ne(torus_layout_topo_parse_yaml(text, strlen(text), "t.yaml",
                                                  NULL, &t, &flat),
                     0);
    ck_assert_msg(strstr(torus_error_msg(), msg), "'%s' lacks '%s'",
                  torus_error_msg(), msg);
}

static const char _yaml[] = "- topology: a\n"
                            "  tree:\n"
                            "    switches:\n"
                            "      - switch: top\n"
                            "        children: l[1-2]\n"
                            "      - switch: l1\n"
                            "        nodes: n[1-3]\n"
                            "      - switch: l2\n"
                            "        nodes: n[4-6]\n"
                            "- topology: b\n"
                            "  cluster_default: true\n"
                            "  block:\n"
                            "    block_sizes: [2, 4]\n"
                            "    blocks:\n"
                            "      - block: b1\n"
                            "        nodes: n[1-2]\n"
                            "      - block: b2\n"
                            "        nodes: n[3-6]\n"
                            "- topology: c\n"
                            "  cluster_default: true\n"
                            "  flat: true\n";

START_TEST(yaml_choice)
{
    bool flat;
    /* No Topology=: the first cluster_default (b), not the first (a). */
    torus_layout_topo_t *t = yaml(_yaml, NULL, &flat);
    ck_assert(!flat);
    ck_assert_int_eq(torus_layout_topo_kind_of(t), TORUS_TOPO_BLOCK);
    torus_layout_topo_free(t);
    t = yaml(_yaml, "a", &flat);
    ck_assert_int_eq(torus_layout_topo_kind_of(t), TORUS_TOPO_TREE);
    int ids[] = {2, 5, 1, 6};
    step_t s = step_of(ids, 4, 2);
    torus_layout_t *l = lay(&s, t, "auto");
    ck_assert_uint_eq(torus_layout_group_count(l), 2);
    rows_in_groups(&s, l);
    torus_layout_free(l);
    torus_layout_topo_free(t);
    step_free(&s);
    t = yaml(_yaml, "c", &flat);
    ck_assert(flat);
    ck_assert_ptr_null(t);
    /* No cluster_default at all: the first. */
    t = yaml("- topology: x\n  block:\n    blocks:\n      - block: q\n"
             "        nodes: n1\n- topology: y\n  flat: true\n",
             NULL, &flat);
    ck_assert_int_eq(torus_layout_topo_kind_of(t), TORUS_TOPO_BLOCK);
    torus_layout_topo_free(t);
    torus_layout_topo_t *none = NULL;
    ck_assert_int_ne(torus_layout_topo_parse_yaml(_yaml, strlen(_yaml),
                                                  "t.yaml", "zz", &none, &flat),
                     0);
    ck_assert(strstr(torus_error_msg(), "no topology named 'zz'"));
}
END_TEST

START_TEST(yaml_errors)
{
    yaml_fails("- topology: a\n  tree:\n    switches: [\n", "t.yaml:");
    yaml_fails("topology: a\n", "expected a list");
    yaml_fails("- tree: {}\n  topology: a\n", "t.yaml:1: 'topology: NAME'");
    yaml_fails("- topology: a\n  flat: true\n  block: {blocks: []}\n",
               "exactly one of");
    yaml_fails("- topology: a\n  ring: {}\n", "is not read here");
    yaml_fails("- topology: a\n  block:\n    block_sizes: [2, 3]\n"
               "    blocks:\n      - block: b\n        nodes: n1\n",
               "t.yaml:3: BlockSizes: 3 is not a power-of-two multiple of 2");
    yaml_fails("- topology: a\n  tree:\n    switches:\n      - switch: s\n"
               "        nodez: n1\n",
               "t.yaml:4: unknown key 'nodez' in a switch");
    yaml_fails("- topology: a\n  flat: true\n- topology: a\n  flat: true\n",
               "t.yaml:3: topology a already defined on line 1");
    /* Aliases could make a walk repeat work without bound: refused. */
    yaml_fails("- topology: a\n  tree:\n    switches:\n"
               "      - &s {switch: s, nodes: n1}\n      - *s\n",
               "aliases are not accepted");
    yaml_fails("- topology: a\n  cluster_default: maybe\n  flat: true\n",
               "expected true or false");
    /* A node of the wrong type where a list or mapping belongs (found by
     * fuzz_parsers: the walk used the node it had not got). */
    yaml_fails("- topology: a\n  block:\n    blocks: x\n",
               "t.yaml:3: blocks: expected a list");
    yaml_fails("- topology: a\n  tree:\n    switches:\n      - [s]\n",
               "switch: expected a mapping");
    yaml_fails("- topology: a\n  tree: [x]\n", "tree: expected a mapping");
    yaml_fails("- topology: a\n  block:\n    block_sizes: 4\n",
               "block_sizes: expected a list");
    yaml_fails("- topology: a\n  tree: {switches: []}\n"
               "  block: {blocks: []}\n",
               "t.yaml:1: topology a needs exactly one of");
}
END_TEST

/* Deep nesting is refused by the depth pass before libyaml builds the
 * document: 1 MB of flow sequences, or of block mappings, in well under
 * 100 ms of CPU (libyaml alone took more than 5 minutes on the first);
 * 64 levels, the limit, still parse (and fail later for what they hold). */
static void yaml_deep(const char *open, size_t depth, const char *close)
{
    size_t ol = strlen(open), cl = strlen(close);
    char *t = malloc(depth * (ol + cl) + 1), *p = t;
    ck_assert_ptr_nonnull(t);
    for (size_t i = 0; i < depth; i++, p += ol)
        memcpy(p, open, ol);
    for (size_t i = 0; i < depth; i++, p += cl)
        memcpy(p, close, cl);
    *p = 0;
    torus_layout_topo_t *out = NULL;
    bool flat;
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    torus_layout_rc rc =
        torus_layout_topo_parse_yaml(t, strlen(t), "t.yaml", NULL, &out, &flat);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    ck_assert_int_ne(rc, TORUS_LAYOUT_OK);
    ck_assert_ptr_null(out);
    if (depth > 64) {
        ck_assert_msg(strstr(torus_error_msg(), "t.yaml:1: collections nested "
                                                "deeper than 64 levels"),
                      "depth %zu: %s", depth, torus_error_msg());
        ck_assert_msg(ms < 100, "depth %zu: refused after %.1f ms", depth, ms);
    } else {
        ck_assert_ptr_null(strstr(torus_error_msg(), "nested deeper"));
    }
    free(t);
}

START_TEST(yaml_nesting)
{
    yaml_deep("[", 512 * 1024, "]");    /* 1 MB */
    yaml_deep("{a: ", 100 * 1024, "}"); /* 500 KB of flow mappings */
    yaml_deep("- ", 64, "");            /* the limit: parsed */
    yaml_deep("[", 64, "]");
    yaml_deep("[", 65, "]");
}
END_TEST

/* Two torus coordinates one link apart (a side of 2 has no wrap link
 * distinct from the direct one; longer sides are not wrapped here). */
static bool neighbours(const int *a, const int *b)
{
    int d = 0;
    for (int k = 0; k < 3; k++)
        d += abs(a[k] - b[k]);
    return d == 1;
}

/* Every column ring of the grid visits neighbours only, the closing hop
 * included; every row lies on one axis line. */
static void rings_physical(const step_t *s, const torus_layout_t *l,
                           int (*xyz)[3])
{
    uint32_t R = torus_layout_rows(l), C = torus_layout_cols(l),
             T = s->tasks[0];
    size_t *node_at = malloc((size_t)R * C * sizeof *node_at);
    for (size_t n = 0; n < s->n; n++)
        for (uint32_t t = 0; t < T; t++) {
            torus_layout_task_t k;
            ck_assert_int_eq(torus_layout_place(l, n, t, &k), 0);
            node_at[(size_t)k.row * C + k.col] = n;
        }
    for (uint32_t c = 0; c < C && R > 1; c++)
        for (uint32_t r = 0; r < R; r++) {
            size_t a = node_at[(size_t)r * C + c],
                   b = node_at[(size_t)((r + 1) % R) * C + c];
            ck_assert_msg(a == b || neighbours(xyz[a], xyz[b]),
                          "column %u: %s -> %s is not one link", c, s->names[a],
                          s->names[b]);
        }
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t c = 1; c < C; c++) {
            size_t a = node_at[(size_t)r * C + c - 1],
                   b = node_at[(size_t)r * C + c];
            ck_assert_msg(a == b || neighbours(xyz[a], xyz[b]),
                          "row %u: %s -> %s is not one link", r, s->names[a],
                          s->names[b]);
        }
    free(node_at);
}

/* A torus3d map of an X x Y x Z box (node ids in a shuffled order). */
static void torus_case(int X, int Y, int Z, uint32_t tpn, uint32_t want_row)
{
    int n = X * Y * Z;
    int(*xyz)[3] = calloc((size_t)n, sizeof *xyz);
    int *ids = calloc((size_t)n, sizeof *ids);
    torus_layout_topo_t *t;
    ck_assert_int_eq(torus_layout_topo_new(&t), 0);
    for (int i = 0; i < n; i++) {
        int k = (i * 7 + 3) % n; /* n coprime with 7 in every case here */
        xyz[k][0] = i % X, xyz[k][1] = (i / X) % Y, xyz[k][2] = i / (X * Y);
        ids[k] = 100 + i;
        char addr[64];
        snprintf(addr, sizeof addr, "t0:%d:%d:%d.n%d", xyz[k][0], xyz[k][1],
                 xyz[k][2], 100 + i);
        ck_assert_msg(torus_layout_topo_add_addr(t, addr) == 0, "%s",
                      torus_error_msg());
    }
    step_t s = step_of(ids, (size_t)n, tpn);
    torus_layout_t *l = lay(&s, t, "auto");
    ck_assert_int_eq(torus_layout_source_of(l), TORUS_SOURCE_TORUS3D);
    /* One node: any row inside it will do (the model picks). */
    ck_assert_msg(n == 1 || torus_layout_cols(l) == want_row * tpn,
                  "%ux%ux%u: %s", X, Y, Z, torus_layout_reason(l));
    rings_physical(&s, l, xyz);
    torus_layout_free(l);
    step_free(&s);
    torus_layout_topo_free(t);
    free(xyz);
    free(ids);
}

START_TEST(torus3d_boxes)
{
    torus_case(2, 2, 2, 4, 2); /* rows along x, columns around y-z */
    torus_case(3, 4, 1, 1, 1); /* no cycle on y-z or x-z: rows along z */
    torus_case(5, 2, 3, 2, 5);
    torus_case(1, 1, 1, 8, 1); /* one node */
}
END_TEST

START_TEST(torus3d_off_box_and_ring)
{
    torus_layout_topo_t *t;
    ck_assert_int_eq(torus_layout_topo_new(&t), 0);
    const char *a[] = {"t0:0:0:0.n1", "t0:1:0:0.n2", "t0:0:1:0.n3",
                       "t0:5:5:5.n4"};
    for (size_t i = 0; i < 4; i++)
        ck_assert_int_eq(torus_layout_topo_add_addr(t, a[i]), 0);
    int ids[] = {4, 3, 2, 1};
    step_t s = step_of(ids, 4, 2);
    torus_layout_t *l = lay(&s, t, "auto");
    ck_assert(strstr(torus_layout_reason(l), "do not fill a box"));
    ck_assert_uint_le(torus_layout_cols(l), 2);
    torus_layout_free(l);
    /* A node the map lacks: the node list, said in the reason. */
    int other[] = {1, 9};
    step_t s2 = step_of(other, 2, 1);
    l = lay(&s2, t, "auto");
    ck_assert_int_eq(torus_layout_source_of(l), TORUS_SOURCE_NODELIST);
    ck_assert(strstr(torus_layout_reason(l), "n9 has no address"));
    torus_layout_free(l);
    step_free(&s2);
    /* A second form, or a malformed address, is refused. */
    static const char *const refused[] = {"r0:3.n7",   "spine.leaf.n7",
                                          "t0:1:2.n7", "t0:1:2:x.n7",
                                          "t0:1:2:3",  "t0:1:2:99999999.n7"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        ck_assert_msg(torus_layout_topo_add_addr(t, refused[i]) != 0,
                      "%s accepted", refused[i]);
    torus_layout_topo_free(t);
    step_free(&s);

    /* Ring: columns follow positions, rows stay inside nodes. */
    ck_assert_int_eq(torus_layout_topo_new(&t), 0);
    const char *r[] = {"r0:2.n1", "r0:0.n2", "r0:3.n3", "r0:1.n4"};
    for (size_t i = 0; i < 4; i++)
        ck_assert_int_eq(torus_layout_topo_add_addr(t, r[i]), 0);
    int rid[] = {1, 2, 3, 4};
    s = step_of(rid, 4, 2);
    l = lay(&s, t, "auto");
    ck_assert_int_eq(torus_layout_source_of(l), TORUS_SOURCE_RING);
    ck_assert_uint_eq(torus_layout_cols(l), 2);
    const size_t order[] = {1, 3, 0, 2}; /* n2 (0), n4 (1), n1 (2), n3 (3) */
    for (size_t p = 0; p < 4; p++)
        ck_assert_uint_eq(torus_layout_node_at(l, p), order[p]);
    torus_layout_free(l);
    step_free(&s);
    ck_assert_int_eq(torus_layout_topo_add_addr(t, "r0:2.n9"), 0);
    int dup[] = {1, 9};
    s = step_of(dup, 2, 1);
    torus_layout_input_t in = {.nnodes = 2,
                               .nodes = (const char *const *)s.names,
                               .tasks = s.tasks,
                               .topo = t};
    torus_cost_defaults(&in.cost);
    in.spec.kind = TORUS_SPEC_AUTO;
    ck_assert_int_ne(torus_layout_compute(&in, &l), 0);
    ck_assert(strstr(torus_error_msg(), "two nodes at position 2"));
    step_free(&s);
    torus_layout_topo_free(t);
}
END_TEST

/* slurm.conf's Topology= per partition, as Slurm reads it for topology.yaml:
 * the partition's own, else PartitionName=DEFAULT's (given before it). */
START_TEST(partition_topology)
{
    char path[] = "/tmp/test_layout_topo.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *conf = "ClusterName=c # Topology=x on a comment\n"
                       "PartitionName=cpu Nodes=ALL\n"
                       "PartitionName=DEFAULT Topology=fat\n"
                       "PartitionName=gpu Nodes=g[1-8] Topology=nvl\n"
                       "PartitionName=io   Nodes=ALL\n"
                       "PartitionName=gpu Topology=late\n";
    ck_assert_int_eq(write(fd, conf, strlen(conf)), (ssize_t)strlen(conf));
    close(fd);
    char buf[64];
    static const char *const cases[][2] = {
        {"gpu", "nvl"}, {"io", "fat"}, {"cpu", ""}, {"none", ""}, {"gp", ""}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(
            torus_layout_partition_topology(path, cases[i][0], buf, sizeof buf),
            0);
        ck_assert_msg(strcmp(buf, cases[i][1]) == 0, "%s: '%s', not '%s'",
                      cases[i][0], buf, cases[i][1]);
    }
    unlink(path);
    ck_assert_int_ne(torus_layout_partition_topology("/nonexistent/slurm.conf",
                                                     "gpu", buf, sizeof buf),
                     0);
    ck_assert(strstr(torus_error_msg(), "/nonexistent/slurm.conf"));
}
END_TEST

START_TEST(addr_file)
{
    const char *text = "# every node's SLURM_TOPOLOGY_ADDR\n"
                       "t0:0:0:0.n1\n\nt0:1:0:0.n2  # x+1\n";
    torus_layout_topo_t *t = NULL;
    ck_assert_int_eq(
        torus_layout_topo_parse_addr(text, strlen(text), "a.addr", &t), 0);
    ck_assert_int_eq(torus_layout_topo_kind_of(t), TORUS_TOPO_TORUS3D);
    torus_layout_topo_free(t);
    const char *bad = "t0:0:0:0.n1\nt0:0:0.n2\n";
    ck_assert_int_ne(
        torus_layout_topo_parse_addr(bad, strlen(bad), "a.addr", &t), 0);
    ck_assert_ptr_null(t);
    ck_assert(strstr(torus_error_msg(), "a.addr:2"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout_topo");
    TCase *tc = tcase_create("forms");
    tcase_add_test(tc, block_uneven_partial);
    tcase_add_test(tc, block_lines_and_errors);
    tcase_add_test(tc, yaml_choice);
    tcase_add_test(tc, yaml_errors);
    tcase_add_test(tc, yaml_nesting);
    tcase_add_test(tc, torus3d_boxes);
    tcase_add_test(tc, torus3d_off_box_and_ring);
    tcase_add_test(tc, addr_file);
    tcase_add_test(tc, partition_topology);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
