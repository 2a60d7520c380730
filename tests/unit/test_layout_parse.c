/*
 * test_layout_parse.c: Check tests of libtoruslayout's parsers: the --torus
 * spec, cost parameters and byte sizes, Slurm tasks-per-node lists,
 * hostlists (through libslurm) and topology.conf, including the errors
 * each must give (with file and line) on bad input.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "topology/torus_layout.h"

START_TEST(spec_valid)
{
    torus_layout_spec_t s;
    ck_assert_int_eq(torus_layout_spec_parse("auto", &s), 0);
    ck_assert_int_eq(s.kind, TORUS_SPEC_AUTO);
    ck_assert_int_eq(torus_layout_spec_parse("off", &s), 0);
    ck_assert_int_eq(s.kind, TORUS_SPEC_OFF);
    ck_assert_int_eq(torus_layout_spec_parse("4x8", &s), 0);
    ck_assert_int_eq(s.kind, TORUS_SPEC_EXPLICIT);
    ck_assert_uint_eq(s.rows, 4);
    ck_assert_uint_eq(s.cols, 8);
    ck_assert_int_eq(torus_layout_spec_parse("1x1", &s), 0);
}
END_TEST

START_TEST(spec_invalid)
{
    static const char *bad[] = {"",
                                "AUTO",
                                "4x",
                                "x4",
                                "0x4",
                                "4x0",
                                "-4x2",
                                "4x2x1",
                                "4 x2",
                                "+4x2",
                                "4x2 ",
                                "04x2",
                                "4X2",
                                "99999999999x2",
                                "40000x40000",
                                "auto2",
                                "o",
                                "4x8000000000000000000000000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        torus_layout_spec_t s;
        torus_error_clear();
        ck_assert_msg(torus_layout_spec_parse(bad[i], &s) != 0, "'%s' accepted",
                      bad[i]);
        ck_assert_msg(strlen(torus_error_msg()) > 0, "no message for '%s'",
                      bad[i]);
    }
}
END_TEST

START_TEST(cost_keys)
{
    torus_cost_t c, d;
    torus_cost_defaults(&c);
    d = c;
    ck_assert_int_eq(torus_cost_set(&c, "leaf_bw_gbs", "25"), 0);
    ck_assert(c.link[TORUS_LINK_LEAF].bw_Bps == 25e9);
    ck_assert_int_eq(torus_cost_set(&c, "cross_lat_us", "2.5"), 0);
    ck_assert(c.link[TORUS_LINK_CROSS].alpha_s > 2.49e-6 &&
              c.link[TORUS_LINK_CROSS].alpha_s < 2.51e-6);
    ck_assert_int_eq(torus_cost_set(&c, "bytes", "4M"), 0);
    ck_assert_uint_eq(c.bytes, 4u << 20);
    ck_assert(d.link[TORUS_LINK_LEAF].bw_Bps != c.link[TORUS_LINK_LEAF].bw_Bps);
    ck_assert_int_ne(torus_cost_set(&c, "leaf_bw", "25"), 0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "leaf_bw"));
    static const char *badval[] = {"",    "0",    "-1",     "1e3",
                                   "abc", "1..2", "2000000"};
    for (size_t i = 0; i < sizeof badval / sizeof badval[0]; i++)
        ck_assert_msg(torus_cost_set(&c, "node_lat_us", badval[i]) != 0,
                      "node_lat_us=%s accepted", badval[i]);
    ck_assert(torus_cost_is_key("node_bw_gbs"));
    ck_assert(!torus_cost_is_key("verbose"));
    uint64_t b;
    ck_assert_int_eq(torus_cost_parse_bytes("1G", &b), 0);
    ck_assert_uint_eq(b, 1ull << 30);
    ck_assert_int_ne(torus_cost_parse_bytes("0", &b), 0);
    ck_assert_int_ne(torus_cost_parse_bytes("2T", &b), 0);
    ck_assert_int_ne(torus_cost_parse_bytes("4096G", &b), 0);
}
END_TEST

START_TEST(tasks_lists)
{
    uint32_t c[8];
    ck_assert_int_eq(torus_layout_tasks_parse("2(x3),1", 4, c), 0);
    ck_assert_uint_eq(c[0], 2);
    ck_assert_uint_eq(c[2], 2);
    ck_assert_uint_eq(c[3], 1);
    ck_assert_int_eq(torus_layout_tasks_parse("8", 5, c), 0);
    ck_assert_uint_eq(c[4], 8);
    ck_assert_int_eq(torus_layout_tasks_parse("4,4", 2, c), 0);
    static const char *bad[] = {"",   "0",           "2(x3)", "2(x5)",
                                "2,", ",2",          "2(3)",  "2(x0),1",
                                "a",  "2(x2),1,1,1", "2(x1",  "4,4,4,4,4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(torus_layout_tasks_parse(bad[i], 4, c) != 0,
                      "'%s' accepted for 4 nodes", bad[i]);
}
END_TEST

START_TEST(hostlists)
{
    char **names;
    size_t n;
    ck_assert_int_eq(torus_layout_names_expand("n[001-003],m7", &names, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(names[0], "n001");
    ck_assert_str_eq(names[2], "n003");
    ck_assert_str_eq(names[3], "m7");
    char *back = torus_layout_names_compress(names, n);
    ck_assert_ptr_nonnull(back);
    ck_assert_ptr_nonnull(strstr(back, "n[001-003]"));
    free(back);
    torus_layout_names_free(names, n);
    ck_assert_int_ne(torus_layout_names_expand("", &names, &n), 0);
    /* Multi-dimensional expressions expand eagerly in libslurm: refused. */
    static const char *bad[] = {"a[1-500]b[1-500]c[1-500]", "n[1-2", "n1]",
                                "n[[1-2]]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(torus_layout_names_expand(bad[i], &names, &n) ==
                          TORUS_LAYOUT_EINVAL,
                      "'%s' accepted", bad[i]);
    ck_assert_int_eq(torus_layout_names_expand("n[1-2],m[3,5-6]", &names, &n),
                     0);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(names[1], "n2");
    ck_assert_str_eq(names[4], "m6");
    torus_layout_names_free(names, n);
}
END_TEST

