/*
 * remote.c: spank_torus.so inside slurmstepd. Once per node per step
 * (init_post_opt) it reads the step's node list and tasks per node from the
 * job environment and the topology.conf that Slurm itself reads, and
 * computes the layout; every node does the same, so they agree without a
 * single RPC. task_init then exports the task's TORUS_* variables.
 *
 * Safety: values from the job environment are user-controlled, so they are
 * read into bounded buffers and parsed strictly; nothing is written to disk;
 * nothing here can block. Anything unexpected turns the torus off for the
 * step with a message rather than failing the job, except an explicit RxC
 * that does not fit, which the user must hear about.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>

#include "common/torus_env.h"
#include "plugins/torus_plugin.h"

/* slurmstepd's own configuration (libslurm's global). Weak, so the plugin
 * still loads into a process without it and simply falls back to
 * $SLURM_CONF. Only read: the path and the topology plugin's name. */
extern slurm_conf_t slurm_conf __attribute__((weak));

static const char *const _vars[] = {
    TORUS_ENV_VERSION, TORUS_ENV_DIMS,       TORUS_ENV_COORD, TORUS_ENV_GROUP,
    TORUS_ENV_NGROUPS, TORUS_ENV_NODE_INDEX, TORUS_ENV_SOURCE};

static struct {
    bool skip; /* batch, extern or interactive step: leave alone */
    bool fail; /* explicit RxC that does not fit: fail every task */
    torus_layout_t *layout; /* NULL or disabled: torus off for this step */
    char **names;
    size_t nnodes;
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

/* Read a job environment variable into a fresh buffer of at most max bytes. */
static char *_job_env(spank_t sp, const char *name, size_t max)
{
    char *buf = malloc(max + 1);
    if (!buf)
        return NULL;
    spank_err_t rc = spank_getenv(sp, name, buf, (int)max + 1);
    if (rc != ESPANK_SUCCESS) {
        _warn("%s: %s", name,
              rc == ESPANK_NOSPACE ? "too long" : spank_strerror(rc));
        free(buf);
        return NULL;
    }
    return buf;
}

/* Switch map, in the order of torus(7): topology.conf, then
 * SLURM_TOPOLOGY_ADDR (only when it proves the topology flat), then none. */
static torus_layout_topo_t *_switch_map(spank_t sp, torus_layout_source *source)
{
    torus_layout_topo_t *topo = NULL;
    char path[4096];
    torus_plugin_topo pref = torus_plugin_state.cfg.topology;
    const slurm_conf_t *conf = &slurm_conf;
    if (pref == TORUS_PLUGIN_TOPO_TREE) {
        const char *plugin = conf ? conf->topology_plugin : NULL;
        if (plugin && !strstr(plugin, "tree")) {
            _warn("TopologyPlugin is %.64s, not topology/tree", plugin);
        } else if (torus_layout_topo_conf_path(conf ? conf->slurm_conf : NULL,
                                               path, sizeof path)) {
            _warn("topology.conf path too long");
        } else if (torus_layout_topo_load(path, &topo)) {
            _warn("%s", torus_error_msg());
        } else {
            *source = TORUS_SOURCE_TREE;
            return topo;
        }
    }
    if (pref <= TORUS_PLUGIN_TOPO_ADDR) {
        char pattern[256];
        spank_err_t rc = spank_getenv(sp, "SLURM_TOPOLOGY_ADDR_PATTERN",
                                      pattern, sizeof pattern);
        if (rc == ESPANK_SUCCESS && strcmp(pattern, "node") == 0) {
            *source = TORUS_SOURCE_ADDR;
            return NULL;
        }
        _warn("SLURM_TOPOLOGY_ADDR only describes this node's own switches");
    }
    _warn("no switch map; using the node list (one group)");
    *source = TORUS_SOURCE_NODELIST;
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

/* Phase 2: the step's nodes (into _r) and tasks per node (a fresh array),
 * from the job environment, cross-checked with the step's node count.
 * NULL with a warning when anything is missing or malformed. */
static uint32_t *_read_step(spank_t sp)
{
    uint32_t nnodes = 0, *tasks = NULL;
    char *nodelist = _job_env(sp, "SLURM_STEP_NODELIST", TORUS_LAYOUT_LIST_MAX);
    char *tpn =
        _job_env(sp, "SLURM_STEP_TASKS_PER_NODE", TORUS_LAYOUT_LIST_MAX);
    if (!nodelist || !tpn)
        goto out;
    if (torus_layout_names_expand(nodelist, &_r.names, &_r.nnodes)) {
        _warn("SLURM_STEP_NODELIST: %s", torus_error_msg());
        goto out;
    }
    if (spank_get_item(sp, S_JOB_NNODES, &nnodes) == ESPANK_SUCCESS &&
        nnodes != _r.nnodes) {
        _warn("SLURM_STEP_NODELIST does not match the step's node count");
        goto out;
    }
    if (!(tasks = malloc(_r.nnodes * sizeof *tasks))) {
        _warn("SLURM_STEP_TASKS_PER_NODE: out of memory");
    } else if (torus_layout_tasks_parse(tpn, _r.nnodes, tasks)) {
        _warn("SLURM_STEP_TASKS_PER_NODE: %s", torus_error_msg());
        free(tasks);
        tasks = NULL;
    }
out:
    free(nodelist);
    free(tpn);
    return tasks;
}

/* Phase 3: the layout (into _r.layout). An explicit grid this step cannot
 * hold fails the step; anything else unexpected turns the torus off. */
static void _compute(spank_t sp, const torus_layout_spec_t *spec,
                     const uint32_t *tasks)
{
    torus_layout_input_t in = {.nnodes = _r.nnodes,
                               .nodes = (const char *const *)_r.names,
                               .tasks = tasks,
                               .spec = *spec,
                               .cost = torus_plugin_state.cfg.cost};
    torus_layout_topo_t *topo = _switch_map(sp, &in.source);
    in.topo = topo;
    torus_layout_rc rc = torus_layout_compute(&in, &_r.layout);
    torus_layout_topo_free(topo);
    if (rc == TORUS_LAYOUT_ENOFIT) {
        /* Slurm 22.05 ignores errors from init_post_opt, so the tasks are
         * failed in task_init, where the user also sees why. */
        slurm_error(TORUS_PLUGIN_MSG "--torus=%ux%u: %s", spec->rows,
                    spec->cols, torus_error_msg());
        snprintf(_r.note, sizeof _r.note, "--torus=%ux%u: %s", spec->rows,
                 spec->cols, torus_error_msg());
        _r.fail = true;
    } else if (rc) {
        _warn("%s", torus_error_msg());
    }
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
    const torus_layout_spec_t *spec = torus_plugin_spec();
    if (spec->kind == TORUS_SPEC_OFF)
        return ESPANK_SUCCESS;
    uint32_t *tasks = _read_step(sp);
    if (tasks)
        _compute(sp, spec, tasks);
    free(tasks);
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

/* Every TORUS_* variable of task t (docs/env-contract.md). */
static int _export(spank_t sp, const torus_layout_t *l,
                   const torus_layout_task_t *t)
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
    return ESPANK_SUCCESS;
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
        if (first)
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
    return _export(sp, l, &t);
}

void torus_plugin_remote_exit(void)
{
    torus_layout_free(_r.layout);
    torus_layout_names_free(_r.names, _r.nnodes);
    memset(&_r, 0, sizeof _r);
}
