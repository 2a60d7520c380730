/*
 * torus-layout.c: the admin and debugging tool for the 2D-torus layout.
 * Shows, for a node list (or the current Slurm step), the grid, the node
 * groups, the rings and the alpha-beta prediction of each all-reduce
 * algorithm; --json prints the object the integration tests compare with the
 * TORUS_* variables that spank_torus.so sets. See torus-layout(1).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_cli.h"
#include "common/torus_error.h"
#include "topology/report.h"
#include "topology/torus_layout.h"

static const char _usage[] =
    "NAME\n"
    "    torus-layout - show the topology-aware 2D-torus layout of a Slurm "
    "step\n"
    "\n"
    "SYNOPSIS\n"
    "    torus-layout [--nodes HOSTLIST] [--tasks-per-node N|LIST]\n"
    "                 [--topology FILE|none] [--topology-addr FILE]\n"
    "                 [--topology-type tree|block|any] [--partition NAME]\n"
    "                 [--spec auto|off|RxC] [--cost KEY=VALUE]... [--bytes "
    "SIZE]\n"
    "                 [--json] [--max-lines N] [--topology-max SIZE]\n"
    "    torus-layout --check-plugstack LINE\n"
    "\n"
    "DESCRIPTION\n"
    "    Computes the layout that spank_torus.so (srun --torus) gives a step: "
    "the\n"
    "    R x C grid of tasks, the node groups (one per leaf switch), the node\n"
    "    order, every row and column ring, and the predicted time of one\n"
    "    all-reduce of --bytes for a flat ring, a hierarchical (group) "
    "all-reduce\n"
    "    and the 2D torus. Without --nodes it reads Slurm's environment: run "
    "as a\n"
    "    task of a step it uses that step's own allocation "
    "(SLURM_STEP_NODELIST,\n"
    "    SLURM_STEP_TASKS_PER_NODE) and shows exactly what the plugin set for\n"
    "    the step; run from a batch script or salloc shell it uses the job's\n"
    "    allocation, i.e. what an srun over the whole allocation will get.\n"
    "\n"
    "OPTIONS\n"
    "    --nodes HOSTLIST\n"
    "        The step's nodes in Slurm order, e.g. 'n[001-128]'. Default: the\n"
    "        SLURM_STEP_NODELIST (then SLURM_JOB_NODELIST) environment "
    "variable.\n"
    "    --tasks-per-node N|LIST\n"
    "        Tasks on every node (8), or Slurm's per-node list ('8(x3),4').\n"
    "        Default: SLURM_STEP_TASKS_PER_NODE, then SLURM_TASKS_PER_NODE, "
    "then 1.\n"
    "        A non-uniform list turns the torus off, as the plugin does.\n"
    "    --topology FILE|none\n"
    "        The switch map: a topology.conf (SwitchName= lines of "
    "topology/tree,\n"
    "        BlockName=/BlockSizes= lines of topology/block) or, for a name\n"
    "        ending in .yaml or .yml, a topology.yaml (Slurm 25.05+). "
    "Default:\n"
    "        topology.yaml next to $SLURM_CONF (or /etc/slurm/slurm.conf) if "
    "it\n"
    "        exists, else topology.conf there, as Slurm looks; when neither\n"
    "        exists the layout falls back to the node list (source "
    "\"nodelist\").\n"
    "        'none' forces that. (The plugin itself fails the step instead "
    "when\n"
    "        its file cannot be read: see spank_torus(8).)\n"
    "    --topology-type tree|block|any\n"
    "        Which lines of a topology.conf to use (the other form is checked,"
    "\n"
    "        then set aside), or which type the chosen topology.yaml entry "
    "must\n"
    "        have. Default any: the one form the file holds.\n"
    "    --partition NAME\n"
    "        Pick the topology.yaml entry of partition NAME as Slurm does: "
    "its\n"
    "        Topology= in slurm.conf ($SLURM_CONF), else the first entry with\n"
    "        cluster_default: true, else the first. Default: "
    "$SLURM_JOB_PARTITION.\n"
    "    --topology-max SIZE\n"
    "        Refuse a topology.conf larger than SIZE (K, M = powers of 1024),\n"
    "        as the plugin's topology_max= does. Default: 4M, at most 64M.\n"
    "    --topology-addr FILE\n"
    "        Use SLURM_TOPOLOGY_ADDR values instead, one per line, e.g. from\n"
    "        `srun --ntasks-per-node=1 printenv SLURM_TOPOLOGY_ADDR`; '-' "
    "reads\n"
    "        standard input. Source \"SLURM_TOPOLOGY_ADDR\". The coordinate "
    "forms\n"
    "        of Slurm 26.05, NAME:X:Y:Z.node (topology/torus3d) and "
    "NAME:POS.node\n"
    "        (topology/ring), give source \"topology/torus3d\" or "
    "\"topology/ring\":\n"
    "        rows run along one axis of the box the nodes fill, and columns "
    "go\n"
    "        around a cycle of the other two, so every ring is a physical "
    "one.\n"
    "    --spec auto|off|RxC\n"
    "        As srun --torus. Default: "
    "$SLURM_SPANK__SLURM_SPANK_OPTION_torus_torus\n"
    "        (set by #SBATCH --torus), else auto.\n"
    "    --cost KEY=VALUE\n"
    "        Override a cost-model parameter, with the same keys as the "
    "plugin's\n"
    "        plugstack.conf arguments: node_lat_us, node_bw_gbs, leaf_lat_us,\n"
    "        leaf_bw_gbs, cross_lat_us, cross_bw_gbs (latency in "
    "microseconds,\n"
    "        bandwidth in GB/s), rails (inter-node links per node), "
    "reduce_gbs,\n"
    "        convert_gbs (GB/s one task adds and casts) and bytes (the size\n"
    "        `auto` optimises for). Repeat for several. Defaults: 1 us/50 "
    "GB/s in\n"
    "        a node, 5 us/12.5 GB/s under one leaf, 10 us/6.25 GB/s across\n"
    "        switches, rails=1, 400 GB/s adds and casts, bytes=100M.\n"
    "    --bytes SIZE\n"
    "        Message size of the printed predictions (K, M, G = powers of "
    "1024).\n"
    "        Default: the cost model's bytes.\n"
    "    --json\n"
    "        Print one JSON object instead of the report: {\"dims\": [R, C],\n"
    "        \"source\": ..., \"groups\": [[node, ...], ...], \"tasks\": "
    "[{\"procid\",\n"
    "        \"node\", \"row\", \"col\", \"group\"}, ...]}, tasks ordered by "
    "Slurm\n"
    "        global task id under the default block distribution. When the "
    "torus\n"
    "        is off, dims is [0, 0] and tasks is empty.\n"
    "    --max-lines N\n"
    "        Print at most N rings of each kind and N members per ring "
    "(default\n"
    "        32; 0 = all).\n"
    "    --check-plugstack LINE\n"
    "        Parse LINE, a plugstack.conf line for spank_torus.so (\"optional\n"
    "        /path/spank_torus.so default=auto ...\") or only its arguments,\n"
    "        with the plugin's own parser, print the settings it yields, and\n"
    "        exit: 0 when the plugin would accept it, 1 (with the plugin's\n"
    "        message) when it would refuse it. Run it before deploying a "
    "line.\n"
    "    -h, --help\n"
    "        Print this text.\n"
    "    -V, --version\n"
    "        Print the version.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 on success, including a torus turned off (the reason goes to "
    "stderr);\n"
    "    1 when the input is invalid or an explicit RxC does not fit;\n"
    "    2 on a usage error.\n"
    "\n"
    "EXAMPLES\n"
    "    torus-layout --nodes 'n[001-128]' --tasks-per-node 8 \\\n"
    "                 --topology /etc/slurm/topology.conf --bytes 64M\n"
    "    torus-layout --nodes 'n[1-8]' --tasks-per-node 4 --spec 4x8 --json\n"
    "    torus-layout --check-plugstack 'optional spank_torus.so "
    "default=auto'\n"
    "\n"
    "SEE ALSO\n"
    "    torus(7), spank_torus(8), docs/env-contract.md, srun(1), "
    "topology.conf(5)\n";

typedef struct {
    const char *nodes, *tasks, *topology, *topology_addr, *spec, *partition;
    torus_layout_topo_kind kind;
    size_t topology_max;
    torus_cost_t cost;
    uint64_t bytes;
    bool json;
    unsigned max_lines;
} _opts_t;

static int _fail(const char *what)
{
    fprintf(stderr, "torus-layout: %s\n", what);
    return 1;
}

enum {
    O_NODES = 256,
    O_TASKS,
    O_TOPO,
    O_ADDR,
    O_SPEC,
    O_COST,
    O_BYTES,
    O_JSON,
    O_MAX,
    O_TOPO_MAX,
    O_PLUGSTACK,
    O_TYPE,
    O_PARTITION
};
static const struct option _longopts[] = {
    {"nodes", required_argument, NULL, O_NODES},
    {"tasks-per-node", required_argument, NULL, O_TASKS},
    {"topology", required_argument, NULL, O_TOPO},
    {"topology-addr", required_argument, NULL, O_ADDR},
    {"spec", required_argument, NULL, O_SPEC},
    {"cost", required_argument, NULL, O_COST},
    {"bytes", required_argument, NULL, O_BYTES},
    {"json", no_argument, NULL, O_JSON},
    {"max-lines", required_argument, NULL, O_MAX},
    {"topology-max", required_argument, NULL, O_TOPO_MAX},
    {"check-plugstack", required_argument, NULL, O_PLUGSTACK},
    {"topology-type", required_argument, NULL, O_TYPE},
    {"partition", required_argument, NULL, O_PARTITION},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* --cost KEY=VALUE: the cost model's keys, as in plugstack.conf. */