static torus_layout_rc parse(const char *text)
{
    torus_layout_topo_t *t = NULL;
    torus_layout_rc rc =
        torus_layout_topo_parse(text, strlen(text), "topo.conf", &t);
    torus_layout_topo_free(t);
    return rc;
}

START_TEST(topology_conf)
{
    ck_assert_int_eq(parse(""), 0);
    ck_assert_int_eq(parse("# only a comment\n\n"), 0);
    ck_assert_int_eq(
        parse("switchname=a nodes=n[1-2]\nSwitchName=b Switches=a\n"), 0);
    /* Errors name file and line. */
    ck_assert_int_ne(parse("SwitchName=a Nodes=n1\nNodes=n2\n"), 0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "topo.conf:2"));
    ck_assert_int_ne(parse("SwitchName=a Nodes=n1\n\nSwitchName=a Nodes=n2\n"),
                     0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "topo.conf:3"));
    ck_assert_ptr_nonnull(
        strstr(torus_error_msg(), "already defined on line 1"));
    ck_assert_int_ne(parse("SwitchName=a Bogus=1\n"), 0);
    ck_assert_int_ne(parse("SwitchName=a Nodes=n1 Nodes=n2\n"), 0);
    ck_assert_int_ne(parse("SwitchName=a Switches=zz\n"), 0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "zz"));
    ck_assert_int_ne(
        parse("SwitchName=a Switches=b\nSwitchName=b Switches=a\n"), 0);
    ck_assert_int_ne(parse("SwitchName=a Switches=a\n"), 0);
    /* A 70-level chain: rejected by depth, not walked quadratically. */
    char chain[70 * 40];
    size_t at = 0;
    for (int i = 0; i < 70; i++)
        at += (size_t)sprintf(chain + at, "SwitchName=s%d Switches=s%d\n", i,
                              i + 1);
    sprintf(chain + at, "SwitchName=s70 Nodes=n1\n");
    ck_assert_int_ne(parse(chain), 0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "levels deep"));
    ck_assert_int_ne(
        parse(
            "SwitchName=x Switches=a\nSwitchName=y Switches=a\nSwitchName=a\n"),
        0);
    ck_assert_int_ne(parse("SwitchName=a.b Nodes=n1\n"), 0);
    ck_assert_int_ne(parse("SwitchName= Nodes=n1\n"), 0);
    ck_assert_int_ne(parse("garbage\n"), 0);
    /* Continuation joins lines; the logical line keeps its first number. */
    ck_assert_int_ne(parse("SwitchName=a \\\n  Nodes=n1 \\\n  Oops=2\n"), 0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "topo.conf:1"));
    /* Short text, huge expansion: bounded before it is expanded. libslurm
     * caps one range at 64Ki hosts, so build many ranges of 60000. */
    ck_assert_int_ne(parse("SwitchName=a Switches=s[1-99999999]\n"), 0);
    char *many = malloc(80 * 32 + 64);
    size_t used = (size_t)sprintf(many, "SwitchName=a Switches=");
    for (int i = 0; i < 20; i++)
        used +=
            (size_t)sprintf(many + used, "%ss%d-[1-60000]", i ? "," : "", i);
    strcpy(many + used, "\n");
    ck_assert_int_eq(parse(many), TORUS_LAYOUT_ERANGE);
    used = (size_t)sprintf(many, "SwitchName=a Nodes=");
    for (int i = 0; i < 80; i++)
        used +=
            (size_t)sprintf(many + used, "%sn%d-[1-60000]", i ? "," : "", i);
    strcpy(many + used, "\n");
    torus_layout_topo_t *big;
    ck_assert_int_eq(torus_layout_topo_parse(many, strlen(many), "big", &big),
                     0);
    free(many);
    const char *names[] = {"n1"};
    uint32_t tasks[] = {1};
    torus_layout_input_t in = {.nnodes = 1,
                               .nodes = names,
                               .tasks = tasks,
                               .topo = big,
                               .spec = {.kind = TORUS_SPEC_AUTO}};
    torus_cost_defaults(&in.cost);
    torus_layout_t *l;
    ck_assert_int_eq(torus_layout_compute(&in, &l), TORUS_LAYOUT_ERANGE);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "more than"));
    torus_layout_topo_free(big);
    ck_assert_int_eq(torus_layout_topo_load("/nonexistent/topology.conf",
                                            TORUS_LAYOUT_TOPO_FILE_DEFAULT,
                                            &(torus_layout_topo_t *){0}),
                     TORUS_LAYOUT_EIO);
    ck_assert_ptr_nonnull(
        strstr(torus_error_msg(), "/nonexistent/topology.conf"));
}
END_TEST

