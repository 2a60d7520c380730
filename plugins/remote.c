/*
 * remote.c: spank_torus.so inside slurmstepd. Once per node per step
 * (init_post_opt) it reads the step's node list and tasks per node from the
 * job environment, checks them against slurmstepd's own counts (step.c),
 * loads the switch map that slurm.conf's TopologyPlugin names, and computes
 * the layout; every node does the same, so they agree without a single RPC.
 * task_init then exports the task's TORUS_* variables.
 *
 * Safety: values from the job environment are user-controlled, so they are
 * read into buffers sized by what slurmstepd reports, checked before
 * anything is allocated from them, and never taken as proof of the network
 * (that comes from the configuration only). topology.conf is bounded
 * (plugstack topology_max=). Nothing is written to disk; nothing can block.
 *
 * Failing the step vs turning the torus off: anything that every node sees
 * alike (non-uniform tasks, a missing TopologyPlugin) turns the torus off
 * with a warning. Anything one node may see differently from the others (it
 * cannot read topology.conf) fails the step, because tasks with layouts of
 * different inputs would silently disagree. An explicit RxC that does not
 * fit, and a heterogeneous step with --torus, fail too: the user must hear.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "common/torus_env.h"
#include "plugins/torus_plugin.h"

static const char *const _vars[] = {
    TORUS_ENV_VERSION, TORUS_ENV_DIMS,      TORUS_ENV_COORD,
    TORUS_ENV_GROUP,   TORUS_ENV_NGROUPS,   TORUS_ENV_NODE_INDEX,
    TORUS_ENV_SOURCE,  TORUS_ENV_LOCAL_GPU, TORUS_ENV_GPUS_PER_NODE,
    TORUS_ENV_NIC};

static struct {
    bool skip; /* batch, extern or interactive step: leave alone */
    bool fail; /* the step must not run (see the head of this file) */
    torus_layout_t *layout; /* NULL or disabled: torus off for this step */
    torus_plugin_step_t step;
    uint32_t total_tasks;
    int gpus;       /* GPUs of the step on this node (0: none) */
    char note[768]; /* warnings, shown once per step to the user */
} _r;

/* Append one sentence to the step's note and log it on this node. */
static void _warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void _warn(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    slurm_info(TORUS_PLUGIN_MSG "warning: %s", msg);
    size_t used = strlen(_r.note);
    snprintf(_r.note + used, sizeof _r.note - used, "%s%s", used ? "; " : "",
             msg);
}

/* Fail every task of the step on this node, saying why (once, in task 0 of
 * each node, so the node that could not go on names itself). */
static void _fail_step(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void _fail_step(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(_r.note, sizeof _r.note, fmt, ap);
    va_end(ap);
    slurm_error(TORUS_PLUGIN_MSG "%s", _r.note);
    _r.fail = true;
}

/* Read a job environment variable into a fresh buffer of at most max bytes
 * (NULL when unset or longer: the checks in step.c say why). */
static char *_job_env(spank_t sp, const char *name, size_t max)
{
    char *buf = malloc(max + 1);
    if (!buf)
        return NULL;
    spank_err_t rc = spank_getenv(sp, name, buf, (int)max + 1);
    if (rc != ESPANK_SUCCESS) {
        if (rc == ESPANK_NOSPACE)
            _warn("%s: longer than %zu bytes", name, max);
        free(buf);
        return NULL;
    }
    return buf;
}

/* Load `path` (a file every node must read alike: failing fails the step,
 * see the head of this file). `kind` is what TopologyPlugin says the lines
 * are (ANY for a torus-specific file of another plugin). */
static torus_layout_topo_t *_load(const char *path, torus_layout_topo_kind kind,
                                  const char *want, const char *why,
                                  torus_layout_source *source)
{
    torus_layout_topo_t *topo = NULL;
    bool flat = false;
    if (torus_layout_topo_load_any(path, torus_plugin_state.cfg.topology_max,
                                   kind, want, &topo, &flat)) {
        _fail_step("%s; %s, so every node must read the same switch map: "
                   "the step cannot run here (spank_torus(8); --torus=off runs it "
                   "without a torus)",
                   torus_error_msg(), why);
        return NULL;
    }
    *source = flat ? TORUS_SOURCE_ADDR : TORUS_SOURCE_TREE;
    return topo;
}

/* TopologyPlugin -> the form of its lines; ANY for flat/none/unknown. */
static torus_layout_topo_kind _kind(const char *plugin, bool *flat)
{
    static const struct {
        const char *name;
        torus_layout_topo_kind kind;
    } k[] = {{"topology/tree", TORUS_TOPO_TREE},
             {"topology/block", TORUS_TOPO_BLOCK},
             {"topology/torus3d", TORUS_TOPO_TORUS3D},
             {"topology/ring", TORUS_TOPO_RING}};
    *flat = strcmp(plugin, "topology/none") == 0 ||
            strcmp(plugin, "topology/flat") == 0;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(plugin, k[i].name) == 0)
            return k[i].kind;
    return TORUS_TOPO_ANY;
}

