/*
 * torus_plugin.h: the one internal header of spank_torus.so. It includes
 * only downward (Slurm's spank.h, common/, topology/), and the files of the
 * plugin depend on each other in one direction only:
 *
 *   spank_torus.c  entry points + option table: dispatches to the contexts
 *     local.c      srun / sbatch / salloc (local and allocator contexts)
 *     remote.c     slurmstepd (remote context)
 *       step.c     the step's nodes and tasks, validated (pure)
 *       slurm_conf.c  the one read of libslurm's slurm_conf global
 *       args.c     the plugin-wide state (arguments: topology/plugstack.c)
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

#include "common/torus_env.h"
#include "common/torus_error.h"
#include "topology/torus_layout.h"

/* Callbacks fail by returning -1: Slurm 22.05 only treats a negative return
 * as failure (ESPANK_ERROR, 3000, is logged and then ignored). */
#define TORUS_PLUGIN_FAIL (-1)

/* The plugin's one option, --torus[=ARG]: srun --help shows this text and
 * spank_torus(8) is generated from it (plugins/spank_torus_doc.c). */
#define TORUS_PLUGIN_OPTION     "torus"
#define TORUS_PLUGIN_OPTION_ARG "auto|off|RxC"
#define TORUS_PLUGIN_OPTION_HELP                                       \
    "Lay the step's tasks out on a topology-aware 2D torus and "       \
    "export " TORUS_ENV_DIMS ", " TORUS_ENV_COORD ", " TORUS_ENV_GROUP \
    ", ... to every task. auto (the default with no value) picks the " \
    "grid from the switch topology, RxC fixes it, off disables it. "   \
    "See torus(7)."

/* Every message the plugin prints starts with this. */
#define TORUS_PLUGIN_MSG "torus: "

/* Result codes of the plugin's own functions. */
typedef enum torus_plugin_rc {
    TORUS_PLUGIN_OK = 0,
    TORUS_PLUGIN_EINVAL = 1, /* a bad plugstack.conf argument or step input */
    TORUS_PLUGIN_EHET,       /* a heterogeneous step (one stepd per part) */
} torus_plugin_rc;

/* Where sbatch/salloc leave `--torus` for the job's sruns (plugstack.c of
 * Slurm: SLURM_SPANK_ + _SLURM_SPANK_OPTION_<plugin>_<option>). */
#define TORUS_PLUGIN_ALLOC_OPTION_ENV \
    "SLURM_SPANK__SLURM_SPANK_OPTION_torus_torus"

/* plugstack.conf arguments: parsed by the layout library's
 * torus_layout_plugstack_parse(), which torus-layout --check-plugstack
 * shares. */
typedef torus_layout_plugstack_t torus_plugin_config_t;

/* Parse plugstack arguments into cfg (torus_layout_plugstack_parse()).
 * Returns TORUS_PLUGIN_EINVAL with a message starting "plugstack.conf: ". */
int torus_plugin_args_parse(int ac, char *const *av,
                            torus_plugin_config_t *cfg);

/* Plugin-wide state: one per process (srun, sbatch or one slurmstepd). */
typedef struct torus_plugin_state {
    torus_plugin_config_t cfg;
    bool spec_given;     /* --torus seen (or inherited) */
    bool spec_inherited; /* srun only: it came from the allocation's env */
    char spec_text[TORUS_LAYOUT_SPEC_MAX + 1];
    torus_layout_spec_t spec;
} torus_plugin_state_t;

extern torus_plugin_state_t torus_plugin_state;

/* The spec in force: --torus if given, else plugstack default=. */
const torus_layout_spec_t *torus_plugin_spec(void);

/* step.c: the step's nodes and tasks per node, read from the job's
 * environment (user-controlled) and checked against what slurmstepd itself
 * knows (spank items) BEFORE anything is sized from the environment. */
typedef struct torus_plugin_step_in {
    uint32_t nnodes, nodeid;           /* S_JOB_NNODES, S_JOB_NODEID */
    uint32_t local_tasks, total_tasks; /* S_JOB_LOCAL/TOTAL_TASK_COUNT */
    const char *nodelist;              /* SLURM_STEP_NODELIST */
    const char *tasks_per_node;        /* SLURM_STEP_TASKS_PER_NODE */
    const char *num_tasks;             /* SLURM_STEP_NUM_TASKS or NULL */
} torus_plugin_step_in_t;

typedef struct torus_plugin_step {
    char **names; /* nnodes names, in step node id order */
    uint32_t *tasks;
    size_t nnodes;
} torus_plugin_step_t;

/* Longest environment value the checks can accept for a step of `nnodes`
 * nodes: callers size their read buffers with it. */
size_t torus_plugin_step_nodelist_max(uint32_t nnodes);
size_t torus_plugin_step_tasks_max(uint32_t nnodes);

/* Fill *out from `in`. TORUS_PLUGIN_EHET for a heterogeneous step,
 * TORUS_PLUGIN_EINVAL when the environment disagrees with slurmstepd or is
 * malformed (message names the variable), ENOMEM codes as EINVAL. Pure:
 * no spank calls, so the unit test drives it. */
int torus_plugin_step_read(const torus_plugin_step_in_t *in,
                           torus_plugin_step_t *out);
void torus_plugin_step_free(torus_plugin_step_t *step);

/* slurm_conf.c: the one place that reads libslurm's internal `slurm_conf`
 * global (slurmstepd's own configuration). Copies TopologyPlugin and the
 * slurm.conf path into the buffers; false when the global is absent (not
 * inside a Slurm daemon) or a value does not fit. */
bool torus_plugin_slurm_conf(char *topology_plugin, size_t plugin_len,
                             char *conf_path, size_t path_len);

/* gpu.c: a task's GPU and rail (pure). */
typedef struct torus_plugin_gpu_in {
    int gpus;                /* GPUs of the step on this node (0: none) */
    uint32_t tasks_per_node; /* the layout's T */
    uint32_t local;          /* the task's local id */
    const char *visible;     /* the task's CUDA_VISIBLE_DEVICES, or NULL */
} torus_plugin_gpu_in_t;

typedef struct torus_plugin_gpu {
    int gpus;      /* as given */
    int local_gpu; /* index into the visible devices; -1: not set */
    char why[192]; /* why not, when gpus > 0 and local_gpu is -1 */
} torus_plugin_gpu_t;

/* A GPU count "[type:]N" (SLURM_GPUS_PER_NODE, SLURM_GPUS_ON_NODE): N, 0
 * when unset or empty, -1 when malformed. */
int torus_plugin_gpu_count(const char *count);
/* Entries of a device list "0,1,2" (SLURM_STEP_GPUS, CUDA_VISIBLE_DEVICES;
 * UUIDs count too): 0 when unset or empty, -1 when malformed. */
int torus_plugin_gpu_list_len(const char *list);
void torus_plugin_gpu_plan(const torus_plugin_gpu_in_t *in,
                           torus_plugin_gpu_t *out);
/* The NIC of column `col` (plugstack nics=), NULL without nics=. */
const char *torus_plugin_nic(const torus_plugin_config_t *cfg, uint32_t col);

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
