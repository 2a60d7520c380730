/*
 * report.c: torus-layout's two output formats. The text report is for
 * people (what grid, which groups, which rings, and what the model predicts
 * for each all-reduce algorithm); the JSON is for the integration tests and
 * scripts, so its keys and order are fixed.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>

#include "common/torus_json.h"
#include "topology/report.h"

/* The node order, as one array per switch group. */
static json_object *_groups(const torus_report_input_t *in)
{
    const torus_layout_t *l = in->layout;
    size_t n = torus_layout_node_count(l);
    json_object *all = json_object_new_array(), *g = NULL;
    uint32_t gid = UINT32_MAX;
    for (size_t p = 0; all && p < n; p++) {
        size_t node = torus_layout_node_at(l, p);
        uint32_t ng = torus_layout_node_group(l, node);
        if (!g || ng != gid) {
            g = json_object_new_array();
            if (!g || json_object_array_add(all, g)) {
                json_object_put(g);
                json_object_put(all);
                return NULL; /* no memory: the caller fails */
            }
        }
        gid = ng;
        json_object_array_add(g, json_object_new_string(in->names[node]));
    }
    return all;
}

/* Every task (block distribution) and its place on the torus; NULL when
 * the layout cannot place one (its message recorded). */
static json_object *_tasks(const torus_report_input_t *in)
{
    const torus_layout_t *l = in->layout;
    json_object *all = json_object_new_array();
    uint64_t tasks = torus_layout_enabled(l) ? torus_layout_task_count(l) : 0;
    for (uint64_t id = 0; all && id < tasks; id++) {
        size_t node;
        uint32_t local;
        torus_layout_task_t t;
        if (torus_layout_block_task(l, id, &node, &local) ||
            torus_layout_place(l, node, local, &t)) {
            json_object_put(all);
            return NULL;
        }
        json_object *o = json_object_new_object();
        if (!o) {
            json_object_put(all);
            return NULL; /* no memory: the caller fails */
        }
        torus_json_int64(o, "procid", (long long)id);
        torus_json_string(o, "node", in->names[node]);
        torus_json_int64(o, "row", t.row);
        torus_json_int64(o, "col", t.col);
        torus_json_int64(o, "group", t.group);
        json_object_array_add(all, o);
    }
    return all;
}

int torus_report_json(FILE *out, const torus_report_input_t *in)
{
    const torus_layout_t *l = in->layout;
    json_object *o = json_object_new_object(), *dims = json_object_new_array(),
                *groups = _groups(in), *tasks = _tasks(in);
    if (!o || !dims || !groups || !tasks) { /* no memory, or a task unplaced */
        json_object_put(o);
        json_object_put(dims);
        json_object_put(groups);
        json_object_put(tasks);
        return -1;
    }
    json_object_array_add(dims, json_object_new_int64(torus_layout_rows(l)));
    json_object_array_add(dims, json_object_new_int64(torus_layout_cols(l)));
    json_object_object_add(o, "dims", dims);
    torus_json_string(o, "source",
                      torus_layout_source_name(torus_layout_source_of(l)));
    json_object_object_add(o, "groups", groups);
    json_object_object_add(o, "tasks", tasks);
    return torus_json_write_line(out, o) || ferror(out) ? -1 : 0;
}

/* Global id (block distribution) of the task at torus coordinate (r, c):
 * tasks are laid out row-major over the torus node order. */
static uint64_t _procid_at(const torus_layout_t *l, uint32_t r, uint32_t c,
                           size_t *node)
{
    uint32_t tpn = torus_layout_tasks_per_node(l);
    uint64_t k = (uint64_t)r * torus_layout_cols(l) + c;
    *node = torus_layout_node_at(l, (size_t)(k / tpn));
    return (uint64_t)*node * tpn + k % tpn;
}

