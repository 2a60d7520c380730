/*
 * plugin_forge.c: a test-only SPANK plugin that plays a hostile client. Put
 * before spank_torus.so in plugstack.conf, it overwrites variables of the
 * step's job environment in init_post_opt (slurmstepd, as root), i.e. what
 * spank_torus.so then reads, the way a modified srun could send them:
 *   optional plugin_forge.so SLURM_STEP_NODELIST=x[1-1048576] ...
 * Each argument is NAME=VALUE. Used by tests/integration/plugin_harden.sh
 * only; never installed.
 */
#include <slurm/spank.h>
#include <string.h>

SPANK_PLUGIN(torus_forge, 1);

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    if (spank_context() != S_CTX_REMOTE)
        return 0;
    for (int i = 0; i < ac; i++) {
        char name[128];
        const char *eq = strchr(av[i], '=');
        size_t n = eq ? (size_t)(eq - av[i]) : 0;
        if (n == 0 || n >= sizeof name)
            continue;
        memcpy(name, av[i], n);
        name[n] = '\0';
        spank_setenv(sp, name, eq + 1, 1);
    }
    return 0;
}
