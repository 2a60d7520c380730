/*
 * step.c: the step's node list and tasks per node, as the job's environment
 * states them (SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE), checked
 * against what slurmstepd itself knows (S_JOB_NNODES, S_JOB_NODEID,
 * S_JOB_LOCAL_TASK_COUNT, S_JOB_TOTAL_TASK_COUNT).
 *
 * The environment comes from the client (srun), so a user can put anything
 * there; this runs as root inside slurmstepd. Hence the order: first the
 * counts slurmstepd trusts, then the lengths they allow, then the node
 * count of the list WITHOUT expanding it, and only then one allocation per
 * node. A list such as 'x[1-1048576]' with 255-byte names is refused from
 * its count, before 256 MiB of names exist. Pure: no spank calls.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "plugins/torus_plugin.h"

/* Longest tasks-per-node item: "4294967295(x1048576)," */
#define _TPN_ITEM_MAX 22

size_t torus_plugin_step_nodelist_max(uint32_t nnodes)
{
    uint64_t max = (uint64_t)nnodes * TORUS_LAYOUT_NAME_MAX;
    return max < TORUS_LAYOUT_LIST_MAX ? (size_t)max : TORUS_LAYOUT_LIST_MAX;
}

size_t torus_plugin_step_tasks_max(uint32_t nnodes)
{
    uint64_t max = (uint64_t)nnodes * _TPN_ITEM_MAX;
    return max < TORUS_LAYOUT_LIST_MAX ? (size_t)max : TORUS_LAYOUT_LIST_MAX;
}

/* The counts slurmstepd gave us are consistent and within bounds. */
static int _check_items(const torus_plugin_step_in_t *in)
{
    if (in->nnodes == 0 || in->nnodes > TORUS_LAYOUT_NODES_MAX ||
        in->nodeid >= in->nnodes || in->local_tasks == 0 ||
        in->total_tasks < in->local_tasks ||
        in->total_tasks > TORUS_LAYOUT_TASKS_MAX)
        return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                          "slurmstepd reports node %u of %u with %u of %u "
                          "tasks: not a step the torus can lay out",
                          in->nodeid, in->nnodes, in->local_tasks,
                          in->total_tasks);
    return TORUS_PLUGIN_OK;
}

/* A heterogeneous step runs one slurmstepd per component per node; each
 * knows only its component, while SLURM_STEP_NUM_TASKS counts them all. */
static int _check_het(const torus_plugin_step_in_t *in)
{
    if (!in->num_tasks)
        return TORUS_PLUGIN_OK;
    const char *p = in->num_tasks;
    size_t len = strnlen(p, 16);
    uint64_t n = 0;
    for (size_t i = 0; i < len && n <= UINT32_MAX; i++) {
        if (p[i] < '0' || p[i] > '9')
            return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                              "SLURM_STEP_NUM_TASKS '%.16s' is not a number",
                              p);
        n = n * 10 + (uint64_t)(p[i] - '0');
    }
    if (n > in->total_tasks)
        return TORUS_FAIL(TORUS_PLUGIN_EHET,
                          "heterogeneous step (%llu tasks in all, %u in this "
                          "component): a torus cannot span its components",
                          (unsigned long long)n, in->total_tasks);
    return TORUS_PLUGIN_OK;
}

/* Tasks per node, parsed into exactly nnodes counts (trusted size), must
 * add up to the step's total and give this node what slurmstepd runs. */
static int _read_tasks(const torus_plugin_step_in_t *in, uint32_t **out)
{
    const char *tpn = in->tasks_per_node;
    if (strnlen(tpn, torus_plugin_step_tasks_max(in->nnodes) + 1) >
        torus_plugin_step_tasks_max(in->nnodes))
        return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                          "SLURM_STEP_TASKS_PER_NODE: too long for %u nodes",
                          in->nnodes);
    uint32_t *tasks = calloc(in->nnodes, sizeof *tasks);
    if (!tasks)
        return TORUS_FAIL(TORUS_PLUGIN_EINVAL, "out of memory");
    uint64_t sum = 0;
    int rc = TORUS_PLUGIN_OK;
    if (torus_layout_tasks_parse(tpn, in->nnodes, tasks))
        rc = torus_error_prefix(TORUS_PLUGIN_EINVAL,
                                "SLURM_STEP_TASKS_PER_NODE");
    for (uint32_t i = 0; !rc && i < in->nnodes; i++)
        sum += tasks[i];
    if (!rc && sum != in->total_tasks)
        rc = TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                        "SLURM_STEP_TASKS_PER_NODE '%.40s' adds up to %llu "
                        "tasks but the step has %u",
                        tpn, (unsigned long long)sum, in->total_tasks);
    else if (!rc && tasks[in->nodeid] != in->local_tasks)
        rc = TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                        "SLURM_STEP_TASKS_PER_NODE '%.40s' gives node %u %u "
                        "tasks but slurmstepd runs %u there",
                        tpn, in->nodeid, tasks[in->nodeid], in->local_tasks);
    if (rc) {
        free(tasks);
        return rc;
    }
    *out = tasks;
    return TORUS_PLUGIN_OK;
}

/* The node list: its length and node count first, then the expansion. */
static int _read_names(const torus_plugin_step_in_t *in, char ***names)
{
    size_t max = torus_plugin_step_nodelist_max(in->nnodes), n = 0;
    if (strnlen(in->nodelist, max + 1) > max)
        return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                          "SLURM_STEP_NODELIST: longer than %zu bytes, too "
                          "long for %u nodes",
                          max, in->nnodes);
    if (torus_layout_names_count(in->nodelist, &n))
        return torus_error_prefix(TORUS_PLUGIN_EINVAL, "SLURM_STEP_NODELIST");
    if (n != in->nnodes)
        return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                          "SLURM_STEP_NODELIST holds %zu nodes but the step "
                          "has %u",
                          n, in->nnodes);
    size_t got = 0;
    if (torus_layout_names_expand(in->nodelist, names, &got))
        return torus_error_prefix(TORUS_PLUGIN_EINVAL, "SLURM_STEP_NODELIST");
    if (got != in->nnodes) { /* libslurm counted one way, expanded another */
        torus_layout_names_free(*names, got);
        *names = NULL;
        return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                          "SLURM_STEP_NODELIST expands to %zu nodes, not %u",
                          got, in->nnodes);
    }
    return TORUS_PLUGIN_OK;
}

int torus_plugin_step_read(const torus_plugin_step_in_t *in,
                           torus_plugin_step_t *out)
{
    *out = (torus_plugin_step_t){0};
    if (!in->nodelist || !in->tasks_per_node)
        return TORUS_FAIL(TORUS_PLUGIN_EINVAL,
                          "SLURM_STEP_NODELIST or SLURM_STEP_TASKS_PER_NODE "
                          "is not set");
    int rc = _check_items(in);
    if (!rc)
        rc = _check_het(in);
    if (!rc)
        rc = _read_tasks(in, &out->tasks);
    if (!rc)
        rc = _read_names(in, &out->names);
    if (rc) {
        torus_plugin_step_free(out);
        return rc;
    }
    out->nnodes = in->nnodes;
    return TORUS_PLUGIN_OK;
}

void torus_plugin_step_free(torus_plugin_step_t *step)
{
    torus_layout_names_free(step->names, step->names ? step->nnodes : 0);
    free(step->tasks);
    *step = (torus_plugin_step_t){0};
}
