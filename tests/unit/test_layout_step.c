/*
 * test_layout_step.c: Check tests of spank_torus.so's step checks
 * (plugins/step.c), which run as root inside slurmstepd on values from the
 * job's environment. Hostile node lists and tasks-per-node strings are
 * refused from slurmstepd's own counts BEFORE any per-node allocation: the
 * 2^20-name list below runs under an address-space limit far below what
 * its expansion would take.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "plugins/torus_plugin.h"

/* A step of 4 nodes x 2 tasks, seen from node 1. */
static torus_plugin_step_in_t _in(const char *nodelist, const char *tpn)
{
    return (torus_plugin_step_in_t){.nnodes = 4,
                                    .nodeid = 1,
                                    .local_tasks = 2,
                                    .total_tasks = 8,
                                    .nodelist = nodelist,
                                    .tasks_per_node = tpn,
                                    .num_tasks = "8"};
}

static void _refused(torus_plugin_step_in_t in, int rc, const char *msg)
{
    torus_plugin_step_t st;
    ck_assert_int_eq(torus_plugin_step_read(&in, &st), rc);
    ck_assert_msg(strstr(torus_error_msg(), msg), "message '%s' lacks '%s'",
                  torus_error_msg(), msg);
    ck_assert_ptr_null(st.names);
    ck_assert_ptr_null(st.tasks);
}

START_TEST(valid_step)
{
    torus_plugin_step_in_t in = _in("n[1-3],m7", "2(x4)");
    torus_plugin_step_t st;
    ck_assert_int_eq(torus_plugin_step_read(&in, &st), 0);
    ck_assert_uint_eq(st.nnodes, 4);
    ck_assert_str_eq(st.names[3], "m7");
    ck_assert_uint_eq(st.tasks[2], 2);
    torus_plugin_step_free(&st);
    in.num_tasks = NULL; /* not set: not a het step */
    ck_assert_int_eq(torus_plugin_step_read(&in, &st), 0);
    torus_plugin_step_free(&st);
}
END_TEST

/* Virtual memory now, from /proc/self/status (kB). */
static size_t _vm_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %zu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb << 10;
}

START_TEST(nodelist_count_before_expansion)
{
    /* 16 ranges of 65536 names of 244 bytes (libslurm's largest range):
     * 2^20 names, over 256 MiB expanded, in a 4 KB string that a 64-node
     * step's length bound allows. With only 64 MiB to spare, the refusal
     * must come from the count alone (Check runs each test in its own
     * process, so the limit stays here). */
    static char list[16 * 256];
    size_t used = 0;
    for (int r = 0; r < 16; r++) {
        memset(list + used, 'a' + r, 240);
        used += 240;
        used += (size_t)snprintf(list + used, sizeof list - used, "[1-65536]%s",
                                 r < 15 ? "," : "");
    }
    torus_plugin_step_in_t in = {.nnodes = 64,
                                 .nodeid = 0,
                                 .local_tasks = 2,
                                 .total_tasks = 128,
                                 .nodelist = list,
                                 .tasks_per_node = "2(x64)"};
    struct rlimit rl = {.rlim_cur = _vm_bytes() + (64u << 20),
                        .rlim_max = RLIM_INFINITY};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
    _refused(in, TORUS_PLUGIN_EINVAL,
             "SLURM_STEP_NODELIST holds 1048576 nodes but the step has 64");
    _refused(_in("n[1-5]", "2(x4)"), TORUS_PLUGIN_EINVAL,
             "holds 5 nodes but the step has 4");
}
END_TEST

START_TEST(nodelist_length)
{
    /* 4 nodes cannot need more than 4 x 256 bytes of names. */
    static char list[4 * 256 + 64];
    memset(list, 'n', sizeof list - 1);
    _refused(_in(list, "2(x4)"), TORUS_PLUGIN_EINVAL,
             "SLURM_STEP_NODELIST: longer than 1024 bytes");
    _refused(_in("a[1-2]b[1-2]", "2(x4)"), TORUS_PLUGIN_EINVAL,
             "SLURM_STEP_NODELIST");
}
END_TEST

START_TEST(tasks_against_stepd)
{
    _refused(_in("n[1-4]", "1000000(x4)"), TORUS_PLUGIN_EINVAL,
             "adds up to 4000000 tasks but the step has 8");
    /* Same total, another split: node 1 runs 2 tasks, not 3. */
    _refused(_in("n[1-4]", "1,3,2,2"), TORUS_PLUGIN_EINVAL,
             "gives node 1 3 tasks but slurmstepd runs 2 there");
    _refused(_in("n[1-4]", "2(x5)"), TORUS_PLUGIN_EINVAL,
             "SLURM_STEP_TASKS_PER_NODE");
    static char tpn[4 * 22 + 8];
    memset(tpn, '1', sizeof tpn - 1);
    _refused(_in("n[1-4]", tpn), TORUS_PLUGIN_EINVAL, "too long for 4 nodes");
    _refused(_in("n[1-4]", NULL), TORUS_PLUGIN_EINVAL, "is not set");
}
END_TEST

START_TEST(stepd_items_and_het)
{
    torus_plugin_step_in_t in = _in("n[1-4]", "2(x4)");
    in.nodeid = 4;
    _refused(in, TORUS_PLUGIN_EINVAL, "slurmstepd reports node 4 of 4");
    in = _in("n[1-4]", "2(x4)");
    in.num_tasks = "12"; /* the whole het step; this component has 8 */
    _refused(in, TORUS_PLUGIN_EHET, "heterogeneous step (12 tasks in all");
    in.num_tasks = "1x";
    _refused(in, TORUS_PLUGIN_EINVAL, "SLURM_STEP_NUM_TASKS");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout_step");
    TCase *tc = tcase_create("step");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, valid_step);
    tcase_add_test(tc, nodelist_count_before_expansion);
    tcase_add_test(tc, nodelist_length);
    tcase_add_test(tc, tasks_against_stepd);
    tcase_add_test(tc, stepd_items_and_het);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
