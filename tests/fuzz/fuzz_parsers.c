/*
 * fuzz_parsers.c: libFuzzer target for every parser that reads untrusted
 * text in torus: the --torus spec, plugstack.conf arguments, Slurm
 * tasks-per-node lists, SLURM_TOPOLOGY_ADDR values, topology.conf, cost
 * values, and a full layout computed from whatever parsed. Not built by
 * `make` or run in CI; build and run it by hand:
 *
 *   make fuzz-parsers          # clang -fsanitize=fuzzer,address,undefined
 *   make fuzz-run FUZZ_SECONDS=60
 *
 * The first input byte picks the parser; the rest is its text.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/torus_plugin.h"
#include "topology/torus_layout.h"

/* Split text on blanks into at most 16 arguments, like plugstack.conf. */
static int _split(char *text, char **av)
{
    int ac = 0;
    for (char *tok = strtok(text, " \t\n"); tok && ac < 16;
         tok = strtok(NULL, " \t\n"))
        av[ac++] = tok;
    return ac;
}

/* Lay out a small step over whatever switch map parsed. */
static void _layout(const torus_layout_topo_t *topo, const char *tasks_text,
                    uint8_t spec_byte)
{
    static const char *const names[] = {"n1", "n2", "n3", "n4",
                                        "n5", "n6", "n7", "n8"};
    static const char *const specs[] = {"auto", "off", "1x8",
                                        "2x4",  "8x2", "3x5"};
    size_t n = 1 + spec_byte % 8;
    uint32_t tasks[8];
    if (torus_layout_tasks_parse(tasks_text, n, tasks))
        for (size_t i = 0; i < n; i++)
            tasks[i] = 1 + (spec_byte >> 5);
    torus_layout_input_t in = {.nnodes = n,
                               .nodes = names,
                               .tasks = tasks,
                               .topo = topo,
                               .source = TORUS_SOURCE_TREE};
    torus_cost_defaults(&in.cost);
    torus_layout_spec_parse(specs[spec_byte % 6], &in.spec);
    torus_layout_t *l;
    if (torus_layout_compute(&in, &l) == TORUS_LAYOUT_OK) {
        if (torus_layout_enabled(l)) {
            /* Coordinates must stay inside the grid: abort() tells libFuzzer.
             */
            for (size_t i = 0; i < n; i++) {
                torus_layout_task_t t;
                if (torus_layout_place(l, i, 0, &t) ||
                    t.row >= torus_layout_rows(l) ||
                    t.col >= torus_layout_cols(l))
                    abort();
            }
        }
        torus_layout_free(l);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 65536)
        return 0;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    switch (data[0] % 7) {
    case 0: {
        torus_layout_spec_t s;
        if (torus_layout_spec_parse(text, &s) == TORUS_LAYOUT_OK) {
            char back[64];
            torus_layout_spec_format(&s, back, sizeof back);
            torus_layout_spec_t again;
            /* What we print must parse back to the same spec. */
            if (torus_layout_spec_parse(back, &again) ||
                memcmp(&s, &again, sizeof s))
                abort();
        }
        break;
    }
    case 1: {
        char *av[16];
        int ac = _split(text, av);
        torus_plugin_config_t cfg;
        torus_plugin_args_parse(ac, av, &cfg);
        break;
    }
    case 2: {
        uint32_t counts[64];
        torus_layout_tasks_parse(text, 1 + data[1] % 64, counts);
        break;
    }
    case 3: {
        torus_layout_topo_t *topo;
        if (torus_layout_topo_new(&topo) == TORUS_LAYOUT_OK) {
            for (char *line = strtok(text, "\n"); line;
                 line = strtok(NULL, "\n"))
                torus_layout_topo_add_addr(topo, line);
            _layout(topo, "1", data[1]);
            torus_layout_topo_free(topo);
        }
        break;
    }
    case 4: {
        torus_layout_topo_t *topo;
        /* Tree lines only, or whichever form (SwitchName= or BlockName=
         * with BlockSizes=) the text holds. */
        torus_layout_topo_kind k =
            data[1] & 1 ? TORUS_TOPO_ANY : TORUS_TOPO_TREE;
        if (torus_layout_topo_parse_kind(text, size - 1, "fuzz", k, &topo) ==
            TORUS_LAYOUT_OK) {
            _layout(topo, "2", data[1]);
            torus_layout_topo_free(topo);
        }
        break;
    }
    case 5: {
        /* topology.yaml, with and without a partition's Topology=. */
        torus_layout_topo_t *topo;
        bool flat;
        if (torus_layout_topo_parse_yaml(text, size - 1, "fuzz.yaml",
                                         data[1] & 1 ? "a" : NULL, &topo,
                                         &flat) == TORUS_LAYOUT_OK) {
            _layout(topo, "3", data[1]);
            torus_layout_topo_free(topo);
        }
        break;
    }
    default: {
        torus_cost_t cost;
        torus_cost_defaults(&cost);
        char *eq = strchr(text, '=');
        if (eq) {
            *eq = '\0';
            torus_cost_set(&cost, text, eq + 1);
        }
        _layout(NULL, text, data[1]);
        break;
    }
    }
    free(text);
    return 0;
}
