/*
 * args.c: the plugin-wide state of spank_torus.so and its plugstack.conf
 * arguments. The arguments themselves are parsed by the layout library
 * (topology/plugstack.c), so that `torus-layout --check-plugstack` accepts
 * and refuses exactly what the plugin does. No Slurm calls here: the fuzz
 * target and the unit test link this file alone. This is the bottom of the
 * plugin: it includes nothing of the plugin's other files.
 */
#include "config.h"

#include "plugins/torus_plugin.h"

torus_plugin_state_t torus_plugin_state;

const torus_layout_spec_t *torus_plugin_spec(void)
{
    return torus_plugin_state.spec_given ? &torus_plugin_state.spec
                                         : &torus_plugin_state.cfg.default_spec;
}

int torus_plugin_args_parse(int ac, char *const *av, torus_plugin_config_t *cfg)
{
    return torus_layout_plugstack_parse(ac, av, cfg) ? TORUS_PLUGIN_EINVAL
                                                     : TORUS_PLUGIN_OK;
}