static int _opt_cost(_opts_t *o, const char *arg)
{
    char key[32];
    const char *eq = strchr(arg, '=');
    if (!eq || (size_t)(eq - arg) >= sizeof key) {
        fprintf(stderr, "torus-layout: --cost '%s': expected KEY=VALUE\n", arg);
        return 2;
    }
    memcpy(key, arg, (size_t)(eq - arg));
    key[eq - arg] = '\0';
    if (torus_cost_set(&o->cost, key, eq + 1)) {
        fprintf(stderr, "torus-layout: --cost: %s\n", torus_error_msg());
        return 2;
    }
    return 0;
}

static int _opt_max_lines(_opts_t *o, const char *arg)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(arg, &end, 10);
    if (errno || *end || !*arg || v > 1000000) {
        fprintf(stderr, "torus-layout: --max-lines '%s': expected 0..1000000\n",
                arg);
        return 2;
    }
    o->max_lines = v ? (unsigned)v : UINT32_MAX - 1;
    return 0;
}

/* --topology-max SIZE: the plugin's topology_max=, by the plugin's parser. */
static int _opt_topology_max(_opts_t *o, const char *arg)
{
    char kv[64];
    snprintf(kv, sizeof kv, "topology_max=%.40s", arg);
    char *av[] = {kv};
    torus_layout_plugstack_t cfg;
    if (torus_layout_plugstack_parse(1, av, &cfg)) {
        fprintf(stderr, "torus-layout: --topology-max: %s\n",
                torus_error_msg());
        return 2;
    }
    o->topology_max = cfg.topology_max;
    return 0;
}

