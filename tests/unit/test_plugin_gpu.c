/*
 * test_plugin_gpu.c: Check tests of the plugin's GPU and rail choice
 * (plugins/gpu.c): counts and device lists as Slurm writes them (and
 * malformed ones), TORUS_LOCAL_GPU under each binding Slurm may have made,
 * the refusal of more tasks than GPUs, and nics= rails per column, plus
 * the plugstack parsing of nics= and topology_file=.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/torus_plugin.h"

START_TEST(counts)
{
    ck_assert_int_eq(torus_plugin_gpu_count(NULL), 0);
    ck_assert_int_eq(torus_plugin_gpu_count(""), 0);
    ck_assert_int_eq(torus_plugin_gpu_count("8"), 8);
    ck_assert_int_eq(torus_plugin_gpu_count("h100:4"), 4);
    ck_assert_int_eq(torus_plugin_gpu_count("4x"), -1);
    ck_assert_int_eq(torus_plugin_gpu_count("99999"), -1);
    ck_assert_int_eq(torus_plugin_gpu_list_len("0,1,2,3"), 4);
    ck_assert_int_eq(torus_plugin_gpu_list_len("GPU-1a2b"), 1);
    ck_assert_int_eq(torus_plugin_gpu_list_len("0,,1"), -1);
    ck_assert_int_eq(torus_plugin_gpu_list_len("0,1,"), -1);
    ck_assert_int_eq(torus_plugin_gpu_list_len("0 1"), -1);
}
END_TEST

static torus_plugin_gpu_t plan(int gpus, uint32_t tpn, uint32_t local,
                               const char *visible)
{
    torus_plugin_gpu_in_t in = {gpus, tpn, local, visible};
    torus_plugin_gpu_t g;
    torus_plugin_gpu_plan(&in, &g);
    return g;
}

START_TEST(local_gpu)
{
    /* All of the node's GPUs visible to every task: the local id. */
    for (uint32_t l = 0; l < 8; l++)
        ck_assert_int_eq(plan(8, 8, l, "0,1,2,3,4,5,6,7").local_gpu, (int)l);
    /* Nothing visible said (no CUDA_VISIBLE_DEVICES): the local id. */
    ck_assert_int_eq(plan(4, 4, 3, NULL).local_gpu, 3);
    /* Slurm bound one GPU per task (--gpus-per-task=1): index 0. */
    ck_assert_int_eq(plan(4, 4, 3, "3").local_gpu, 0);
    /* Fewer tasks than GPUs: still one GPU each. */
    ck_assert_int_eq(plan(8, 2, 1, "0,1,2,3,4,5,6,7").local_gpu, 1);
    /* More tasks than GPUs: refused, with the reason. */
    torus_plugin_gpu_t g = plan(2, 4, 0, "0,1");
    ck_assert_int_eq(g.local_gpu, -1);
    ck_assert_ptr_nonnull(strstr(g.why, "4 tasks per node but 2 GPU(s)"));
    /* Two devices visible for four tasks: no guess. */
    g = plan(4, 4, 0, "0,1");
    ck_assert_int_eq(g.local_gpu, -1);
    ck_assert_ptr_nonnull(strstr(g.why, "sees 2 GPU(s)"));
    /* No GPUs: nothing set, no reason. */
    g = plan(0, 4, 0, NULL);
    ck_assert_int_eq(g.local_gpu, -1);
    ck_assert_str_eq(g.why, "");
}
END_TEST

START_TEST(rails)
{
    torus_plugin_config_t cfg;
    char *av[] = {"nics=mlx5_0,mlx5_1,mlx5_2:1", "topology_file=/etc/t.yaml"};
    ck_assert_msg(torus_plugin_args_parse(2, av, &cfg) == 0, "%s",
                  torus_error_msg());
    ck_assert_uint_eq(cfg.nnics, 3);
    ck_assert_str_eq(cfg.topology_file, "/etc/t.yaml");
    ck_assert_str_eq(torus_plugin_nic(&cfg, 0), "mlx5_0");
    ck_assert_str_eq(torus_plugin_nic(&cfg, 2), "mlx5_2:1");
    ck_assert_str_eq(torus_plugin_nic(&cfg, 4), "mlx5_1");
    char *none[] = {"default=auto"};
    ck_assert_int_eq(torus_plugin_args_parse(1, none, &cfg), 0);
    ck_assert_ptr_null(torus_plugin_nic(&cfg, 0));
    char *bad[][1] = {{"nics="},
                      {"nics=a,,b"},
                      {"nics=mlx5 0"},
                      {"nics=a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q"},
                      {"topology_file=relative.conf"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(torus_plugin_args_parse(1, bad[i], &cfg) != 0,
                      "%s accepted", bad[i][0]);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "absolute path"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plugin_gpu");
    TCase *tc = tcase_create("gpu");
    tcase_add_test(tc, counts);
    tcase_add_test(tc, local_gpu);
    tcase_add_test(tc, rails);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
