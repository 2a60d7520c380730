/* test_cost_model.c: the plugin's grid choice (torus_layout auto) and the
 * trainer's algorithm choice (tcomm's hybrid, tcomm_model_best) come from
 * the one cost model (topology/torus_cost.h) and the same numbers: both read
 * one torus_cost_t, set with the same keys, and when one link parameter
 * changes both choices move together.
 *
 * The step: 8 nodes x 4 tasks, two leaf switches of 4 nodes under a spine. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/torus_error.h"
#include "topology/torus_layout.h"
#include "trainer/comm/core/model.h"

#define NODES 8
#define TPN   4

typedef struct {
    uint32_t rows, cols;
    double predicted_2d; /* torus-layout's prediction for that grid */
} _grid;

/* What the plugin picks for this step with `cost`. */
static _grid _plugin_pick(const torus_cost_t *cost)
{
    static const char conf[] = "SwitchName=spine Switches=l[1-2]\n"
                               "SwitchName=l1 Nodes=n[1-4]\n"
                               "SwitchName=l2 Nodes=n[5-8]\n";
    char names[NODES][8];
    const char *np[NODES];
    uint32_t tasks[NODES];
    torus_layout_topo_t *topo;
    ck_assert_msg(
        torus_layout_topo_parse(conf, strlen(conf), "t.conf", &topo) == 0, "%s",
        torus_error_msg());
    for (int i = 0; i < NODES; i++) {
        snprintf(names[i], sizeof names[i], "n%d", i + 1);
        np[i] = names[i];
        tasks[i] = TPN;
    }
    torus_layout_input_t in = {.nnodes = NODES,
                               .nodes = np,
                               .tasks = tasks,
                               .topo = topo,
                               .source = TORUS_SOURCE_TREE,
                               .spec = {.kind = TORUS_SPEC_AUTO},
                               .cost = *cost};
    torus_layout_t *l;
    ck_assert_msg(torus_layout_compute(&in, &l) == 0, "%s", torus_error_msg());
    torus_layout_prediction_t p;
    torus_layout_predict(l, cost, cost->bytes, &p);
    _grid g = {torus_layout_rows(l), torus_layout_cols(l), p.torus2d_s};
    torus_layout_free(l);
    torus_layout_topo_free(topo);
    return g;
}

/* The trainer on that step: the same struct, its layout part as tcomm fills
 * it from TORUS_DIMS / TORUS_GROUP (groups are the leaves). */
static tcomm_model_params _trainer(const torus_cost_t *cost, uint32_t rows,
                                   uint32_t cols)
{
    tcomm_model_params m = *cost;
    m.P = NODES * TPN;
    m.ranks_per_node = TPN;
    m.rows = (int)rows;
    m.cols = (int)cols;
    m.group_size = m.leaf_ranks = NODES / 2 * TPN;
    return m;
}

START_TEST(test_same_numbers)
{
    torus_cost_t cost;
    torus_cost_defaults(&cost);
    size_t count = cost.bytes / 4;

    /* Defaults: rows of 4 nodes inside a leaf, and the trainer agrees that
     * torus2d on that grid is the cheapest; both price it identically. */
    _grid g = _plugin_pick(&cost);
    ck_assert_uint_eq(g.rows, 2);
    ck_assert_uint_eq(g.cols, 16);
    tcomm_model_params m = _trainer(&cost, g.rows, g.cols);
    ck_assert_int_eq(tcomm_model_best(&m, count, TCOMM_WIRE_FP32),
                     TCOMM_ALGO_TORUS2D);
    ck_assert(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, count,
                               TCOMM_WIRE_FP32) == g.predicted_2d);

    /* A slow leaf (1 GB/s), set with the plugstack key: on the old grid the
     * trainer would now leave torus2d (its rows cross the leaf), and the
     * plugin, reading the same struct, moves the rows inside the nodes,
     * where the trainer picks torus2d again at the plugin's price. */
    ck_assert_int_eq(torus_cost_set(&cost, "leaf_bw_gbs", "1"), 0);
    m = _trainer(&cost, g.rows, g.cols);
    ck_assert_int_ne(tcomm_model_best(&m, count, TCOMM_WIRE_FP32),
                     TCOMM_ALGO_TORUS2D);
    _grid slow = _plugin_pick(&cost);
    ck_assert_uint_eq(slow.rows, 8);
    ck_assert_uint_eq(slow.cols, TPN);
    m = _trainer(&cost, slow.rows, slow.cols);
    ck_assert_int_eq(tcomm_model_best(&m, count, TCOMM_WIRE_FP32),
                     TCOMM_ALGO_TORUS2D);
    ck_assert(tcomm_model_time(&m, TCOMM_ALGO_TORUS2D, count,
                               TCOMM_WIRE_FP32) == slow.predicted_2d);
    ck_assert(slow.predicted_2d < g.predicted_2d * 10);
}
END_TEST

START_TEST(test_same_keys)
{
    /* TCOMM_COST takes the plugstack keys, into the same fields. */
    torus_cost_t plug, env;
    torus_cost_defaults(&plug);
    env = plug;
    ck_assert_int_eq(torus_cost_set(&plug, "cross_bw_gbs", "3"), 0);
    ck_assert_int_eq(torus_cost_set(&plug, "rails", "2"), 0);
    ck_assert_int_eq(torus_cost_set(&plug, "reduce_gbs", "20"), 0);
    ck_assert_int_eq(
        torus_cost_set_list(&env, "cross_bw_gbs=3, rails=2,reduce_gbs=20",
                            "TCOMM_COST"),
        0);
    ck_assert_mem_eq(&plug, &env, sizeof plug);
    ck_assert_int_ne(torus_cost_set_list(&env, "rails=0.5", "TCOMM_COST"), 0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "TCOMM_COST: rails"));
    ck_assert_int_ne(torus_cost_set_list(&env, "leaf", "TCOMM_COST"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cost_model");
    TCase *t = tcase_create("one model");
    tcase_add_test(t, test_same_numbers);
    tcase_add_test(t, test_same_keys);
    suite_add_tcase(s, t);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