/* --check-plugstack LINE: split LINE into words as Slurm splits a
 * plugstack.conf line (blanks; no quoting), drop "required|optional PATH",
 * and hand the rest to the plugin's parser. Exits. */
static void _check_plugstack(const char *line)
{
    enum { WORDS = 64, LEN = 4096 };
    char buf[LEN], *av[WORDS], *save = NULL;
    if (strnlen(line, LEN) >= LEN)
        exit(_fail("--check-plugstack: line longer than 4095 bytes"));
    strcpy(buf, line);
    int ac = 0;
    for (char *w = strtok_r(buf, " \t\r\n", &save); w;
         w = strtok_r(NULL, " \t\r\n", &save)) {
        if (ac == WORDS)
            exit(_fail("--check-plugstack: more than 64 words"));
        av[ac++] = w;
    }
    int skip = 0;
    bool required = ac > 0 && strcmp(av[0], "required") == 0;
    if (ac > 0 && (required || strcmp(av[0], "optional") == 0)) {
        if (ac < 2)
            exit(_fail("--check-plugstack: no plugin path after the "
                       "required/optional keyword"));
        skip = 2;
    }
    torus_layout_plugstack_t cfg;
    if (torus_layout_plugstack_parse(ac - skip, av + skip, &cfg)) {
        fprintf(stderr, "torus-layout: %s\n", torus_error_msg());
        exit(1);
    }
    char spec[TORUS_LAYOUT_SPEC_MAX + 1];
    torus_layout_spec_format(&cfg.default_spec, spec, sizeof spec);
    printf("plugstack ok: default=%s topology=%s topology_max=%zu%s", spec,
           torus_layout_topo_pref_name(cfg.topology), cfg.topology_max,
           cfg.verbose ? " verbose" : "");
    if (cfg.topology_file[0])
        printf(" topology_file=%s", cfg.topology_file);
    for (uint32_t i = 0; i < cfg.nnics; i++)
        printf("%s%s", i ? "," : " nics=", cfg.nics[i]);
    printf("\n");
    if (required)
        fprintf(stderr,
                "torus-layout: note: 'required' fails every srun on the "
                "cluster if the plugin cannot load or start; use 'optional' "
                "for a first roll-out (spank_torus(8))\n");
    exit(fflush(stdout) ? 1 : 0);
}