/* For a topology.yaml `path`: the partition's Topology= (into want, ""
 * for Slurm's default choice); NULL for other files, which have one
 * topology. SLURM_JOB_PARTITION is the job's: every node reads the same.
 * slurm.conf is read only here, only for a yaml file. */
static const char *_want(spank_t sp, const char *path, const char *conf_path,
                         char *want, size_t len)
{
    char part[TORUS_LAYOUT_NAME_MAX];
    want[0] = '\0';
    if (!torus_layout_topo_is_yaml(path))
        return NULL;
    if (spank_getenv(sp, "SLURM_JOB_PARTITION", part, sizeof part) ==
            ESPANK_SUCCESS &&
        torus_layout_partition_topology(conf_path, part, want, len))
        want[0] = '\0';
    return want[0] ? want : NULL;
}

/* Switch map, in the order of spank_torus(8). What the network looks like comes
 * from the configuration only, never from the job's environment:
 * plugstack topology_file= first; then topology.yaml next to slurm.conf
 * (Slurm 25.05+ reads it before topology.conf); then topology.conf with the
 * lines of TopologyPlugin (tree or block); topology/none and topology/flat
 * mean a flat network. torus3d/ring need topology_file= (each node sees
 * only its own SLURM_TOPOLOGY_ADDR). Anything else leaves the node list. */
static torus_layout_topo_t *_switch_map(spank_t sp, torus_layout_source *source)
{
    char plugin[128] = "", conf_path[4096] = "", path[4096];
    char want[TORUS_LAYOUT_NAME_MAX];
    const torus_plugin_config_t *cfg = &torus_plugin_state.cfg;
    *source = TORUS_SOURCE_NODELIST;
    if (cfg->topology == TORUS_TOPO_PREF_NONE) {
        _warn("no switch map; using the node list (one group)");
        return NULL;
    }
    if (!torus_plugin_slurm_conf(plugin, sizeof plugin, conf_path,
                                 sizeof conf_path))
        plugin[0] = '\0';
    bool flat;
    torus_layout_topo_kind kind = _kind(plugin, &flat);
    bool conf_kind = kind == TORUS_TOPO_TREE || kind == TORUS_TOPO_BLOCK;
    char why[160];
    snprintf(why, sizeof why, "TopologyPlugin is %s", plugin);
    if (cfg->topology_file[0])
        return _load(
            cfg->topology_file, TORUS_TOPO_ANY,
            _want(sp, cfg->topology_file, conf_path, want, sizeof want),
            "plugstack topology_file= names it", source);
    if (flat) {
        *source = TORUS_SOURCE_ADDR;
        return NULL;
    }
    if (cfg->topology == TORUS_TOPO_PREF_TREE && conf_kind &&
        !torus_layout_conf_sibling(conf_path, "topology.yaml", path,
                                   sizeof path) &&
        access(path, F_OK) == 0)
        return _load(path, TORUS_TOPO_ANY,
                     _want(sp, path, conf_path, want, sizeof want), why,
                     source);
    if (cfg->topology == TORUS_TOPO_PREF_TREE && conf_kind) {
        if (torus_layout_topo_conf_path(conf_path, path, sizeof path)) {
            _fail_step("topology.conf: path too long");
            return NULL;
        }
        return _load(path, kind, NULL, why, source);
    }
    if (kind == TORUS_TOPO_TORUS3D || kind == TORUS_TOPO_RING)
        _warn("TopologyPlugin is %s: each node sees only its own "
              "SLURM_TOPOLOGY_ADDR; list every node's address in a file "
              "named by plugstack topology_file= (spank_torus(8))",
              plugin);
    else if (conf_kind)
        _warn("SLURM_TOPOLOGY_ADDR only describes this node's own switches");
    else
        _warn("TopologyPlugin is %.64s, not one torus reads",
              plugin[0] ? plugin : "unknown");
    _warn("no switch map; using the node list (one group)");
    return NULL;
}

/* Phase 1: is this a step the torus applies to (not the batch script, the
 * extern container or an interactive step)? */
