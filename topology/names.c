/*
 * names.c: node lists and tasks-per-node lists as Slurm writes them.
 *
 * Hostlists ("n[001-128]") are expanded and compressed by libslurm's own
 * hostlist API, so the plugin reads SLURM_STEP_NODELIST exactly as Slurm
 * meant it. Tasks-per-node ("8(x3),4") has no public libslurm parser, so it
 * is parsed here, strictly and with bounds, because it comes from the
 * job's environment.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>

#include "topology/internal.h"

bool torus_layout_hostlist_sane(const char *s)
{
    int groups = 0;
    bool open = false;
    for (; *s; s++) {
        switch (*s) {
        case '[':
            if (open || ++groups > 1)
                return false;
            open = true;
            break;
        case ']':
            if (!open)
                return false;
            open = false;
            break;
        case ',':
        case ' ':
        case '\t':
        case '\n':
            if (!open)
                groups = 0; /* next host expression */
            break;
        default:
            break;
        }
    }
    return !open;
}

void torus_layout_names_free(char **names, size_t count)
{
    if (!names)
        return;
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

/* A libslurm hostlist of `hostlist`, after the checks that keep libslurm
 * from blowing up on it (length, one [range] per name). */
static torus_layout_rc _create(const char *hostlist, hostlist_t *out)
{
    *out = NULL;
    size_t len = strnlen(hostlist, TORUS_LAYOUT_LIST_MAX + 1);
    if (len == 0)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "empty node list");
    if (len > TORUS_LAYOUT_LIST_MAX)
        return TORUS_FAIL(TORUS_LAYOUT_ERANGE, "node list longer than %u bytes",
                          TORUS_LAYOUT_LIST_MAX);
    hostlist_t hl = torus_layout_hostlist_sane(hostlist)
                        ? slurm_hostlist_create(hostlist)
                        : NULL;
    if (!hl)
        return TORUS_FAIL(
            TORUS_LAYOUT_EINVAL,
            "'%.80s' is not a valid Slurm node list (one [range] per name)",
            hostlist);
    *out = hl;
    return TORUS_LAYOUT_OK;
}

torus_layout_rc torus_layout_names_count(const char *hostlist, size_t *count)
{
    *count = 0;
    hostlist_t hl;
    torus_layout_rc rc = _create(hostlist, &hl);
    if (rc)
        return rc;
    int n = slurm_hostlist_count(hl);
    slurm_hostlist_destroy(hl);
    if (n <= 0)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "node list '%.80s' is empty",
                          hostlist);
    *count = (size_t)n;
    return TORUS_LAYOUT_OK;
}

torus_layout_rc torus_layout_names_expand(const char *hostlist, char ***names,
                                          size_t *count)
{
    *names = NULL;
    *count = 0;
    hostlist_t hl;
    torus_layout_rc rc0 = _create(hostlist, &hl);
    if (rc0)
        return rc0;
    int n = slurm_hostlist_count(hl);
    if (n <= 0 || (size_t)n > TORUS_LAYOUT_NODES_MAX) {
        slurm_hostlist_destroy(hl);
        return TORUS_FAIL(n <= 0 ? TORUS_LAYOUT_EINVAL : TORUS_LAYOUT_ERANGE,
                          "node list '%.80s' holds %d nodes (1 to %u allowed)",
                          hostlist, n, TORUS_LAYOUT_NODES_MAX);
    }
    char **out = calloc((size_t)n, sizeof *out);
    if (!out) {
        slurm_hostlist_destroy(hl);
        return TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    }
    size_t got = 0;
    char *h;
    torus_layout_rc rc = TORUS_LAYOUT_OK;
    while (got < (size_t)n && (h = slurm_hostlist_shift(hl))) {
        /* Copy with our own allocator: libslurm's strings are malloc'd
         * today, but the API does not promise it, and we free with free(). */
        size_t hl_len = strnlen(h, TORUS_LAYOUT_NAME_MAX);
        if (hl_len == 0 || hl_len >= TORUS_LAYOUT_NAME_MAX) {
            rc = TORUS_FAIL(TORUS_LAYOUT_ERANGE,
                            "node name longer than %d bytes",
                            TORUS_LAYOUT_NAME_MAX - 1);
            free(h);
            break;
        }
        out[got] = strdup(h);
        free(h);
        if (!out[got]) {
            rc = TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
            break;
        }
        got++;
    }
    slurm_hostlist_destroy(hl);
    if (rc == TORUS_LAYOUT_OK && got != (size_t)n)
        rc = TORUS_FAIL(TORUS_LAYOUT_ENOMEM, "out of memory");
    if (rc) {
        torus_layout_names_free(out, got);
        return rc;
    }
    *names = out;
    *count = got;
    return TORUS_LAYOUT_OK;
}

char *torus_layout_names_compress(char *const *names, size_t count)
{
    hostlist_t hl = slurm_hostlist_create(NULL);
    if (!hl)
        return NULL;
    for (size_t i = 0; i < count; i++)
        slurm_hostlist_push_host(hl, names[i]);
    char *s = slurm_hostlist_ranged_string_malloc(hl);
    slurm_hostlist_destroy(hl);
    return s;
}

torus_layout_rc torus_layout_tasks_parse(const char *text, size_t nnodes,
                                         uint32_t *counts)
{
    if (nnodes == 0)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "tasks per node: no nodes");
    size_t len = strnlen(text, TORUS_LAYOUT_LIST_MAX + 1);
    if (len == 0 || len > TORUS_LAYOUT_LIST_MAX)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "tasks per node: empty or longer than %u bytes",
                          TORUS_LAYOUT_LIST_MAX);
    const char *p = text, *end = text + len;
    size_t filled = 0;
    bool bare = true;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        const char *paren = memchr(p, '(', (size_t)(stop - p));
        uint64_t tasks, rep = 1;
        if (!torus_layout_parse_uint(p, paren ? paren : stop, UINT32_MAX,
                                     &tasks) ||
            tasks == 0)
            goto bad;
        if (paren) {
            /* "(xN)" repeats the count N times. */
            bare = false;
            if (stop - paren < 4 || paren[1] != 'x' || stop[-1] != ')' ||
                !torus_layout_parse_uint(paren + 2, stop - 1,
                                         TORUS_LAYOUT_NODES_MAX, &rep) ||
                rep == 0)
                goto bad;
        }
        if (comma || p != text)
            bare = false;
        if (rep > nnodes - filled)
            return TORUS_FAIL(
                TORUS_LAYOUT_EINVAL,
                "tasks per node '%.80s' covers more than %zu nodes", text,
                nnodes);
        for (uint64_t i = 0; i < rep; i++)
            counts[filled++] = (uint32_t)tasks;
        if (!comma)
            break;
        p = comma + 1;
        if (p == end)
            goto bad;
    }
    /* A single bare number means "this many on every node". */
    if (bare && filled == 1) {
        for (; filled < nnodes; filled++)
            counts[filled] = counts[0];
    }
    if (filled != nnodes)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "tasks per node '%.80s' covers %zu of %zu nodes",
                          text, filled, nnodes);
    return TORUS_LAYOUT_OK;
bad:
    return TORUS_FAIL(
        TORUS_LAYOUT_EINVAL,
        "tasks per node '%.80s': expected N or N(xM) items separated by "
        "commas, N >= 1",
        text);
}
