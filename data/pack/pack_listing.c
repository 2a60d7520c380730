/* pack/pack_listing.c: a saved source listing for torus-pack (--listing=FILE).
 * Walking ImageNet means 1.3 M stat() calls on the metadata server; with a
 * 64-task job array every task would repeat them. The first run writes the
 * listing (classes, then one line per file: label, bytes, name), and later
 * runs and array tasks read it instead of walking the tree. Text, so it
 * can be checked and edited by hand; names may hold spaces but no tabs or
 * newlines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "data/pack/pack.h"

int tdata_listing_write(const char *path, const tdata_pack_src *s)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = tdata_tmp_fopen(tmp);
    if (!f)
        return TORUS_FAIL(TDATA_EIO, "--listing=%s: %s " TDATA_TMP_REFUSED, tmp,
                          strerror(errno));
    fprintf(f, "torus-listing 1\nclasses %d\n", s->num_classes);
    for (int i = 0; i < s->num_classes; i++)
        fprintf(f, "%s\t%s\n", s->class_ids[i], s->class_words[i]);
    fprintf(f, "items %llu\n", (unsigned long long)s->n);
    for (uint64_t i = 0; i < s->n; i++)
        fprintf(f, "%d\t%llu\t%s\n", s->items[i].label,
                (unsigned long long)s->items[i].bytes, s->items[i].name);
    if (tdata_publish_stream(f, tmp, path) != 0)
        return TORUS_FAIL(TDATA_EIO, "--listing=%s: write failed: %s", path,
                          strerror(errno));
    return TDATA_OK;
}

/* A listing being read: the file, its current line and its number. */
typedef struct _lread {
    FILE *f;
    const char *path;
    char *line;
    size_t cap;
    int ln;
} _lread;

static int _next(_lread *r)
{
    r->ln++;
    return getline(&r->line, &r->cap, r->f) > 0;
}

/* "torus-listing 1", "classes N", then N "wnid<TAB>words" lines. */
static int _read_classes(_lread *r, tdata_pack_src *s)
{
    int nc = 0, rc = TDATA_OK;
    if (!_next(r) || strcmp(r->line, "torus-listing 1\n") || !_next(r) ||
        sscanf(r->line, "classes %d", &nc) != 1 || nc < 1)
        rc = TORUS_FAIL(TDATA_EFORMAT,
                        "--listing=%s: not a torus-pack "
                        "listing (version 1)",
                        r->path);
    s->class_ids = calloc(nc > 0 ? nc : 1, sizeof(char *));
    s->class_words = calloc(nc > 0 ? nc : 1, sizeof(char *));
    for (int i = 0; rc == TDATA_OK && i < nc; i++) {
        char *tab;
        if (!_next(r) || !(tab = strchr(r->line, '\t')))
            return TORUS_FAIL(TDATA_EFORMAT, "%s:%d: bad class line", r->path,
                              r->ln);
        r->line[strcspn(r->line, "\n")] = 0;
        *tab = 0;
        s->class_ids[i] = strdup(r->line);
        s->class_words[i] = strdup(tab + 1);
        s->num_classes = i + 1;
    }
    return rc;
}

/* "items N", then N "label<TAB>bytes<TAB>name" lines, name relative to
 * SOURCE. */
static int _read_items(_lread *r, const char *source, tdata_pack_src *s)
{
    unsigned long long n = 0;
    if (!_next(r) || sscanf(r->line, "items %llu", &n) != 1)
        return TORUS_FAIL(TDATA_EFORMAT, "%s:%d: expected 'items N'", r->path,
                          r->ln);
    s->items = calloc(n ? n : 1, sizeof *s->items);
    s->cap = n;
    for (unsigned long long i = 0; i < n; i++) {
        int label, pos = 0;
        unsigned long long bytes;
        if (!_next(r) ||
            sscanf(r->line, "%d\t%llu\t%n", &label, &bytes, &pos) != 2 ||
            !pos || label < 0 || label >= s->num_classes)
            return TORUS_FAIL(TDATA_EFORMAT, "%s:%d: bad item line", r->path,
                              r->ln);
        r->line[strcspn(r->line, "\n")] = 0;
        char p[8200];
        snprintf(p, sizeof p, "%s/%s", source, r->line + pos);
        tdata_pack_item *it = &s->items[s->n++];
        it->path = strdup(p);
        it->name = strdup(r->line + pos);
        it->label = label;
        it->bytes = bytes;
    }
    return TDATA_OK;
}

int tdata_listing_read(const char *path, const char *source, tdata_pack_src *s)
{
    memset(s, 0, sizeof *s);
    _lread r = {.path = path, .f = fopen(path, "r")};
    if (!r.f)
        return TORUS_FAIL(TDATA_EIO, "--listing=%s: %s", path, strerror(errno));
    int rc = _read_classes(&r, s);
    if (rc == TDATA_OK)
        rc = _read_items(&r, source, s);
    free(r.line);
    fclose(r.f);
    return rc;
}
