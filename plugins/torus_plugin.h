/*
 * torus_plugin.h: what the files of spank_torus.so share: the plugstack.conf
 * configuration, the spec the user chose, and the entry points of each
 * SPANK context (local.c: srun/sbatch/salloc, remote.c: slurmstepd).
 */
#ifndef TORUS_PLUGIN_H
#define TORUS_PLUGIN_H

#include <slurm/spank.h>
#include <stdbool.h>

#include "topology/torus_layout.h"

/* Callbacks fail by returning -1: Slurm 22.05 only treats a negative return
 * as failure (ESPANK_ERROR, 3000, is logged and then ignored). */

/* Every message the plugin prints starts with this. */
#define TORUS_MSG "torus: "

/* First switch-map source the remote side tries (plugstack topology=). */
typedef enum torus_topo_pref {
    TORUS_TOPO_TREE =
        0, /* topology.conf, then SLURM_TOPOLOGY_ADDR, then nodelist */
    TORUS_TOPO_ADDR, /* SLURM_TOPOLOGY_ADDR, then nodelist */
    TORUS_TOPO_NONE, /* nodelist */
} torus_topo_pref;

/* plugstack.conf arguments (args.c). */
typedef struct torus_config {
    torus_layout_spec_t default_spec; /* default= */
    torus_topo_pref topology;         /* topology= */
    torus_cost_t cost;                /* node_lat_us= ... bytes= */
    bool verbose;                     /* verbose */
} torus_config_t;

/* Parse plugstack arguments into cfg (defaults first). Pure: no Slurm
 * calls, so the fuzz target can drive it. Returns 0 or -1 with err set. */
int torus_args_parse(int ac, char *const *av, torus_config_t *cfg, char *err,
                     size_t errlen);

/* Plugin-wide state: one per process (srun, sbatch or one slurmstepd). */
typedef struct torus_plugin_state {
    torus_config_t cfg;
    bool spec_given; /* --torus seen (or inherited) */
    char spec_text[TORUS_LAYOUT_SPEC_MAX + 1];
    torus_layout_spec_t spec;
} torus_plugin_state_t;

extern torus_plugin_state_t torus_plugin;

/* The spec in force: --torus if given, else plugstack default=. */
const torus_layout_spec_t *torus_plugin_spec(void);

/* --torus option callback (local.c): validate at submission. */
int torus_local_option(int val, const char *optarg, int remote);
/* srun, before launch: check an explicit RxC against the step's size. */
int torus_local_user_init(spank_t sp);

/* slurmstepd: compute the layout once (remote.c), then set each task's
 * environment, then free. */
int torus_remote_init(spank_t sp);
int torus_remote_task_init(spank_t sp);
void torus_remote_exit(void);

#endif /* TORUS_PLUGIN_H */
