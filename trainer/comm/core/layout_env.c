/* layout_env.c: strict parsing of the TORUS_* env contract and of the
 * --grid / --group-size options, and the start-up check that every rank's
 * place forms one valid grid. Values come from a launcher we do not fully
 * trust, so every number is bounded and every malformed string is an error
 * that names the variable, never a silent default. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_env.h"
#include "trainer/comm/core/error.h"
#include "trainer/comm/core/layout_env.h"

/* Bigger than any job we plan for, small enough that R*C fits an int. */
#define TC_MAX_DIM (1 << 20)

/* Parse a decimal number of 1..9 digits, nothing else (no sign, no space). */
static int _parse_uint(const char *s, size_t len, int *v)
{
    if (len == 0 || len > 9)
        return -1;
    int x = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return 0;
}

tcomm_rc tcomm_parse_count(const char *what, const char *s, int max, int *v)
{
    if (!s || _parse_uint(s, strlen(s), v) != 0 || *v > max)
        return TORUS_FAIL(TCOMM_ERR_ENV, "%s='%s': expected an integer 0..%d",
                          what, s ? s : "", max);
    return TCOMM_OK;
}

tcomm_rc tcomm_parse_dims(const char *what, const char *s, int *r, int *c)
{
    const char *x = s ? strchr(s, 'x') : NULL;
    if (!x || _parse_uint(s, (size_t)(x - s), r) != 0 ||
        _parse_uint(x + 1, strlen(x + 1), c) != 0 || *r < 1 || *c < 1 ||
        *r > TC_MAX_DIM || *c > TC_MAX_DIM || (long)*r * *c > TC_MAX_DIM)
        return TORUS_FAIL(
            TCOMM_ERR_ENV,
            "%s='%s': expected RxC with positive integers (e.g. 4x2), "
            "R*C at most %d",
            what, s ? s : "", TC_MAX_DIM);
    return TCOMM_OK;
}

static tcomm_rc _parse_coord(const char *s, int *r, int *c)
{
    const char *comma = strchr(s, ',');
    if (!comma || _parse_uint(s, (size_t)(comma - s), r) != 0 ||
        _parse_uint(comma + 1, strlen(comma + 1), c) != 0)
        return TORUS_FAIL(TCOMM_ERR_ENV,
                          TORUS_ENV_COORD
                          "='%s': expected r,c with non-negative integers",
                          s);
    return TCOMM_OK;
}

/* Replaces what is not printable, so that a hostile value cannot reach a
 * terminal through the banner. */
static void _printable(char *s)
{
    for (; *s; s++)
        if (!isprint((unsigned char)*s))
            *s = '?';
}

/* The values of a complete contract (v in the order of
 * tcomm_layout_parse_env's names; NODE_INDEX may be NULL), each checked
 * against the others. */
static tcomm_rc _parse_values(const char *const *v, tcomm_env_layout *out)
{
    tcomm_rc rc =
        tcomm_parse_dims(TORUS_ENV_DIMS, v[0], &out->rows, &out->cols);
    if (rc)
        return rc;
    if ((rc = _parse_coord(v[1], &out->row, &out->col)))
        return rc;
    if (out->row >= out->rows || out->col >= out->cols)
        return TORUS_FAIL(TCOMM_ERR_ENV,
                          TORUS_ENV_COORD "='%s' lies outside " TORUS_ENV_DIMS
                                          "='%s'",
                          v[1], v[0]);
    if ((rc = tcomm_parse_count(TORUS_ENV_NGROUPS, v[3], TC_MAX_DIM,
                                &out->ngroups)))
        return rc;
    if ((rc =
             tcomm_parse_count(TORUS_ENV_GROUP, v[2], TC_MAX_DIM, &out->group)))
        return rc;
    if (out->ngroups < 1 || out->group >= out->ngroups)
        return TORUS_FAIL(TCOMM_ERR_ENV,
                          TORUS_ENV_GROUP
                          "='%s' is not below " TORUS_ENV_NGROUPS "='%s'",
                          v[2], v[3]);
    if (v[4] && (rc = tcomm_parse_count(TORUS_ENV_NODE_INDEX, v[4], TC_MAX_DIM,
                                        &out->node_index)))
        return rc;
    return TCOMM_OK;
}

