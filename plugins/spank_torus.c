/*
 * spank_torus.c: SPANK plugin entry point for torus (placeholder).
 *
 * The foundation only needs a plugin that loads cleanly into srun and
 * slurmstepd, so the build, the hardening flags and the version script can be
 * checked end to end. The real --torus option arrives with the topology work.
 */
#include <slurm/spank.h>

SPANK_PLUGIN(torus, 1);

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_context() == S_CTX_REMOTE)
        slurm_debug("torus: plugin loaded in slurmstepd");
    (void)sp;
    return ESPANK_SUCCESS;
}