/* One ring: "row 3: 24@n4 25@n4 ...". `along_row` picks row or column. */
static void _ring(FILE *out, const torus_report_input_t *in, bool along_row,
                  uint32_t i)
{
    const torus_layout_t *l = in->layout;
    uint32_t len = along_row ? torus_layout_cols(l) : torus_layout_rows(l);
    fprintf(out, "  %s %u:", along_row ? "row" : "col", i);
    for (uint32_t j = 0; j < len; j++) {
        if (j == in->max_lines && len > in->max_lines + 1) {
            fprintf(out, " ... (%u more)", len - j);
            break;
        }
        size_t node;
        uint64_t id =
            along_row ? _procid_at(l, i, j, &node) : _procid_at(l, j, i, &node);
        fprintf(out, " %" PRIu64 "@%s", id, in->names[node]);
    }
    fputc('\n', out);
}

static void _rings(FILE *out, const torus_report_input_t *in, bool along_row)
{
    const torus_layout_t *l = in->layout;
    uint32_t count = along_row ? torus_layout_rows(l) : torus_layout_cols(l);
    fprintf(out, "%s rings (procid@node, in ring order):\n",
            along_row ? "row" : "column");
    for (uint32_t i = 0; i < count; i++) {
        if (i == in->max_lines && count > in->max_lines + 1) {
            fprintf(out, "  ... %u more (use --json for every task)\n",
                    count - i);
            break;
        }
        _ring(out, in, along_row, i);
    }
}

int torus_report_text(FILE *out, const torus_report_input_t *in)
{
    const torus_layout_t *l = in->layout;
    size_t n = torus_layout_node_count(l);
    if (torus_layout_enabled(l))
        fprintf(out, "grid: %u x %u (%" PRIu64 " tasks = %zu nodes x %u)\n",
                torus_layout_rows(l), torus_layout_cols(l),
                torus_layout_task_count(l), n, torus_layout_tasks_per_node(l));
    else
        fprintf(out, "grid: off (%zu nodes, %" PRIu64 " tasks)\n", n,
                torus_layout_task_count(l));
    fprintf(out, "source: %s\n",
            torus_layout_source_name(torus_layout_source_of(l)));
    fprintf(out, "reason: %s\n", torus_layout_reason(l));

    fprintf(out,
            "groups (%u, one per leaf switch, block or torus line, in torus "
            "order):\n",
            torus_layout_group_count(l));
    size_t start = 0;
    for (uint32_t g = 0; g < torus_layout_group_count(l); g++) {
        size_t end = start;
        while (end < n &&
               torus_layout_node_group(l, torus_layout_node_at(l, end)) == g)
            end++;
        char **members = malloc((end - start) * sizeof *members);
        if (!members)
            return -1;
        for (size_t p = start; p < end; p++)
            members[p - start] = in->names[torus_layout_node_at(l, p)];
        char *list = torus_layout_names_compress(members, end - start);
        fprintf(out, "  group %u (%s): %zu node(s) %s\n", g,
                torus_layout_group_switch(l, g), end - start,
                list ? list : "?");
        free(list);
        free(members);
        start = end;
    }
    fprintf(out, "node order (TORUS_NODE_INDEX 0..%zu):", n - 1);
    for (size_t p = 0; p < n; p++) {
        if (p == in->max_lines && n > in->max_lines + 1) {
            fprintf(out, " ... (%zu more)", n - p);
            break;
        }
        fprintf(out, " %s", in->names[torus_layout_node_at(l, p)]);
    }
    fputc('\n', out);
    if (!torus_layout_enabled(l))
        return ferror(out) ? -1 : 0;

    _rings(out, in, true);
    _rings(out, in, false);

    torus_layout_prediction_t p;
    torus_layout_predict(l, in->cost, in->bytes, &p);
    fprintf(out,
            "predicted all-reduce of %" PRIu64 " bytes (alpha-beta model):\n",
            in->bytes);
    fprintf(out, "  flat ring      %12.3f ms\n", p.flat_ring_s * 1e3);
    fprintf(out, "  hierarchical   %12.3f ms\n", p.hierarchical_s * 1e3);
    fprintf(out, "  2D torus       %12.3f ms\n", p.torus2d_s * 1e3);
    return ferror(out) ? -1 : 0;
}