tcomm_rc tcomm_layout_parse_env(tcomm_getenv_fn get, tcomm_env_layout *out)
{
    static const char *const names[] = {
        TORUS_ENV_DIMS,    TORUS_ENV_COORD,      TORUS_ENV_GROUP,
        TORUS_ENV_NGROUPS, TORUS_ENV_NODE_INDEX, TORUS_ENV_VERSION};
    const char *v[6];
    int any = 0;
    memset(out, 0, sizeof *out);
    out->group = out->ngroups = out->node_index = -1;
    for (int i = 0; i < 6; i++) {
        v[i] = get(names[i]);
        if (v[i] && strlen(v[i]) > 64)
            return TORUS_FAIL(TCOMM_ERR_ENV,
                              "%s is %zu characters long: not a "
                              "torus value",
                              names[i], strlen(v[i]));
        any |= v[i] != NULL;
    }
    if (!any)
        return TCOMM_OK;
    if (v[5] && strcmp(v[5], TORUS_ENV_VERSION_VALUE) != 0) {
        /* The contract: a consumer that does not know the version ignores
         * the other variables (and falls back to one row per node). */
        tcomm_env_layout ignored = {
            .group = -1, .ngroups = -1, .node_index = -1};
        *out = ignored;
        snprintf(out->source, sizeof out->source,
                 TORUS_ENV_VERSION "=%.8s ignored", v[5]);
        _printable(out->source);
        return TCOMM_OK;
    }
    out->present = 1;
    /* A partial contract means a broken launcher: refuse it rather than
     * mix guessed values with given ones. */
    for (int i = 0; i < 6; i++)
        if (!v[i] && i != 4)
            return TORUS_FAIL(TCOMM_ERR_ENV,
                              "%s is not set but other TORUS_* "
                              "variables are: the env contract is incomplete",
                              names[i]);

    tcomm_rc rc = _parse_values(v, out);
    if (rc)
        return rc;
    /* TORUS_SOURCE is informational: keep a bounded, printable copy. */
    const char *src = get(TORUS_ENV_SOURCE);
    snprintf(out->source, sizeof out->source, "%s", src ? src : "env");
    _printable(out->source);
    return TCOMM_OK;
}

tcomm_rc tcomm_options_set(tcomm_options *o, const char *name,
                           const char *value)
{
    if (strcmp(name, "--grid") == 0 || strcmp(name, "grid") == 0)
        return tcomm_parse_dims("--grid", value, &o->grid_rows, &o->grid_cols);
    if (strcmp(name, "--group-size") == 0 || strcmp(name, "group-size") == 0) {
        tcomm_rc rc = tcomm_parse_count("--group-size", value, TC_MAX_DIM,
                                        &o->group_size);
        if (!rc && o->group_size < 1)
            return TORUS_FAIL(TCOMM_ERR_ENV,
                              "--group-size='%s': must be at least 1", value);
        return rc;
    }
    return TORUS_FAIL(TCOMM_ERR_ARG, "unknown layout option '%s'", name);
}

tcomm_rc tcomm_layout_place(const tcomm_env_layout *env,
                            const tcomm_options *opt, int rank, int size,
                            int node, int local_rank, int local_size,
                            tcomm_place *me, int *src)
{
    memset(me, 0, sizeof *me);
    me->rank = rank;
    me->node = node;
    me->local_rank = local_rank;
    me->local_size = local_size;
    me->node_index = env && env->present ? env->node_index : -1;
    *src = 0;
    if (opt && opt->grid_rows > 0) {
        if ((long)opt->grid_rows * opt->grid_cols != size)
            return TORUS_FAIL(TCOMM_ERR_ENV,
                              "--grid %dx%d does not match %d ranks",
                              opt->grid_rows, opt->grid_cols, size);
        me->rows = opt->grid_rows;
        me->cols = opt->grid_cols;
        me->row = rank / opt->grid_cols;
        me->col = rank % opt->grid_cols;
        *src |= TCOMM_SRC_OPTIONS;
    } else if (env && env->present) {
        me->rows = env->rows;
        me->cols = env->cols;
        me->row = env->row;
        me->col = env->col;
        *src |= TCOMM_SRC_ENV;
    } else {
        /* Row = node, filled in by tcomm_layout_finish once all are known. */
        me->rows = me->cols = -1;
        me->row = node;
        me->col = local_rank;
        *src |= TCOMM_SRC_NODES;
    }
    if (opt && opt->group_size > 0) {
        me->group = rank / opt->group_size;
        me->ngroups = (size + opt->group_size - 1) / opt->group_size;
        *src |= TCOMM_SRC_GROUP_OPT;
    } else if (env && env->present) {
        me->group = env->group;
        me->ngroups = env->ngroups;
    } else {
        me->group = -1; /* by node, numbered in tcomm_layout_finish */
        me->ngroups = -1;
    }
    return TCOMM_OK;
}

static int _cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Number the distinct node ids 0..n-1 in increasing order; returns n, or
 * -1 without memory. */
static int _number_nodes(tcomm_place *all, int size, int *node_index)
{
    int *ids = malloc(sizeof(int) * (size_t)size);
    int n = 0;
    if (!ids)
        return -1;
    for (int i = 0; i < size; i++)
        ids[i] = all[i].node;
    qsort(ids, (size_t)size, sizeof(int), _cmp_int);
    for (int i = 0; i < size; i++)
        if (i == 0 || ids[i] != ids[i - 1])
            ids[n++] = ids[i];
    for (int i = 0; i < size; i++)
        node_index[i] = (int)((int *)bsearch(&all[i].node, ids, (size_t)n,
                                             sizeof(int), _cmp_int) -
                              ids);
    free(ids);
    return n;
}