/* The size bound on topology.conf (the plugin reads it as root in every
 * stepd): a file over the limit is refused from fstat, before it is read
 * (a 1 GiB sparse file costs nothing to refuse), and one exactly at the
 * limit is accepted. */
START_TEST(topology_conf_limit)
{
    char path[] = "/tmp/torus-topo-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char line[] = "SwitchName=s1 Nodes=n[1-4]\n";
    size_t max = TORUS_LAYOUT_TOPO_FILE_MIN;
    /* Pad with comment lines to exactly max bytes. */
    ck_assert_int_eq(write(fd, line, sizeof line - 1),
                     (ssize_t)sizeof line - 1);
    for (size_t n = sizeof line - 1; n < max; n += 64) {
        char pad[64];
        size_t k = max - n < 64 ? max - n : 64;
        memset(pad, '#', k);
        pad[k - 1] = '\n';
        ck_assert_int_eq(write(fd, pad, k), (ssize_t)k);
    }
    torus_layout_topo_t *t = NULL;
    ck_assert_int_eq(torus_layout_topo_load(path, max, &t), TORUS_LAYOUT_OK);
    torus_layout_topo_free(t);
    ck_assert_int_eq(torus_layout_topo_load(path, max - 1, &t),
                     TORUS_LAYOUT_ERANGE);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), path));
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "topology.conf limit"));
    ck_assert_int_eq(ftruncate(fd, (off_t)1 << 30), 0);
    ck_assert_int_eq(
        torus_layout_topo_load(path, TORUS_LAYOUT_TOPO_FILE_DEFAULT, &t),
        TORUS_LAYOUT_ERANGE);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "1073741824 bytes"));
    /* A caller's limit above the hard cap is the hard cap. */
    ck_assert_int_eq(torus_layout_topo_load(path, SIZE_MAX, &t),
                     TORUS_LAYOUT_ERANGE);
    close(fd);
    unlink(path);
}
END_TEST

