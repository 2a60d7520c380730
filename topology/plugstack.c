/*
 * plugstack.c: the arguments of spank_torus.so's plugstack.conf line, e.g.
 *   optional spank_torus.so default=auto topology=tree leaf_bw_gbs=25 verbose
 * Every argument is key=value from the table below or the cost model's keys
 * (or the bare flag `verbose`); unknown keys and bad values are rejected so
 * a typo in plugstack.conf cannot silently change behaviour. It lives in the
 * layout library, not in the plugin, so that `torus-layout
 * --check-plugstack` parses a line with this very code without linking the
 * plugin. Pure: no Slurm calls, no global state (the fuzz target and the
 * unit tests drive it).
 */
#include "config.h"

#include <string.h>

#include "topology/internal.h"

#define _ARG_MAX 128 /* longest accepted argument */
#define _KEY_MAX 32  /* longest key */

#define _KEYS                                                              \
    "default, topology, topology_max, verbose, node_lat_us, node_bw_gbs, " \
    "leaf_lat_us, leaf_bw_gbs, cross_lat_us, cross_bw_gbs, rails, "        \
    "reduce_gbs, convert_gbs, bytes, topology_file, nics"

static const char *const _topo_names[] = {
    [TORUS_TOPO_PREF_TREE] = "tree",
    [TORUS_TOPO_PREF_ADDR] = "addr",
    [TORUS_TOPO_PREF_NONE] = "none",
};

const char *torus_layout_topo_pref_name(torus_layout_topo_pref pref)
{
    return (size_t)pref < sizeof _topo_names / sizeof _topo_names[0]
               ? _topo_names[pref]
               : "tree";
}

static int _set_default(torus_layout_plugstack_t *cfg, const char *val)
{
    int rc = torus_layout_spec_parse(val, &cfg->default_spec);
    return rc ? torus_error_prefix(TORUS_LAYOUT_EINVAL,
                                   "plugstack.conf: default=")
              : TORUS_LAYOUT_OK;
}

static int _set_topology(torus_layout_plugstack_t *cfg, const char *val)
{
    for (size_t i = 0; i < sizeof _topo_names / sizeof _topo_names[0]; i++)
        if (strcmp(val, _topo_names[i]) == 0) {
            cfg->topology = (torus_layout_topo_pref)i;
            return TORUS_LAYOUT_OK;
        }
    return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                      "plugstack.conf: topology=%s: expected tree, addr or "
                      "none",
                      val);
}

/* topology_max=SIZE: the most bytes of topology.conf each slurmstepd reads
 * (spank_torus(8) has the cost); never more than TORUS_LAYOUT_TOPO_FILE_MAX. */
static int _set_topology_max(torus_layout_plugstack_t *cfg, const char *val)
{
    uint64_t v = 0;
    if (torus_cost_parse_bytes(val, &v) || v < TORUS_LAYOUT_TOPO_FILE_MIN ||
        v > TORUS_LAYOUT_TOPO_FILE_MAX)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "plugstack.conf: topology_max=%s: expected a size "
                          "from %uK to %uM, like 4M",
                          val, TORUS_LAYOUT_TOPO_FILE_MIN >> 10,
                          TORUS_LAYOUT_TOPO_FILE_MAX >> 20);
    cfg->topology_max = (size_t)v;
    return TORUS_LAYOUT_OK;
}

/* topology_file=/abs/path: a torus-specific map (spank_torus(8)); it must be
 * absolute so every slurmstepd reads the same file whatever its cwd. */
static int _set_topology_file(torus_layout_plugstack_t *cfg, const char *val)
{
    size_t n = strlen(val);
    if (val[0] != '/' || n >= sizeof cfg->topology_file)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "plugstack.conf: topology_file=%s: expected an "
                          "absolute path shorter than %zu bytes",
                          val, sizeof cfg->topology_file);
    memcpy(cfg->topology_file, val, n + 1);
    return TORUS_LAYOUT_OK;
}

/* A NIC name, optionally ":port": letters, digits, _ - . : only. */
static bool _nic_ok(const char *s, size_t n)
{
    if (n == 0 || n >= sizeof((torus_layout_plugstack_t *)0)->nics[0])
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || strchr("_-.:", s[i])))
            return false;
    return true;
}

/* nics=mlx5_0,mlx5_1:1: one NIC per rail, in column order. */
static int _set_nics(torus_layout_plugstack_t *cfg, const char *val)
{
    cfg->nnics = 0;
    for (const char *p = val;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (cfg->nnics >= TORUS_LAYOUT_NICS_MAX || !_nic_ok(p, n))
            return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                              "plugstack.conf: nics=%s: expected 1 to %d NIC "
                              "names (letters, digits, _ - . :) separated by "
                              "commas",
                              val, TORUS_LAYOUT_NICS_MAX);
        memcpy(cfg->nics[cfg->nnics], p, n);
        cfg->nics[cfg->nnics++][n] = '\0';
        if (!comma)
            return TORUS_LAYOUT_OK;
        p = comma + 1;
    }
}

/* The option table: key -> setter. The cost model's keys come from
 * libtoruscost, so the plugin, torus-layout and TCOMM_COST share them. */
static const struct {
    const char *key;
    int (*set)(torus_layout_plugstack_t *cfg, const char *val);
} _table[] = {
    {"default", _set_default},
    {"topology", _set_topology},
    {"topology_max", _set_topology_max},
    {"topology_file", _set_topology_file},
    {"nics", _set_nics},
};

