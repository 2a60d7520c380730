/*
 * test_layout_args.c: Check tests of spank_torus.so's plugstack.conf
 * argument parser (plugins/args.c): defaults, every documented key, and the
 * rejection of unknown keys and bad values with a message naming them.
 */
#include "config.h"

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/torus_plugin.h"

static int parse(torus_plugin_config_t *cfg, int ac, ...)
{
    char *av[16];
    va_list ap;
    va_start(ap, ac);
    for (int i = 0; i < ac; i++)
        av[i] = va_arg(ap, char *);
    va_end(ap);
    return torus_plugin_args_parse(ac, av, cfg);
}

START_TEST(defaults)
{
    torus_plugin_config_t cfg;
    torus_cost_t def;
    torus_cost_defaults(&def);
    ck_assert_int_eq(parse(&cfg, 0), 0);
    ck_assert_int_eq(cfg.default_spec.kind, TORUS_SPEC_OFF);
    ck_assert_int_eq(cfg.topology, TORUS_TOPO_PREF_TREE);
    ck_assert(!cfg.verbose);
    ck_assert_mem_eq(&cfg.cost, &def, sizeof def);
}
END_TEST

START_TEST(every_key)
{
    torus_plugin_config_t cfg;
    ck_assert_msg(parse(&cfg, 10, "default=4x2", "topology=addr", "verbose",
                        "node_lat_us=2", "node_bw_gbs=100", "leaf_lat_us=3",
                        "leaf_bw_gbs=25", "cross_lat_us=7.5", "cross_bw_gbs=3",
                        "bytes=64M") == 0,
                  "%s", torus_error_msg());
    ck_assert_int_eq(cfg.default_spec.kind, TORUS_SPEC_EXPLICIT);
    ck_assert_uint_eq(cfg.default_spec.rows, 4);
    ck_assert_uint_eq(cfg.default_spec.cols, 2);
    ck_assert_int_eq(cfg.topology, TORUS_TOPO_PREF_ADDR);
    ck_assert(cfg.verbose);
    ck_assert(cfg.cost.link[TORUS_LINK_NODE].bw_Bps == 100e9);
    ck_assert(cfg.cost.link[TORUS_LINK_LEAF].bw_Bps == 25e9);
    ck_assert(cfg.cost.link[TORUS_LINK_CROSS].bw_Bps == 3e9);
    ck_assert(cfg.cost.link[TORUS_LINK_CROSS].alpha_s > 7.49e-6 &&
              cfg.cost.link[TORUS_LINK_CROSS].alpha_s < 7.51e-6);
    ck_assert_uint_eq(cfg.cost.bytes, 64u << 20);
    ck_assert_int_eq(parse(&cfg, 2, "default=auto", "topology=none"), 0);
    ck_assert_int_eq(cfg.default_spec.kind, TORUS_SPEC_AUTO);
    ck_assert_int_eq(cfg.topology, TORUS_TOPO_PREF_NONE);
}
END_TEST

START_TEST(rejects)
{
    static const struct {
        const char *arg, *needle;
    } bad[] = {
        {"bogus=1", "unknown argument 'bogus'"},
        {"Default=auto", "unknown argument 'Default'"},
        {"verbose=1", "unknown argument 'verbose'"},
        {"default=4y2", "default="},
        {"default=", "default="},
        {"topology=fat", "topology=fat"},
        {"leaf_bw_gbs=fast", "leaf_bw_gbs"},
        {"bytes=0", "bytes"},
        {"quiet", "not key=value"},
        {"=auto", "not key=value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        torus_plugin_config_t cfg;
        ck_assert_msg(parse(&cfg, 2, "verbose", bad[i].arg) != 0,
                      "'%s' accepted", bad[i].arg);
        ck_assert_msg(strstr(torus_error_msg(), bad[i].needle) != NULL,
                      "'%s': message '%s'", bad[i].arg, torus_error_msg());
        ck_assert_msg(strncmp(torus_error_msg(), "plugstack.conf: ", 16) == 0,
                      "message '%s'", torus_error_msg());
    }
    /* Overlong arguments are refused, not truncated. */
    char big[300];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, "bytes=", 6);
    torus_plugin_config_t cfg;
    ck_assert_int_ne(parse(&cfg, 1, big), 0);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "too long"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout_args");
    TCase *tc = tcase_create("plugstack");
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, every_key);
    tcase_add_test(tc, rejects);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
