/*
 * args.c: the plugstack.conf arguments of spank_torus.so, e.g.
 *   required spank_torus.so default=auto topology=tree leaf_bw_gbs=25 verbose
 * and the plugin-wide state they configure. Every argument is key=value from
 * the table below or the cost model's keys (or the bare flag `verbose`);
 * unknown keys and bad values are rejected so a typo in plugstack.conf
 * cannot silently change behaviour. No Slurm calls here: the fuzz target
 * and the unit test link this file alone. This is the bottom of the plugin:
 * it includes nothing of the plugin's other files.
 */
#include "config.h"

#include <string.h>

#include "plugins/torus_plugin.h"

#define _ARG_MAX 128 /* longest accepted argument */
#define _KEY_MAX 32  /* longest key */

torus_plugin_state_t torus_plugin_state;

const torus_layout_spec_t *torus_plugin_spec(void)
{
    return torus_plugin_state.spec_given ? &torus_plugin_state.spec
                                         : &torus_plugin_state.cfg.default_spec;
}

#define _KEYS                                                             \
    "default, topology, verbose, node_lat_us, node_bw_gbs, leaf_lat_us, " \
    "leaf_bw_gbs, cross_lat_us, cross_bw_gbs, rails, reduce_gbs, "        \
    "convert_gbs, bytes"

static int _set_default(torus_plugin_config_t *cfg, const char *val)
{
    int rc = torus_layout_spec_parse(val, &cfg->default_spec);
    return rc ? torus_error_prefix(TORUS_PLUGIN_EINVAL,
                                   "plugstack.conf: default=")
              : TORUS_PLUGIN_OK;
}

static int _set_topology(torus_plugin_config_t *cfg, const char *val)
{
    static const char *const names[] = {
        [TORUS_PLUGIN_TOPO_TREE] = "tree",
        [TORUS_PLUGIN_TOPO_ADDR] = "addr",
        [TORUS_PLUGIN_TOPO_NONE] = "none",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(val, names[i]) == 0) {
            cfg->topology = (torus_plugin_topo)i;
            return TORUS_PLUGIN_OK;
        }
    return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                      "plugstack.conf: topology=%s: expected tree, addr or "
                      "none",
                      val);
}

static int _set_cost(torus_plugin_config_t *cfg, const char *key,
                     const char *val)
{
    if (torus_cost_set(&cfg->cost, key, val))
        return torus_error_prefix(TORUS_PLUGIN_EINVAL, "plugstack.conf");
    return TORUS_PLUGIN_OK;
}

/* The option table: key -> setter. The cost model's keys come from
 * libtoruscost, so the plugin, torus-layout and TCOMM_COST share them. */
static const struct {
    const char *key;
    int (*set)(torus_plugin_config_t *cfg, const char *val);
} _table[] = {
    {"default", _set_default},
    {"topology", _set_topology},
};

/* Split "key=value" into key (bounded) and a pointer to the value. */
static int _split(const char *arg, size_t len, char key[_KEY_MAX],
                  const char **val)
{
    const char *eq = memchr(arg, '=', len);
    if (!eq || eq == arg || (size_t)(eq - arg) >= _KEY_MAX)
        return TORUS_FAIL(
            TORUS_PLUGIN_EINVAL,
            "plugstack.conf: '%s' is not key=value (keys: " _KEYS ")", arg);
    memcpy(key, arg, (size_t)(eq - arg));
    key[eq - arg] = '\0';
    *val = eq + 1;
    return TORUS_PLUGIN_OK;
}

static int _parse_one(const char *arg, torus_plugin_config_t *cfg)
{
    if (!arg)
        return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                          "plugstack.conf: missing argument");
    size_t len = strnlen(arg, _ARG_MAX + 1);
    if (len > _ARG_MAX)
        return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                          "plugstack.conf: argument '%.40s...' too long", arg);
    if (strcmp(arg, "verbose") == 0) {
        cfg->verbose = true;
        return TORUS_PLUGIN_OK;
    }
    char key[_KEY_MAX];
    const char *val = NULL;
    int rc = _split(arg, len, key, &val);
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof _table / sizeof _table[0]; i++)
        if (strcmp(key, _table[i].key) == 0)
            return _table[i].set(cfg, val);
    if (torus_cost_is_key(key))
        return _set_cost(cfg, key, val);
    return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                      "plugstack.conf: unknown argument '%s' (keys: " _KEYS ")",
                      key);
}

int torus_plugin_args_parse(int ac, char *const *av, torus_plugin_config_t *cfg)
{
    *cfg = (torus_plugin_config_t){.default_spec = {.kind = TORUS_SPEC_OFF},
                                   .topology = TORUS_PLUGIN_TOPO_TREE};
    torus_cost_defaults(&cfg->cost);
    for (int i = 0; i < ac; i++) {
        int rc = _parse_one(av[i], cfg);
        if (rc)
            return rc;
    }
    return TORUS_PLUGIN_OK;
}
