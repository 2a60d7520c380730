/* test_comm_layout.c: the TORUS_* env contract parser and the start-up
 * layout check of libtcomm, driven with fake environments (no MPI). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/comm/core/layout_env.h"

/* A fake environment: NULL-terminated name=value pairs. */
static const char *const *_env;
static const char *_get(const char *n)
{
    size_t l = strlen(n);
    for (const char *const *e = _env; e && *e; e++)
        if (strncmp(*e, n, l) == 0 && (*e)[l] == '=')
            return *e + l + 1;
    return NULL;
}

#define GOOD(...) \
    "TORUS_VERSION=1", "TORUS_NGROUPS=2", "TORUS_GROUP=1", __VA_ARGS__

START_TEST(test_absent)
{
    static const char *const e[] = {"PATH=/bin", NULL};
    tcomm_env_layout l;
    _env = e;
    ck_assert_int_eq(tcomm_layout_parse_env(_get, &l), TCOMM_OK);
    ck_assert_int_eq(l.present, 0);
}
END_TEST

START_TEST(test_good)
{
    static const char *const e[] = {GOOD("TORUS_DIMS=4x2", "TORUS_COORD=3,1"),
                                    "TORUS_NODE_INDEX=3",
                                    "TORUS_SOURCE=topology/tree", NULL};
    tcomm_env_layout l;
    _env = e;
    ck_assert_int_eq(tcomm_layout_parse_env(_get, &l), TCOMM_OK);
    ck_assert_int_eq(l.present, 1);
    ck_assert_int_eq(l.rows, 4);
    ck_assert_int_eq(l.cols, 2);
    ck_assert_int_eq(l.row, 3);
    ck_assert_int_eq(l.col, 1);
    ck_assert_int_eq(l.group, 1);
    ck_assert_int_eq(l.ngroups, 2);
    ck_assert_int_eq(l.node_index, 3);
    ck_assert_str_eq(l.source, "topology/tree");
}
END_TEST

/* Each bad value must fail and the message must name the variable. */
static const struct {
    const char *env[8];
    const char *names;
} _bad[] = {
    {{GOOD("TORUS_DIMS=4X2", "TORUS_COORD=0,0")}, "TORUS_DIMS"},
    {{GOOD("TORUS_DIMS=4x", "TORUS_COORD=0,0")}, "TORUS_DIMS"},
    {{GOOD("TORUS_DIMS=0x2", "TORUS_COORD=0,0")}, "TORUS_DIMS"},
    {{GOOD("TORUS_DIMS=-4x2", "TORUS_COORD=0,0")}, "TORUS_DIMS"},
    {{GOOD("TORUS_DIMS= 4x2", "TORUS_COORD=0,0")}, "TORUS_DIMS"},
    {{GOOD("TORUS_DIMS=99999999x99999999", "TORUS_COORD=0,0")}, "TORUS_DIMS"},
    {{GOOD("TORUS_DIMS=4x2", "TORUS_COORD=4,0")}, "TORUS_COORD"},
    {{GOOD("TORUS_DIMS=4x2", "TORUS_COORD=1;0")}, "TORUS_COORD"},
    {{GOOD("TORUS_DIMS=4x2", "TORUS_COORD=1,")}, "TORUS_COORD"},
    {{"TORUS_VERSION=1", "TORUS_NGROUPS=2", "TORUS_GROUP=2", "TORUS_DIMS=4x2",
      "TORUS_COORD=0,0"},
     "TORUS_GROUP"},
    {{"TORUS_VERSION=1", "TORUS_NGROUPS=x", "TORUS_GROUP=0", "TORUS_DIMS=4x2",
      "TORUS_COORD=0,0"},
     "TORUS_NGROUPS"},
    {{"TORUS_DIMS=4x2"}, "TORUS_COORD"},
    {{GOOD("TORUS_DIMS=4x2", "TORUS_COORD=0,0", "TORUS_NODE_INDEX=1e3")},
     "TORUS_NODE_INDEX"},
};

START_TEST(test_bad)
{
    tcomm_env_layout l;
    _env = _bad[_i].env;
    ck_assert_int_eq(tcomm_layout_parse_env(_get, &l), TCOMM_ERR_ENV);
    ck_assert_msg(strstr(torus_error_msg(), _bad[_i].names) != NULL,
                  "message '%s' does not name %s", torus_error_msg(),
                  _bad[_i].names);
}
END_TEST

/* The contract: an unknown version means "ignore the rest", not an error. */
START_TEST(test_unknown_version)
{
    static const char *const e[] = {"TORUS_VERSION=2", "TORUS_DIMS=garbage",
                                    NULL};
    tcomm_env_layout l;
    _env = e;
    ck_assert_int_eq(tcomm_layout_parse_env(_get, &l), TCOMM_OK);
    ck_assert_int_eq(l.present, 0);
    ck_assert_ptr_nonnull(strstr(l.source, "TORUS_VERSION=2 ignored"));
}
END_TEST

START_TEST(test_options)
{
    tcomm_options o = {0};
    ck_assert_int_eq(tcomm_options_set(&o, "--grid", "2x3"), TCOMM_OK);
    ck_assert_int_eq(o.grid_rows, 2);
    ck_assert_int_eq(o.grid_cols, 3);
    ck_assert_int_eq(tcomm_options_set(&o, "--grid", "2x"), TCOMM_ERR_ENV);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "--grid"));
    ck_assert_int_eq(tcomm_options_set(&o, "--group-size", "0"), TCOMM_ERR_ENV);
    ck_assert_int_eq(tcomm_options_set(&o, "--group-size", "4"), TCOMM_OK);
    ck_assert_int_eq(o.group_size, 4);
    ck_assert_int_eq(tcomm_options_set(&o, "--bogus", "4"), TCOMM_ERR_ARG);
}
END_TEST