/* --topology-type tree|block|any */
static int _opt_type(_opts_t *o, const char *arg)
{
    static const torus_layout_topo_kind kinds[] = {
        TORUS_TOPO_TREE, TORUS_TOPO_BLOCK, TORUS_TOPO_ANY};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(arg, torus_layout_topo_kind_name(kinds[i])) == 0) {
            o->kind = kinds[i];
            return 0;
        }
    fprintf(stderr,
            "torus-layout: --topology-type '%s': expected tree, block or "
            "any\n",
            arg);
    return 2;
}

/* One option (getopt's c and optarg): 0, 2 after the message, or -1 when
 * c is none (getopt's '?' or ':'). */
static int _opt(_opts_t *o, int c, const char *arg)
{
    switch (c) {
    case O_NODES:
        o->nodes = arg;
        return 0;
    case O_TASKS:
        o->tasks = arg;
        return 0;
    case O_TOPO:
        o->topology = arg;
        return 0;
    case O_ADDR:
        o->topology_addr = arg;
        return 0;
    case O_PARTITION:
        o->partition = arg;
        return 0;
    case O_TYPE:
        return _opt_type(o, arg);
    case O_SPEC:
        o->spec = arg;
        return 0;
    case O_JSON:
        o->json = true;
        return 0;
    case O_COST:
        return _opt_cost(o, arg);
    case O_BYTES:
        if (!torus_cost_parse_bytes(arg, &o->bytes))
            return 0;
        fprintf(stderr,
                "torus-layout: --bytes '%s': expected a size like 64M\n", arg);
        return 2;
    case O_MAX:
        return _opt_max_lines(o, arg);
    case O_TOPO_MAX:
        return _opt_topology_max(o, arg);
    case O_PLUGSTACK:
        _check_plugstack(arg);
        return 2; /* not reached */
    case 'h':
        fputs(_usage, stdout);
        exit(0);
    case 'V':
        printf("torus-layout %s\n", PACKAGE_VERSION);
        exit(0);
    default:
        return -1;
    }
}