/* What each argument of the table (and the flag verbose) takes and does,
 * for spank_torus(8), which is generated from torus_layout_plugstack_doc.
 * Keyed by name so that the parse table keeps its shape; a table entry
 * without a line here reaches the page as "undocumented", which the man
 * page test refuses. */
static const torus_layout_plugstack_doc_t _docs[] = {
    {"default", "auto|off|RxC",
     "Spec of a step run without --torus (and without an inherited #SBATCH "
     "--torus). Default: off."},
    {"topology", "tree|addr|none",
     "First switch-map source to try: tree reads the topology.conf next to "
     "slurmstepd's slurm.conf when TopologyPlugin is topology/tree; addr "
     "skips topology.conf and takes the network as flat only when "
     "TopologyPlugin is topology/none; none uses the node list. Default: "
     "tree."},
    {"topology_max", "SIZE",
     "The largest topology.conf each slurmstepd reads, checked from its size "
     "before reading; K, M are powers of 1024, from 64K to 64M. Default: "
     "4M."},
    {"topology_file", "PATH",
     "An absolute path read instead of Slurm's own file, on every node: "
     ".yaml/.yml a topology.yaml, .addr one SLURM_TOPOLOGY_ADDR per node "
     "(torus3d NAME:X:Y:Z.node, ring NAME:POS.node), anything else "
     "topology.conf syntax (SwitchName= or BlockName=/BlockSizes= lines). "
     "The way to use block, torus3d and ring maps under a Slurm that lacks "
     "those plugins (22.05 refuses BlockName= lines). Default: none."},
    {"nics", "NIC[,NIC...]",
     "One NIC per rail (up to the library's limit; letters, digits, _ - . "
     ":); column c uses the (c mod n)-th: TORUS_NIC, and NCCL_IB_HCA and "
     "UCX_NET_DEVICES unless the user set them. Default: none."},
    {"verbose", NULL,
     "Log every step's layout (grid, groups, switch-map source) to the "
     "slurmd log and to the first task's standard error."},
};

static const char *_doc_help(const char *key, const char **value)
{
    for (size_t i = 0; i < sizeof _docs / sizeof _docs[0]; i++)
        if (strcmp(key, _docs[i].key) == 0) {
            *value = _docs[i].value;
            return _docs[i].help;
        }
    return NULL;
}

int torus_layout_plugstack_doc(size_t i, torus_layout_plugstack_doc_t *d,
                               char *buf, size_t n)
{
    enum { NTABLE = sizeof _table / sizeof _table[0] };
    *d = (torus_layout_plugstack_doc_t){0};
    if (i < NTABLE)
        d->key = _table[i].key;
    else if (i == NTABLE)
        d->key = "verbose";
    if (d->key) {
        d->help = _doc_help(d->key, &d->value);
        return 0;
    }
    d->key = torus_cost_key_doc(i - NTABLE - 1, &d->value, buf, n);
    d->help = buf;
    return d->key ? 0 : 1;
}

/* Split "key=value" into key (bounded) and a pointer to the value. */
static int _split(const char *arg, size_t len, char key[_KEY_MAX],
                  const char **val)
{
    const char *eq = memchr(arg, '=', len);
    if (!eq || eq == arg || (size_t)(eq - arg) >= _KEY_MAX)
        return TORUS_FAIL(
            TORUS_LAYOUT_EINVAL,
            "plugstack.conf: '%s' is not key=value (keys: " _KEYS ")", arg);
    memcpy(key, arg, (size_t)(eq - arg));
    key[eq - arg] = '\0';
    *val = eq + 1;
    return TORUS_LAYOUT_OK;
}

static int _parse_one(const char *arg, torus_layout_plugstack_t *cfg)
{
    if (!arg)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "plugstack.conf: missing argument");
    size_t len = strnlen(arg, _ARG_MAX + 1);
    if (len > _ARG_MAX)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "plugstack.conf: argument '%.40s...' too long", arg);
    if (strcmp(arg, "verbose") == 0) {
        cfg->verbose = true;
        return TORUS_LAYOUT_OK;
    }
    char key[_KEY_MAX];
    const char *val = NULL;
    int rc = _split(arg, len, key, &val);
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof _table / sizeof _table[0]; i++)
        if (strcmp(key, _table[i].key) == 0)
            return _table[i].set(cfg, val);
    if (torus_cost_is_key(key)) {
        if (torus_cost_set(&cfg->cost, key, val))
            return torus_error_prefix(TORUS_LAYOUT_EINVAL, "plugstack.conf");
        return TORUS_LAYOUT_OK;
    }
    return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                      "plugstack.conf: unknown argument '%s' (keys: " _KEYS ")",
                      key);
}

torus_layout_rc torus_layout_plugstack_parse(int ac, char *const *av,
                                             torus_layout_plugstack_t *cfg)
{
    *cfg = (torus_layout_plugstack_t){.default_spec = {.kind = TORUS_SPEC_OFF},
                                      .topology = TORUS_TOPO_PREF_TREE,
                                      .topology_max =
                                          TORUS_LAYOUT_TOPO_FILE_DEFAULT};
    torus_cost_defaults(&cfg->cost);
    for (int i = 0; i < ac; i++) {
        int rc = _parse_one(av[i], cfg);
        if (rc)
            return (torus_layout_rc)rc;
    }
    return TORUS_LAYOUT_OK;
}
