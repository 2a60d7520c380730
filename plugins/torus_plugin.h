/*
 * torus_plugin.h: the one internal header of spank_torus.so. It includes
 * only downward (Slurm's spank.h, common/, topology/), and the files of the
 * plugin depend on each other in one direction only:
 *
 *   spank_torus.c  entry points + option table: dispatches to the contexts
 *     local.c      srun / sbatch / salloc (local and allocator contexts)
 *     remote.c     slurmstepd (remote context)
 *       args.c     plugstack.conf arguments and the plugin-wide state
 *
 * Everything here is torus_plugin_* (the layout library is torus_layout_*,
 * the cost model torus_cost_*). The version script (spank_torus.map) keeps
 * all of it inside the object: only slurm_spank_*, plugin_* and spank_*
 * leave it. Errors follow common/torus_error.h: the callbacks in
 * spank_torus.c, local.c and remote.c are the boundary that logs
 * torus_error_msg(); nothing below them prints.
 */
#ifndef TORUS_PLUGIN_H
#define TORUS_PLUGIN_H

#include <slurm/spank.h>
#include <stdbool.h>

#include "common/torus_error.h"
#include "topology/torus_layout.h"

/* Callbacks fail by returning -1: Slurm 22.05 only treats a negative return
 * as failure (ESPANK_ERROR, 3000, is logged and then ignored). */
#define TORUS_PLUGIN_FAIL (-1)

/* Every message the plugin prints starts with this. */
#define TORUS_PLUGIN_MSG "torus: "

/* Result codes of the plugin's own functions. */
typedef enum torus_plugin_rc {
    TORUS_PLUGIN_OK = 0,
    TORUS_PLUGIN_EINVAL = 1, /* a bad plugstack.conf argument */
} torus_plugin_rc;

/* First switch-map source the remote side tries (plugstack topology=). */
typedef enum torus_plugin_topo {
    TORUS_PLUGIN_TOPO_TREE = 0, /* topology.conf, then SLURM_TOPOLOGY_ADDR,
                                 * then nodelist */
    TORUS_PLUGIN_TOPO_ADDR,     /* SLURM_TOPOLOGY_ADDR, then nodelist */
    TORUS_PLUGIN_TOPO_NONE,     /* nodelist */
} torus_plugin_topo;

/* plugstack.conf arguments (args.c). */
typedef struct torus_plugin_config {
    torus_layout_spec_t default_spec; /* default= */
    torus_plugin_topo topology;       /* topology= */
    torus_cost_t cost;                /* node_lat_us= ... bytes= */
    bool verbose;                     /* verbose */
} torus_plugin_config_t;

/* Parse plugstack arguments into cfg (defaults first). Strict: every
 * argument is key=value from the table in args.c, or the flag `verbose`.
 * Pure: no Slurm calls, so the fuzz target and the unit test drive it.
 * Returns TORUS_PLUGIN_EINVAL with a message starting "plugstack.conf: ". */
int torus_plugin_args_parse(int ac, char *const *av,
                            torus_plugin_config_t *cfg);

/* Plugin-wide state: one per process (srun, sbatch or one slurmstepd). */
typedef struct torus_plugin_state {
    torus_plugin_config_t cfg;
    bool spec_given; /* --torus seen (or inherited) */
    char spec_text[TORUS_LAYOUT_SPEC_MAX + 1];
    torus_layout_spec_t spec;
} torus_plugin_state_t;

extern torus_plugin_state_t torus_plugin_state;

/* The spec in force: --torus if given, else plugstack default=. */
const torus_layout_spec_t *torus_plugin_spec(void);

/* local.c: the --torus option callback (validates at submission), and
 * srun's check of an explicit RxC against the step's size. */
int torus_plugin_local_option(int val, const char *optarg, int remote);
int torus_plugin_local_user_init(spank_t sp);

/* remote.c: compute the layout once per step (init_post_opt), set each
 * task's environment (task_init), then free (exit). */
int torus_plugin_remote_init(spank_t sp);
int torus_plugin_remote_task_init(spank_t sp);
void torus_plugin_remote_exit(void);

#endif /* TORUS_PLUGIN_H */