static int _parse_args(int argc, char **argv, _opts_t *o)
{
    int c;
    opterr = 0; /* getopt would name the program by its path */
    while ((c = getopt_long(argc, argv, ":hV", _longopts, NULL)) != -1) {
        int rc = _opt(o, c, optarg);
        if (rc < 0) {
            rc = torus_cli_bad_option(c, argv);
            fprintf(stderr, "torus-layout: %s\n", torus_error_msg());
            return rc;
        }
        if (rc)
            return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "torus-layout: unexpected argument '%s' (see --help)\n",
                argv[optind]);
        return 2;
    }
    return 0;
}

/* First set variable of a NULL-terminated list of names. */
static const char *_env(const char *a, const char *b)
{
    const char *v = getenv(a);
    return v && *v ? v : (b && (v = getenv(b)) && *v ? v : NULL);
}

/* Read SLURM_TOPOLOGY_ADDR lines into a fresh switch map. */
static int _load_addr(const char *path, torus_layout_topo_t **topo)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
    char line[4096];
    if (!f) {
        fprintf(stderr, "torus-layout: --topology-addr %s: %s\n", path,
                strerror(errno));
        return 1;
    }
    if (torus_layout_topo_new(topo))
        return _fail("out of memory");
    unsigned lineno = 0;
    int rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strcspn(line, "\r\n");
        if (line[len] == '\0' && !feof(f)) {
            fprintf(stderr, "torus-layout: %s:%u: line too long\n", path,
                    lineno);
            rc = 1;
            break;
        }
        line[len] = '\0';
        if (len == 0)
            continue;
        if (torus_layout_topo_add_addr(*topo, line)) {
            fprintf(stderr, "torus-layout: %s:%u: %s\n", path, lineno,
                    torus_error_msg());
            rc = 1;
        }
    }
    if (f != stdin)
        fclose(f);
    return rc;
}

/* The partition's Topology= from slurm.conf, as Slurm picks a
 * topology.yaml entry ("" when none: Slurm's default choice). */
static int _partition_topology(const _opts_t *o, char *want, size_t len)
{
    const char *part =
        o->partition ? o->partition : _env("SLURM_JOB_PARTITION", NULL);
    const char *conf = _env("SLURM_CONF", NULL);
    if (!part)
        return 0;
    if (!conf)
        conf = "/etc/slurm/slurm.conf";
    if (access(conf, F_OK) != 0)
        return 0;
    if (torus_layout_partition_topology(conf, part, want, len))
        return _fail(torus_error_msg());
    return 0;
}

/* Pick the switch map the way the plugin does (see spank_torus(8)). */
static int _load_topology(const _opts_t *o, torus_layout_topo_t **topo,
                          torus_layout_source *source)
{
    char path[4096];
    *topo = NULL;
    *source = TORUS_SOURCE_NODELIST;
    if (o->topology_addr) {
        *source = TORUS_SOURCE_ADDR;
        return _load_addr(o->topology_addr, topo);
    }
    if (o->topology && strcmp(o->topology, "none") == 0)
        return 0;
    char want[TORUS_LAYOUT_NAME_MAX] = "";
    if (_partition_topology(o, want, sizeof want))
        return 1;
    bool flat = false;
    if (o->topology) {
        if (torus_layout_topo_load_any(o->topology, o->topology_max, o->kind,
                                       want[0] ? want : NULL, topo, &flat))
            return _fail(torus_error_msg());
        *source = flat ? TORUS_SOURCE_NODELIST : TORUS_SOURCE_TREE;
        return 0;
    }
    /* Slurm reads topology.yaml when it exists, else topology.conf. */
    if ((torus_layout_conf_sibling(NULL, "topology.yaml", path, sizeof path) ||
         access(path, F_OK) != 0) &&
        torus_layout_topo_conf_path(NULL, path, sizeof path))
        return _fail(torus_error_msg());
    if (access(path, F_OK) != 0) {
        if (!o->json)
            fprintf(stderr, "torus-layout: note: no %s; using the node list\n",
                    path);
        return 0;
    }
    if (torus_layout_topo_load_any(path, o->topology_max, o->kind,
                                   want[0] ? want : NULL, topo, &flat)) {
        fprintf(stderr, "torus-layout: warning: %s; using the node list\n",
                torus_error_msg());
        return 0;
    }
    *source = flat ? TORUS_SOURCE_NODELIST : TORUS_SOURCE_TREE;
    return 0;
}