/* P ranks on nodes of the given sizes, default layout (no env/options). */
static tcomm_rc _nodes_layout(const int *pernode, int nnodes, tcomm_place *all,
                              int *P)
{
    int r = 0;
    for (int n = 0; n < nnodes; n++)
        for (int l = 0; l < pernode[n]; l++, r++) {
            int src;
            /* node ids as a launcher might give them: not 0-based */
            ck_assert_int_eq(tcomm_layout_place(NULL, NULL, r, 0, 10 + 3 * n, l,
                                                pernode[n], &all[r], &src),
                             TCOMM_OK);
        }
    *P = r;
    return tcomm_layout_finish(all, r, TCOMM_SRC_NODES, NULL, 0);
}

START_TEST(test_per_node_default)
{
    tcomm_place all[16];
    int P, even[] = {2, 2, 2, 2}, odd[] = {3, 1, 2};
    ck_assert_int_eq(_nodes_layout(even, 4, all, &P), TCOMM_OK);
    for (int r = 0; r < P; r++) {
        ck_assert_int_eq(all[r].rows, 4);
        ck_assert_int_eq(all[r].cols, 2);
        ck_assert_int_eq(all[r].row, r / 2); /* one row per node */
        ck_assert_int_eq(all[r].col, r % 2);
        ck_assert_int_eq(all[r].group, r / 2); /* group = node */
        ck_assert_int_eq(all[r].ngroups, 4);
    }
    /* Unequal nodes cannot form rows: one 1 x P row, groups still nodes. */
    ck_assert_int_eq(_nodes_layout(odd, 3, all, &P), TCOMM_OK);
    for (int r = 0; r < P; r++) {
        ck_assert_int_eq(all[r].rows, 1);
        ck_assert_int_eq(all[r].cols, 6);
        ck_assert_int_eq(all[r].col, r);
    }
    ck_assert_int_eq(all[3].group, 1);
}
END_TEST

START_TEST(test_grid_option)
{
    tcomm_options o = {.grid_rows = 2, .grid_cols = 3, .group_size = 4};
    tcomm_place all[6];
    int src = 0;
    for (int r = 0; r < 6; r++)
        ck_assert_int_eq(
            tcomm_layout_place(NULL, &o, r, 6, 0, r, 6, &all[r], &src),
            TCOMM_OK);
    ck_assert_int_eq(tcomm_layout_finish(all, 6, src, NULL, 0), TCOMM_OK);
    ck_assert_int_eq(all[4].row, 1);
    ck_assert_int_eq(all[4].col, 1);
    ck_assert_int_eq(all[4].group, 1); /* ranks 4,5 form the short last group */
    ck_assert_int_eq(all[0].ngroups, 2);
    o.grid_cols = 4; /* 2x4 != 6 */
    ck_assert_int_eq(tcomm_layout_place(NULL, &o, 0, 6, 0, 0, 6, &all[0], &src),
                     TCOMM_ERR_ENV);
}
END_TEST

/* Env layouts as each rank would see them; duplicate and wrong-size grids
 * are caught and the message names the ranks. */
START_TEST(test_env_checks)
{
    tcomm_env_layout e = {.present = 1, .rows = 2, .cols = 2, .ngroups = 2};
    tcomm_place all[4];
    int src;
    for (int r = 0; r < 4; r++) {
        e.row = r / 2;
        e.col = r % 2;
        e.group = r / 2;
        tcomm_layout_place(&e, NULL, r, 4, r / 2, r % 2, 2, &all[r], &src);
    }
    ck_assert_int_eq(tcomm_layout_finish(all, 4, src, NULL, 0), TCOMM_OK);
    all[3].row = 0;
    all[3].col = 1; /* same as rank 1 */
    ck_assert_int_eq(tcomm_layout_finish(all, 4, src, NULL, 0), TCOMM_ERR_ENV);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "ranks 1 and 3"));
    all[3].row = 1;
    all[3].col = 1;
    all[2].cols = 3;
    ck_assert_int_eq(tcomm_layout_finish(all, 4, src, NULL, 0), TCOMM_ERR_ENV);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "rank 2"));
    all[2].cols = 2;
    ck_assert_int_eq(tcomm_layout_finish(all, 3, src, NULL, 0),
                     TCOMM_ERR_ENV); /* 2x2 != 3 */
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "TORUS_DIMS"));
    all[1].group = 0; /* group 1 then holds only rank 2,3: fine */
    ck_assert_int_eq(tcomm_layout_finish(all, 4, src, NULL, 0), TCOMM_OK);
    all[2].group = all[3].group = 0; /* group 1 is empty */
    ck_assert_int_eq(tcomm_layout_finish(all, 4, src, NULL, 0), TCOMM_ERR_ENV);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_layout");
    TCase *t = tcase_create("env");
    tcase_add_test(t, test_absent);
    tcase_add_test(t, test_good);
    tcase_add_loop_test(t, test_bad, 0, (int)(sizeof _bad / sizeof _bad[0]));
    tcase_add_test(t, test_unknown_version);
    tcase_add_test(t, test_options);
    tcase_add_test(t, test_per_node_default);
    tcase_add_test(t, test_grid_option);
    tcase_add_test(t, test_env_checks);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