/* The grid from the nodes alone: a row per node when every node holds the
 * same number of ranks, else one row of all (said in note). */
static void _grid_from_nodes(tcomm_place *all, int size, int nnodes,
                             const int *nodeix, char *note, size_t notelen)
{
    int uniform = size % nnodes == 0;
    for (int i = 0; uniform && i < size; i++)
        uniform = all[i].local_size == size / nnodes &&
                  all[i].local_rank < size / nnodes;
    for (int i = 0; i < size; i++) {
        all[i].rows = uniform ? nnodes : 1;
        all[i].cols = uniform ? size / nnodes : size;
        all[i].row = uniform ? nodeix[i] : 0;
        all[i].col = uniform ? all[i].local_rank : i;
    }
    if (!uniform && note)
        snprintf(note, notelen,
                 "nodes hold different task counts: grid "
                 "falls back to 1x%d",
                 size);
}

/* Rank i against rank 0: the same dims and group count, its group in
 * range, its cell not claimed before (seen: one byte per cell). */
static tcomm_rc _check_rank(const tcomm_place *all, int i, const char *what,
                            char *seen)
{
    const tcomm_place *p = &all[i];
    int R = all[0].rows, C = all[0].cols;
    if (p->rows != R || p->cols != C)
        return TORUS_FAIL(TCOMM_ERR_ENV,
                          "rank %d has %s=%dx%d but rank 0 has "
                          "%dx%d",
                          i, what, p->rows, p->cols, R, C);
    if (p->ngroups != all[0].ngroups || p->group < 0 || p->group >= p->ngroups)
        return TORUS_FAIL(TCOMM_ERR_ENV,
                          "rank %d has group %d of %d, rank 0 has "
                          "%d groups",
                          i, p->group, p->ngroups, all[0].ngroups);
    int cell = p->row * C + p->col;
    if (seen[cell]) {
        int j = 0;
        while (all[j].row != p->row || all[j].col != p->col)
            j++;
        return TORUS_FAIL(TCOMM_ERR_ENV,
                          "ranks %d and %d both claim grid "
                          "coordinate %d,%d",
                          j, i, p->row, p->col);
    }
    seen[cell] = 1;
    return TCOMM_OK;
}

/* Every group must have a member, or group numbering is broken. seen: size
 * bytes, reused. */
static tcomm_rc _check_groups(const tcomm_place *all, int size, char *seen)
{
    int ng = all[0].ngroups;
    if (ng > size)
        return TORUS_FAIL(TCOMM_ERR_ENV,
                          "%d groups for %d ranks: some group is empty", ng,
                          size);
    memset(seen, 0, (size_t)size);
    for (int i = 0; i < size; i++)
        seen[all[i].group] = 1;
    for (int g = 0; g < ng; g++)
        if (!seen[g])
            return TORUS_FAIL(TCOMM_ERR_ENV, "group %d of %d has no rank", g,
                              ng);
    return TCOMM_OK;
}

/* The same checks for every source: they cost O(P) once at start-up. */
static tcomm_rc _check_grid(const tcomm_place *all, int size, int src)
{
    int R = all[0].rows, C = all[0].cols;
    const char *what = (src & TCOMM_SRC_ENV) ? TORUS_ENV_DIMS : "grid";
    if ((long)R * C != size)
        return TORUS_FAIL(TCOMM_ERR_ENV,
                          "%s=%dx%d does not match the %d ranks "
                          "of this job",
                          what, R, C, size);
    char *seen = calloc((size_t)size, 1);
    if (!seen)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "out of memory for %d ranks", size);
    tcomm_rc rc = TCOMM_OK;
    for (int i = 0; i < size && !rc; i++)
        rc = _check_rank(all, i, what, seen);
    if (!rc)
        rc = _check_groups(all, size, seen);
    free(seen);
    return rc;
}

tcomm_rc tcomm_layout_finish(tcomm_place *all, int size, int src, char *note,
                             size_t notelen)
{
    int *nodeix = malloc(sizeof(int) * (size_t)size);
    int nnodes = nodeix ? _number_nodes(all, size, nodeix) : -1;
    if (nnodes < 0) {
        free(nodeix);
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "out of memory for %d ranks", size);
    }
    if (note && notelen)
        note[0] = 0;
    if (src & TCOMM_SRC_NODES)
        _grid_from_nodes(all, size, nnodes, nodeix, note, notelen);
    if (all[0].group < 0)
        for (int i = 0; i < size; i++) {
            all[i].group = nodeix[i];
            all[i].ngroups = nnodes;
        }
    free(nodeix);
    return _check_grid(all, size, src);
}
