/*
 * local.c: spank_torus.so in srun, sbatch and salloc (local and allocator
 * contexts). Only validation happens here: the spec is checked when the
 * option is parsed, so `srun --torus=4y2` or `#SBATCH --torus=0x3` fails at
 * submission; srun also checks an RxC given on its own command line
 * against the step's task count (one inherited from #SBATCH/salloc is left
 * to the nodes, which apply it only to steps of its size). No topology work
 * and no RPCs: the nodes do that (remote.c).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "plugins/torus_plugin.h"

int torus_plugin_local_option(int val, const char *optarg, int remote)
{
    (void)val;
    /* srun applies the allocation's --torus (sbatch/salloc leave it in the
     * environment) by calling us with getenv()'s own pointer, and a --torus
     * on its command line with argv's: an RxC from the allocation is only
     * applied to steps of its size (remote.c). Should Slurm ever copy the
     * value, it counts as srun's own, and a step it does not fit fails, as
     * before. */
    const char *env = getenv(TORUS_PLUGIN_ALLOC_OPTION_ENV);
    torus_plugin_state.spec_inherited = !remote && env && optarg == env;
    /* `--torus` without a value means auto. */
    const char *text = optarg && *optarg ? optarg : "auto";
    torus_layout_spec_t spec;
    if (torus_layout_spec_parse(text, &spec)) {
        slurm_error(TORUS_PLUGIN_MSG "--torus=%.40s: %s", text,
                    torus_error_msg());
        return TORUS_PLUGIN_FAIL;
    }
    torus_plugin_state.spec = spec;
    torus_plugin_state.spec_given = true;
    torus_layout_spec_format(&spec, torus_plugin_state.spec_text,
                             sizeof torus_plugin_state.spec_text);
    return ESPANK_SUCCESS;
}

int torus_plugin_local_user_init(spank_t sp)
{
    const torus_layout_spec_t *spec = torus_plugin_spec();
    if (spec->kind != TORUS_SPEC_EXPLICIT)
        return ESPANK_SUCCESS;
    /* srun knows the step's node and task counts without asking anyone. */
    uint32_t nnodes = 0, ntasks = 0;
    if (spank_get_item(sp, S_JOB_NNODES, &nnodes) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS ||
        !ntasks)
        return ESPANK_SUCCESS; /* the nodes will check it again */
    uint64_t want = (uint64_t)spec->rows * spec->cols;
    /* The allocation's RxC may not fit a helper step, or a step of a job
     * that lost or gained nodes since: the nodes use auto, and srun says
     * so once, before the step starts. */
    if (torus_plugin_state.spec_inherited) {
        if (want != ntasks)
            slurm_info(TORUS_PLUGIN_MSG
                       "warning: --torus=%ux%u from the allocation no longer "
                       "fits this step: the grid holds %llu tasks, the step "
                       "has %u on %u nodes; the step's grid is derived as "
                       "with --torus=auto",
                       spec->rows, spec->cols, (unsigned long long)want,
                       ntasks, nnodes);
        return ESPANK_SUCCESS;
    }
    if (want != ntasks) {
        slurm_error(
            TORUS_PLUGIN_MSG
            "--torus=%ux%u: the grid holds %llu tasks but the step has %u "
            "(on %u nodes)",
            spec->rows, spec->cols, (unsigned long long)want, ntasks, nnodes);
        return TORUS_PLUGIN_FAIL;
    }
    if (nnodes && ntasks % nnodes) {
        slurm_error(
            TORUS_PLUGIN_MSG
            "--torus=%ux%u: %u tasks cannot spread evenly over %u nodes, "
            "and an explicit grid needs the same task count on every node",
            spec->rows, spec->cols, ntasks, nnodes);
        return TORUS_PLUGIN_FAIL;
    }
    uint32_t tpn = nnodes ? ntasks / nnodes : 0, c = spec->cols;
    if (tpn && ((c >= tpn && c % tpn) || (c < tpn && tpn % c))) {
        slurm_error(
            TORUS_PLUGIN_MSG
            "--torus=%ux%u: rows of %u tasks would split the %u tasks of a "
            "node (C must be a multiple or a divisor of the tasks per node)",
            spec->rows, c, c, tpn);
        return TORUS_PLUGIN_FAIL;
    }
    return ESPANK_SUCCESS;
}
