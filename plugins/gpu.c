/*
 * gpu.c: GPUs and rails of a task, decided from what Slurm set (pure: no
 * spank calls, so tests/unit/test_plugin_gpu.c drives it).
 *
 * Policy (docs/env-contract.md, "GPUs per node"): the plugin never changes
 * CUDA_VISIBLE_DEVICES or Slurm's binding; it says which of the devices the
 * task sees is its own (TORUS_LOCAL_GPU), so that rows of a node's tasks
 * are rows of its GPUs:
 *   - the task sees one device (Slurm bound it: --gpus-per-task,
 *     --gpu-bind=single:1, ...): index 0;
 *   - it sees at least as many as there are tasks on the node: its local
 *     task id;
 *   - more tasks than GPUs on the node, or fewer devices visible than
 *     tasks: none (NCCL refuses two ranks of one communicator on one GPU).
 * With plugstack nics=, column c uses nics[c % nnics]: each column ring
 * crosses nodes on its own rail (NCCL_IB_HCA, UCX_NET_DEVICES).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "plugins/torus_plugin.h"

#define _GPUS_MAX 1024 /* entries accepted in one list */

int torus_plugin_gpu_count(const char *count)
{
    if (!count || !*count)
        return 0;
    const char *colon = strrchr(count, ':');
    const char *num = colon ? colon + 1 : count;
    size_t n = strspn(num, "0123456789");
    if (n == 0 || n > 4 || num[n] != '\0')
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (num[i] - '0');
    return v;
}

int torus_plugin_gpu_list_len(const char *list)
{
    if (!list || !*list)
        return 0;
    int n = 1;
    size_t len = strnlen(list, 65536);
    if (len == 65536)
        return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)list[i];
        if (ch == ',') {
            if (i == 0 || i + 1 == len || list[i - 1] == ',' || ++n > _GPUS_MAX)
                return -1;
        } else if (ch <= ' ' || ch >= 127) {
            return -1;
        }
    }
    return n;
}

void torus_plugin_gpu_plan(const torus_plugin_gpu_in_t *in,
                           torus_plugin_gpu_t *out)
{
    *out = (torus_plugin_gpu_t){.gpus = in->gpus, .local_gpu = -1};
    int visible = torus_plugin_gpu_list_len(in->visible);
    if (in->gpus <= 0)
        return;
    if (in->tasks_per_node > (uint32_t)in->gpus) {
        snprintf(out->why, sizeof out->why,
                 "%u tasks per node but %d GPU(s): no TORUS_LOCAL_GPU (NCCL "
                 "refuses two ranks on one GPU)",
                 in->tasks_per_node, in->gpus);
    } else if (visible == 1) {
        out->local_gpu = 0; /* Slurm bound one GPU to this task */
    } else if (visible == 0 ||
               (visible > 0 && (uint32_t)visible >= in->tasks_per_node)) {
        out->local_gpu = (int)in->local;
    } else {
        snprintf(out->why, sizeof out->why,
                 "the task sees %d GPU(s) (CUDA_VISIBLE_DEVICES) for %u "
                 "tasks per node: no TORUS_LOCAL_GPU",
                 visible, in->tasks_per_node);
    }
}

const char *torus_plugin_nic(const torus_plugin_config_t *cfg, uint32_t col)
{
    return cfg->nnics ? cfg->nics[col % cfg->nnics] : NULL;
}