static bool _step_wanted(spank_t sp)
{
    uint32_t stepid = 0;
    return spank_get_item(sp, S_JOB_STEPID, &stepid) == ESPANK_SUCCESS &&
           stepid != SLURM_BATCH_SCRIPT && stepid != SLURM_EXTERN_CONT &&
           stepid != SLURM_INTERACTIVE_STEP;
}

/* Phase 2: the step's nodes and tasks per node (into _r.step), checked
 * against slurmstepd's own counts before anything is sized from the
 * environment. False (with a warning, or a failed step) when unusable. */
static bool _read_step(spank_t sp)
{
    torus_plugin_step_in_t in = {0};
    if (spank_get_item(sp, S_JOB_NNODES, &in.nnodes) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_NODEID, &in.nodeid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &in.local_tasks) !=
            ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &in.total_tasks) !=
            ESPANK_SUCCESS) {
        _warn("slurmstepd did not report the step's size");
        return false;
    }
    char num[24];
    char *nodelist = _job_env(sp, "SLURM_STEP_NODELIST",
                              torus_plugin_step_nodelist_max(in.nnodes));
    char *tpn = _job_env(sp, "SLURM_STEP_TASKS_PER_NODE",
                         torus_plugin_step_tasks_max(in.nnodes));
    in.nodelist = nodelist;
    in.tasks_per_node = tpn;
    in.num_tasks = spank_getenv(sp, "SLURM_STEP_NUM_TASKS", num, sizeof num) ==
                           ESPANK_SUCCESS
                       ? num
                       : NULL;
    int rc = torus_plugin_step_read(&in, &_r.step);
    free(nodelist);
    free(tpn);
    _r.total_tasks = in.total_tasks;
    /* Heterogeneous: refused when the user asked for a torus, off (with a
     * warning) when only plugstack default= would have made one. */
    if (rc == TORUS_PLUGIN_EHET && torus_plugin_state.spec_given)
        _fail_step("--torus: %s; run it with --torus=off", torus_error_msg());
    else if (rc)
        _warn("torus off: %s", torus_error_msg());
    return rc == TORUS_PLUGIN_OK;
}

/* GPUs of the step on this node, from what Slurm set for the step:
 * SLURM_GPUS_ON_NODE, else the SLURM_STEP_GPUS / SLURM_JOB_GPUS device
 * list, else SLURM_GPUS_PER_NODE. 0 when none (or malformed). */
