/*
 * args.c: the plugstack.conf arguments of spank_torus.so, e.g.
 *   required spank_torus.so default=auto topology=tree leaf_bw_gbs=25 verbose
 * Every argument is key=value (or the bare flag `verbose`); unknown keys and
 * bad values are rejected so a typo in plugstack.conf cannot silently change
 * behaviour. No Slurm calls here: the fuzz target links this file alone.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/torus_error.h"
#include "plugins/torus_plugin.h"

#define _ARG_MAX 128 /* longest accepted argument */

static int _errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int _errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

#define _KEYS                                                             \
    "default, topology, verbose, node_lat_us, node_bw_gbs, leaf_lat_us, " \
    "leaf_bw_gbs, cross_lat_us, cross_bw_gbs, rails, reduce_gbs, "        \
    "convert_gbs, bytes"

int torus_args_parse(int ac, char *const *av, torus_config_t *cfg, char *err,
                     size_t errlen)
{
    *cfg = (torus_config_t){.default_spec = {.kind = TORUS_SPEC_OFF},
                            .topology = TORUS_TOPO_TREE};
    torus_cost_defaults(&cfg->cost);
    for (int i = 0; i < ac; i++) {
        const char *arg = av[i];
        if (!arg)
            return _errf(err, errlen, "plugstack.conf: missing argument");
        size_t len = strnlen(arg, _ARG_MAX + 1);
        if (len > _ARG_MAX)
            return _errf(err, errlen,
                         "plugstack.conf: argument '%.40s...' too long", arg);
        if (strcmp(arg, "verbose") == 0) {
            cfg->verbose = true;
            continue;
        }
        const char *eq = memchr(arg, '=', len);
        char key[32];
        if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof key)
            return _errf(
                err, errlen,
                "plugstack.conf: '%s' is not key=value (keys: " _KEYS ")", arg);
        memcpy(key, arg, (size_t)(eq - arg));
        key[eq - arg] = '\0';
        const char *val = eq + 1;
        char why[TORUS_LAYOUT_ERR_LEN];
        if (strcmp(key, "default") == 0) {
            if (torus_layout_spec_parse(val, &cfg->default_spec, why,
                                        sizeof why))
                return _errf(err, errlen, "plugstack.conf: default=: %s", why);
        } else if (strcmp(key, "topology") == 0) {
            if (strcmp(val, "tree") == 0)
                cfg->topology = TORUS_TOPO_TREE;
            else if (strcmp(val, "addr") == 0)
                cfg->topology = TORUS_TOPO_ADDR;
            else if (strcmp(val, "none") == 0)
                cfg->topology = TORUS_TOPO_NONE;
            else
                return _errf(
                    err, errlen,
                    "plugstack.conf: topology=%s: expected tree, addr or none",
                    val);
        } else if (torus_cost_is_key(key)) {
            if (torus_cost_set(&cfg->cost, key, val))
                return _errf(err, errlen, "plugstack.conf: %s",
                             torus_error_msg());
        } else {
            return _errf(
                err, errlen,
                "plugstack.conf: unknown argument '%s' (keys: " _KEYS ")", key);
        }
    }
    return 0;
}
