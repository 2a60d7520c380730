/*
 * slurm_conf.c: the one place spank_torus.so reads libslurm's internal
 * `slurm_conf` global, slurmstepd's parsed copy of slurm.conf. SPANK has no
 * item for the configuration, and asking slurmctld (slurm_load_ctl_conf)
 * would be one RPC per node per step; the plugin needs only two strings:
 *   - TopologyPlugin, which decides where a switch map may come from (a
 *     job's environment never does: users control it), and
 *   - the slurm.conf path, next to which Slurm keeps topology.conf (in
 *     configless mode, slurmd's cache directory).
 * The symbol is weak, so the plugin still loads where it is absent (then
 * this returns false and the caller uses the node list). slurm_conf_t is
 * the public slurm.h type of the Slurm the plugin was built against, and a
 * SPANK plugin is rebuilt for each Slurm release anyway (spank_torus(8)).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <slurm/slurm.h>

#include "plugins/torus_plugin.h"

extern slurm_conf_t slurm_conf __attribute__((weak));

/* Copy src (NULL = "") into dst of len bytes; false when it does not fit. */
static bool _copy(char *dst, size_t len, const char *src)
{
    int n = snprintf(dst, len, "%s", src ? src : "");
    return n >= 0 && (size_t)n < len;
}

bool torus_plugin_slurm_conf(char *topology_plugin, size_t plugin_len,
                             char *conf_path, size_t path_len)
{
    const slurm_conf_t *conf = &slurm_conf;
    if (!conf)
        return false;
    return _copy(topology_plugin, plugin_len, conf->topology_plugin) &&
           _copy(conf_path, path_len, conf->slurm_conf);
}