static int _step_gpus(spank_t sp)
{
    static const char *const counts[] = {"SLURM_GPUS_ON_NODE",
                                         "SLURM_GPUS_PER_NODE"};
    static const char *const lists[] = {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"};
    char v[4096];
    int n = 0;
    if (spank_getenv(sp, counts[0], v, sizeof v) == ESPANK_SUCCESS)
        n = torus_plugin_gpu_count(v);
    for (size_t i = 0; n <= 0 && i < 2; i++)
        if (spank_getenv(sp, lists[i], v, sizeof v) == ESPANK_SUCCESS)
            n = torus_plugin_gpu_list_len(v);
    if (n <= 0 && spank_getenv(sp, counts[1], v, sizeof v) == ESPANK_SUCCESS)
        n = torus_plugin_gpu_count(v);
    return n > 0 ? n : 0;
}

/* With GPUs, `auto` makes a row of each node's GPUs (one task per GPU):
 * rows are NVLink rings, columns cross nodes (docs/env-contract.md). */
static void _gpu_rows(torus_layout_spec_t *spec)
{
    if (_r.gpus <= 0 || spec->kind != TORUS_SPEC_AUTO)
        return;
    for (size_t i = 0; i < _r.step.nnodes; i++)
        if (_r.step.tasks[i] != (uint32_t)_r.gpus)
            return;
    *spec = (torus_layout_spec_t){.kind = TORUS_SPEC_EXPLICIT,
                                  .rows = (uint32_t)_r.step.nnodes,
                                  .cols = (uint32_t)_r.gpus};
}

/* Phase 3: the layout (into _r.layout). An explicit grid this step cannot
 * hold fails the step; anything else unexpected turns the torus off. */
static void _compute(spank_t sp, const torus_layout_spec_t *spec)
{
    torus_layout_input_t in = {.nnodes = _r.step.nnodes,
                               .nodes = (const char *const *)_r.step.names,
                               .tasks = _r.step.tasks,
                               .spec = *spec,
                               .cost = torus_plugin_state.cfg.cost};
    _gpu_rows(&in.spec);
    torus_layout_topo_t *topo = _switch_map(sp, &in.source);
    if (_r.fail)
        return;
    in.topo = topo;
    torus_layout_rc rc = torus_layout_compute(&in, &_r.layout);
    torus_layout_topo_free(topo);
    if (rc == TORUS_LAYOUT_ENOFIT) {
        /* Slurm 22.05 ignores errors from init_post_opt, so the tasks are
         * failed in task_init, where the user also sees why. */
        _fail_step("--torus=%ux%u: %s", spec->rows, spec->cols,
                   torus_error_msg());
    } else if (rc) {
        _warn("%s", torus_error_msg());
    }
}

/* An RxC that came with the allocation (#SBATCH or salloc --torus) reaches
 * every srun of the job; it applies to steps of exactly R*C tasks, and the
 * others (helper steps) get auto with a warning. An RxC given to this srun
 * still fails a step it does not fit. srun's own --torus goes to the step as
 * an option; the allocation's is in the job environment, so an option equal
 * to it is taken as the allocation's (srun already failed the case where it
 * was also on srun's command line: local.c). */
static void _spec_for_step(spank_t sp, torus_layout_spec_t *spec)
{
    char alloc[TORUS_LAYOUT_SPEC_MAX + 1];
    torus_layout_spec_t a;
    if (spec->kind != TORUS_SPEC_EXPLICIT ||
        (uint64_t)spec->rows * spec->cols == _r.total_tasks ||
        spank_getenv(sp, TORUS_PLUGIN_ALLOC_OPTION_ENV, alloc, sizeof alloc) !=
            ESPANK_SUCCESS ||
        torus_layout_spec_parse(alloc, &a) || a.kind != TORUS_SPEC_EXPLICIT ||
        a.rows != spec->rows || a.cols != spec->cols)
        return;
    _warn("--torus=%ux%u from the allocation does not match this step's %u "
          "tasks; using auto",
          spec->rows, spec->cols, _r.total_tasks);
    spec->kind = TORUS_SPEC_AUTO;
}

/* Phase 4: tell this node's log what came out. */
static void _report(void)
{
    const torus_layout_t *l = _r.layout;
    if (!torus_layout_enabled(l))
        _warn("%s", torus_layout_reason(l));
    else if (torus_plugin_state.cfg.verbose)
        slurm_info(TORUS_PLUGIN_MSG "%ux%u, %u group(s), source %s: %s",
                   torus_layout_rows(l), torus_layout_cols(l),
                   torus_layout_group_count(l),
                   torus_layout_source_name(torus_layout_source_of(l)),
                   torus_layout_reason(l));
}

int torus_plugin_remote_init(spank_t sp)
{
    if (!_step_wanted(sp)) {
        _r.skip = true;
        return ESPANK_SUCCESS;
    }
    torus_layout_spec_t spec = *torus_plugin_spec();
    if (spec.kind == TORUS_SPEC_OFF || !_read_step(sp))
        return ESPANK_SUCCESS;
    _spec_for_step(sp, &spec);
    _r.gpus = _step_gpus(sp);
    _compute(sp, &spec);
    if (_r.layout && !_r.fail)
        _report();
    return ESPANK_SUCCESS;
}

static int _set(spank_t sp, const char *name, const char *fmt, unsigned a,
                unsigned b)
{
    char val[64];
    snprintf(val, sizeof val, fmt, a, b);
    spank_err_t rc = spank_setenv(sp, name, val, 1);
    if (rc != ESPANK_SUCCESS) {
        slurm_error(TORUS_PLUGIN_MSG "cannot set %s: %s", name,
                    spank_strerror(rc));
        return TORUS_PLUGIN_FAIL;
    }
    return 0;
}

/* GPU and rail of task t: TORUS_GPUS_PER_NODE, TORUS_LOCAL_GPU (gpu.c's
 * policy: CUDA_VISIBLE_DEVICES stays Slurm's), and with nics= TORUS_NIC
 * plus NCCL_IB_HCA / UCX_NET_DEVICES unless the user set them. */
static int _export_gpu(spank_t sp, const torus_layout_t *l,
                       const torus_layout_task_t *t, uint32_t local)
{
    char visible[4096];
    torus_plugin_gpu_in_t in = {.gpus = _r.gpus,
                                .tasks_per_node =
                                    torus_layout_tasks_per_node(l),
                                .local = local};
    if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", visible, sizeof visible) ==
        ESPANK_SUCCESS)
        in.visible = visible;
    torus_plugin_gpu_t g;
    torus_plugin_gpu_plan(&in, &g);
    if (g.gpus > 0 &&
        _set(sp, TORUS_ENV_GPUS_PER_NODE, "%u", (unsigned)g.gpus, 0))
        return TORUS_PLUGIN_FAIL;
    if (g.local_gpu >= 0 &&
        _set(sp, TORUS_ENV_LOCAL_GPU, "%u", (unsigned)g.local_gpu, 0))
        return TORUS_PLUGIN_FAIL;
    if (g.gpus > 0 && g.local_gpu < 0 && in.local == 0)
        fprintf(stderr, TORUS_PLUGIN_MSG "warning: %s\n", g.why);
    const char *nic = torus_plugin_nic(&torus_plugin_state.cfg, t->col);
    if (!nic)
        return ESPANK_SUCCESS;
    char hca[40], ucx[40];
    snprintf(hca, sizeof hca, "=%s", nic);
    snprintf(ucx, sizeof ucx, "%s%s", nic, strchr(nic, ':') ? "" : ":1");
    if (spank_setenv(sp, TORUS_ENV_NIC, nic, 1) != ESPANK_SUCCESS ||
        spank_setenv(sp, "NCCL_IB_HCA", hca, 0) == ESPANK_ERROR ||
        spank_setenv(sp, "UCX_NET_DEVICES", ucx, 0) == ESPANK_ERROR)
        return TORUS_PLUGIN_FAIL;
    return ESPANK_SUCCESS;
}

