/*
 * report.h: how torus-layout prints a layout: a human-readable report
 * (grid, groups, rings, predictions) and the JSON object tests parse.
 */
#ifndef TORUS_LAYOUT_REPORT_H
#define TORUS_LAYOUT_REPORT_H

#include "topology/torus_layout.h"

/* The step as the tool saw it. */
typedef struct torus_report_input {
    const torus_layout_t *layout;
    char *const *names; /* Slurm node order */
    const torus_cost_t *cost;
    uint64_t bytes;     /* message size for the predictions */
    unsigned max_lines; /* rows/columns to print before eliding */
} torus_report_input_t;

/* JSON: {"dims":[R,C],"source":..,"groups":[[..]..],"tasks":[{"procid",
 * "node","row","col","group"}..]} with tasks ordered by Slurm global id
 * under the default block distribution. */
int torus_report_json(FILE *out, const torus_report_input_t *in);
int torus_report_text(FILE *out, const torus_report_input_t *in);

#endif /* TORUS_LAYOUT_REPORT_H */
