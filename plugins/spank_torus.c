/*
 * spank_torus.c: entry points of spank_torus.so, the --torus SPANK plugin.
 * Shaped like pyxis: this file holds the plugin identity, the option table
 * and the dispatch to one file per SPANK context (local.c for srun, sbatch
 * and salloc; remote.c for slurmstepd); the arguments and the state are
 * args.c's. It is the top of the plugin: nothing includes or calls back
 * into it. What the plugin does is in spank_torus(8).
 */
#include "config.h"

#include <string.h>

#include "plugins/torus_plugin.h"

SPANK_PLUGIN(torus, 1);

static struct spank_option _options[] = {
    {
        TORUS_PLUGIN_OPTION,
        TORUS_PLUGIN_OPTION_ARG,
        TORUS_PLUGIN_OPTION_HELP,
        2,
        0,
        torus_plugin_local_option,
    },
    SPANK_OPTIONS_TABLE_END,
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    spank_context_t ctx = spank_context();
    /* slurmd loads plugstack plugins too; nothing to do there. */
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR)
        return ESPANK_SUCCESS;
    if (torus_plugin_args_parse(ac, av, &torus_plugin_state.cfg)) {
        slurm_error(TORUS_PLUGIN_MSG "%s", torus_error_msg());
        return TORUS_PLUGIN_FAIL;
    }
    for (struct spank_option *o = _options; o->name; o++) {
        spank_err_t rc = spank_option_register(sp, o);
        if (rc != ESPANK_SUCCESS) {
            slurm_error(TORUS_PLUGIN_MSG "cannot register --%s: %s", o->name,
                        spank_strerror(rc));
            return TORUS_PLUGIN_FAIL;
        }
    }
    return ESPANK_SUCCESS;
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    return torus_plugin_local_user_init(sp);
}

/* Remote: options have been delivered by now, so the layout can be made
 * (as root, before any task exists, so a bad explicit spec fails early). */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_context() != S_CTX_REMOTE)
        return ESPANK_SUCCESS;
    return torus_plugin_remote_init(sp);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    return torus_plugin_remote_task_init(sp);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    if (spank_context() == S_CTX_REMOTE)
        torus_plugin_remote_exit();
    return ESPANK_SUCCESS;
}