/* Every TORUS_* variable of task t (docs/env-contract.md). */
static int _export(spank_t sp, const torus_layout_t *l,
                   const torus_layout_task_t *t, uint32_t local)
{
    /* The version value has no conversion: _set prints it as it is. */
    if (_set(sp, TORUS_ENV_VERSION, TORUS_ENV_VERSION_VALUE, 0, 0) ||
        _set(sp, TORUS_ENV_DIMS, "%ux%u", torus_layout_rows(l),
             torus_layout_cols(l)) ||
        _set(sp, TORUS_ENV_COORD, "%u,%u", t->row, t->col) ||
        _set(sp, TORUS_ENV_GROUP, "%u", t->group, 0) ||
        _set(sp, TORUS_ENV_NGROUPS, "%u", torus_layout_group_count(l), 0) ||
        _set(sp, TORUS_ENV_NODE_INDEX, "%u", t->node_index, 0) ||
        spank_setenv(sp, TORUS_ENV_SOURCE,
                     torus_layout_source_name(torus_layout_source_of(l)),
                     1) != ESPANK_SUCCESS)
        return TORUS_PLUGIN_FAIL;
    return _export_gpu(sp, l, t, local);
}

int torus_plugin_remote_task_init(spank_t sp)
{
    if (spank_context() != S_CTX_REMOTE || _r.skip)
        return ESPANK_SUCCESS;
    uint32_t nodeid = 0;
    int local = 0;
    if (spank_get_item(sp, S_JOB_NODEID, &nodeid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS)
        return ESPANK_SUCCESS;
    /* This runs in the task itself, as the user, with its stderr already
     * connected: the first task tells the user what the nodes logged. */
    bool first = nodeid == 0 && local == 0;
    if (_r.fail) {
        /* Task 0 of every node: a failure may be this node's alone. */
        if (local == 0)
            fprintf(stderr, TORUS_PLUGIN_MSG "error: %s\n", _r.note);
        return TORUS_PLUGIN_FAIL;
    }
    if (first && _r.note[0])
        fprintf(stderr, TORUS_PLUGIN_MSG "warning: %s\n", _r.note);
    torus_layout_task_t t;
    if (!_r.layout || local < 0 ||
        torus_layout_place(_r.layout, nodeid, (uint32_t)local, &t) !=
            TORUS_LAYOUT_OK) {
        /* Off: do not let values inherited from an enclosing step leak in. */
        for (size_t i = 0; i < sizeof _vars / sizeof _vars[0]; i++)
            spank_unsetenv(sp, _vars[i]);
        return ESPANK_SUCCESS;
    }
    const torus_layout_t *l = _r.layout;
    if (first && torus_plugin_state.cfg.verbose)
        fprintf(stderr, TORUS_PLUGIN_MSG "%ux%u, source %s: %s\n",
                torus_layout_rows(l), torus_layout_cols(l),
                torus_layout_source_name(torus_layout_source_of(l)),
                torus_layout_reason(l));
    return _export(sp, l, &t, (uint32_t)local);
}

void torus_plugin_remote_exit(void)
{
    torus_layout_free(_r.layout);
    torus_plugin_step_free(&_r.step);
    memset(&_r, 0, sizeof _r);
}