/* What the options leave out comes from the Slurm step we run in, as the
 * plugin would see it. 0, or 1 after the message. */
static int _inherit(_opts_t *o)
{
    if (!o->bytes)
        o->bytes = o->cost.bytes;
    if (!o->nodes &&
        !(o->nodes = _env("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST")))
        return _fail(
            "no --nodes given and not inside a Slurm step (see --help)");
    if (!o->tasks &&
        !(o->tasks = _env("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")))
        o->tasks = "1";
    if (!o->spec &&
        !(o->spec = _env("SLURM_SPANK__SLURM_SPANK_OPTION_torus_torus", NULL)))
        o->spec = "auto";
    return 0;
}

/* The node names (*names, *n) and a fresh array of tasks per node; NULL
 * after the message. */
static uint32_t *_read_nodes(const _opts_t *o, char ***names, size_t *n)
{
    if (torus_layout_names_expand(o->nodes, names, n)) {
        fprintf(stderr, "torus-layout: --nodes: %s\n", torus_error_msg());
        return NULL;
    }
    uint32_t *tasks = malloc(*n * sizeof *tasks);
    if (!tasks) {
        _fail("out of memory");
        return NULL;
    }
    if (torus_layout_tasks_parse(o->tasks, *n, tasks)) {
        fprintf(stderr, "torus-layout: --tasks-per-node: %s\n",
                torus_error_msg());
        free(tasks);
        return NULL;
    }
    return tasks;
}

int main(int argc, char **argv)
{
    _opts_t o = {.max_lines = 32,
                 .topology_max = TORUS_LAYOUT_TOPO_FILE_DEFAULT};
    torus_cost_defaults(&o.cost);
    int rc = _parse_args(argc, argv, &o);
    if (rc)
        return rc;
    if ((rc = _inherit(&o)))
        return rc;
    torus_layout_input_t in = {.cost = o.cost};
    if (torus_layout_spec_parse(o.spec, &in.spec)) {
        fprintf(stderr, "torus-layout: --spec: %s\n", torus_error_msg());
        return 1;
    }
    char **names = NULL;
    size_t n = 0;
    uint32_t *tasks = NULL;
    torus_layout_topo_t *topo = NULL;
    torus_layout_t *layout = NULL;
    rc = 1;
    if (!(tasks = _read_nodes(&o, &names, &n)) ||
        _load_topology(&o, &topo, &in.source))
        goto out;
    in.nnodes = n;
    in.nodes = (const char *const *)names;
    in.tasks = tasks;
    in.topo = topo;
    if (torus_layout_compute(&in, &layout)) {
        fprintf(stderr, "torus-layout: --spec %s: %s\n", o.spec,
                torus_error_msg());
        goto out;
    }
    if (!torus_layout_enabled(layout) ||
        (o.json && torus_layout_source_of(layout) != in.source))
        fprintf(stderr, "torus-layout: %s\n", torus_layout_reason(layout));
    torus_report_input_t rin = {.layout = layout,
                                .names = names,
                                .cost = &o.cost,
                                .bytes = o.bytes,
                                .max_lines = o.max_lines};
    if ((o.json ? torus_report_json : torus_report_text)(stdout, &rin) ||
        fflush(stdout)) {
        _fail("cannot write the output");
        goto out;
    }
    rc = 0;
out:
    torus_layout_free(layout);
    torus_layout_topo_free(topo);
    torus_layout_names_free(names, n);
    free(tasks);
    return rc;
}