/* The plugstack parser the plugin and torus-layout --check-plugstack share:
 * topology_max= within its bounds. */
START_TEST(plugstack_topology_max)
{
    torus_layout_plugstack_t cfg;
    char *def[] = {"verbose"};
    ck_assert_int_eq(torus_layout_plugstack_parse(1, def, &cfg), 0);
    ck_assert_uint_eq(cfg.topology_max, 4u << 20);
    char *ok[] = {"topology_max=16M", "topology=addr"};
    ck_assert_int_eq(torus_layout_plugstack_parse(2, ok, &cfg), 0);
    ck_assert_uint_eq(cfg.topology_max, 16u << 20);
    ck_assert_int_eq(cfg.topology, TORUS_TOPO_PREF_ADDR);
    const char *bad[] = {"topology_max=65M", "topology_max=1K",
                         "topology_max=-1", "topology_max=", "topology_max=4X"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *av[] = {(char *)bad[i]};
        ck_assert_int_eq(torus_layout_plugstack_parse(1, av, &cfg),
                         TORUS_LAYOUT_EINVAL);
        ck_assert_ptr_nonnull(
            strstr(torus_error_msg(), "plugstack.conf: topology_max="));
    }
}
END_TEST

START_TEST(topology_addr)
{
    torus_layout_topo_t *t;
    ck_assert_int_eq(torus_layout_topo_new(&t), 0);
    ck_assert_int_eq(torus_layout_topo_add_addr(t, "spine.leaf1.n1"), 0);
    ck_assert_int_eq(torus_layout_topo_add_addr(t, "spine.leaf1.n2"), 0);
    ck_assert_uint_eq(torus_layout_topo_switch_count(t), 2);
    ck_assert_int_eq(torus_layout_topo_add_addr(t, "n9"), 0);
    ck_assert_int_ne(torus_layout_topo_add_addr(t, "other.leaf1.n3"), 0);
    ck_assert_int_ne(torus_layout_topo_add_addr(t, "spine..n3"), 0);
    ck_assert_int_ne(torus_layout_topo_add_addr(t, "spine.leaf1."), 0);
    ck_assert_int_ne(torus_layout_topo_add_addr(t, ""), 0);
    torus_layout_topo_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout_parse");
    TCase *tc = tcase_create("parsers");
    tcase_add_test(tc, spec_valid);
    tcase_add_test(tc, spec_invalid);
    tcase_add_test(tc, cost_keys);
    tcase_add_test(tc, tasks_lists);
    tcase_add_test(tc, hostlists);
    tcase_add_test(tc, topology_conf);
    tcase_add_test(tc, topology_addr);
    tcase_add_test(tc, topology_conf_limit);
    tcase_add_test(tc, plugstack_topology_max);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
