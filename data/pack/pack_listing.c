/* pack/pack_listing.c: a saved source listing for torus-pack (--listing=FILE).
 * Walking ImageNet means 1.3 M stat() calls on the metadata server; with a
 * 64-task job array every task would repeat them. The first run writes the
 * listing (classes, then one line per file: label, bytes, name), and later
 * runs and array tasks read it instead of walking the tree. Text, so it
 * can be checked and edited by hand.
 *
 * Version 2 (written): class ids, words and names are escaped
 * (tdata_name_escape), so a tab, a newline or any control or non-UTF-8
 * byte in a file or folder name cannot add or split a line; the reader
 * undoes it. Version 1 (read only) held names as they are. Lines are
 * bounded (TDATA_MAX_LINE) and counts by the file's size. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "data/pack/pack.h"

#define _VERSION 2

/* One field of a line, escaped, onto F; -1 when out of memory. */
static int _put(FILE *f, const char *s)
{
    char *e = tdata_name_escape(s, 0);
    if (!e)
        return -1;
    fputs(e, f);
    free(e);
    return 0;
}

int tdata_listing_write(const char *path, const tdata_pack_src *s)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = tdata_tmp_fopen(tmp);
    if (!f)
        return TORUS_FAIL(TDATA_EIO, "--listing=%s: %s " TDATA_TMP_REFUSED, tmp,
                          strerror(errno));
    int bad = 0;
    fprintf(f, "torus-listing %d\nclasses %d\n", _VERSION, s->num_classes);
    for (int i = 0; i < s->num_classes; i++) {
        bad |= _put(f, s->class_ids[i]);
        fputc('\t', f);
        bad |= _put(f, s->class_words[i]);
        fputc('\n', f);
    }
    fprintf(f, "items %llu\n", (unsigned long long)s->n);
    for (uint64_t i = 0; i < s->n; i++) {
        fprintf(f, "%d\t%llu\t", s->items[i].label,
                (unsigned long long)s->items[i].bytes);
        bad |= _put(f, s->items[i].name);
        fputc('\n', f);
    }
    if (bad) {
        fclose(f);
        unlink(tmp);
        return TORUS_FAIL(TDATA_ENOMEM,
                          "--listing=%s: no memory to escape "
                          "a name",
                          path);
    }
    if (tdata_publish_stream(f, tmp, path) != 0)
        return TORUS_FAIL(TDATA_EIO, "--listing=%s: write failed: %s", path,
                          strerror(errno));
    return TDATA_OK;
}

/* A listing being read: its lines, version and size (a bound on counts:
 * every class or item takes at least two bytes of it). */
typedef struct _lread {
    tdata_lines l;
    int version;
    uint64_t size;
} _lread;

/* The next line, which must exist. */
static int _need(_lread *r, const char *what)
{
    int got, rc = tdata_lines_next(&r->l, &got);
    if (rc == TDATA_OK && !got)
        rc = TORUS_FAIL(TDATA_EFORMAT, "%s:%d: ends before %s", r->l.path,
                        r->l.ln + 1, what);
    return rc;
}

/* S as a name: unescaped for version 2. 0, or -1 when it escapes NUL. */
static int _name(const _lread *r, char *s)
{
    return r->version >= 2 ? tdata_name_unescape(s) : 0;
}

/* "torus-listing V", "classes N", then N "wnid<TAB>words" lines. */
static int _read_classes(_lread *r, tdata_pack_src *s)
{
    int nc = 0, rc = _need(r, "'torus-listing'");
    if (rc == TDATA_OK &&
        (sscanf(r->l.line, "torus-listing %d", &r->version) != 1 ||
         r->version < 1 || r->version > _VERSION))
        return TORUS_FAIL(TDATA_EFORMAT,
                          "--listing=%s: not a torus-pack listing (version 1 "
                          "to %d)",
                          r->l.path, _VERSION);
    if (rc == TDATA_OK && (rc = _need(r, "'classes N'")) == TDATA_OK &&
        (sscanf(r->l.line, "classes %d", &nc) != 1 || nc < 1 ||
         (uint64_t)nc > r->size / 2))
        rc = TORUS_FAIL(TDATA_EFORMAT, "%s:%d: expected 'classes N'", r->l.path,
                        r->l.ln);
    if (rc)
        return rc;
    s->class_ids = calloc(nc, sizeof(char *));
    s->class_words = calloc(nc, sizeof(char *));
    if (!s->class_ids || !s->class_words)
        return TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for %d classes",
                          r->l.path, nc);
    for (int i = 0; i < nc; i++) {
        if ((rc = _need(r, "the class lines")))
            return rc;
        char *tab = strchr(r->l.line, '\t');
        if (!tab || (*tab = 0, _name(r, r->l.line)) || _name(r, tab + 1))
            return TORUS_FAIL(TDATA_EFORMAT, "%s:%d: bad class line", r->l.path,
                              r->l.ln);
        s->class_ids[i] = strdup(r->l.line);
        s->class_words[i] = strdup(tab + 1);
        s->num_classes = i + 1;
        if (!s->class_ids[i] || !s->class_words[i])
            return TORUS_FAIL(TDATA_ENOMEM, "%s:%d: no memory", r->l.path,
                              r->l.ln);
    }
    return TDATA_OK;
}

/* NAME stays inside SOURCE: not empty, not absolute, no ".." part. */
static int _inside(const char *name)
{
    if (!*name || *name == '/')
        return 0;
    for (const char *p = name;; p++) {
        if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || p[2] == 0))
            return 0;
        if (!(p = strchr(p, '/')))
            return 1;
    }
}

/* One "label<TAB>bytes<TAB>name" line into item IT, name relative to
 * SOURCE. */
static int _item(_lread *r, const char *source, int nc, tdata_pack_item *it)
{
    int label, pos = 0;
    unsigned long long bytes;
    char *line = r->l.line;
    if (sscanf(line, "%d\t%llu\t%n", &label, &bytes, &pos) != 2 || !pos ||
        label < 0 || label >= nc || _name(r, line + pos) ||
        !_inside(line + pos))
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s:%d: bad item line (want LABEL<TAB>BYTES<TAB>"
                          "NAME, the name inside SOURCE)",
                          r->l.path, r->l.ln);
    size_t n = strlen(source) + strlen(line + pos) + 2;
    it->path = malloc(n);
    it->name = strdup(line + pos);
    if (!it->path || !it->name)
        return TORUS_FAIL(TDATA_ENOMEM, "%s:%d: no memory", r->l.path, r->l.ln);
    snprintf(it->path, n, "%s/%s", source, line + pos);
    it->label = label;
    it->bytes = bytes;
    return TDATA_OK;
}

/* "items N", then N item lines. */
static int _read_items(_lread *r, const char *source, tdata_pack_src *s)
{
    unsigned long long n = 0;
    int rc = _need(r, "'items N'");
    if (rc == TDATA_OK &&
        (sscanf(r->l.line, "items %llu", &n) != 1 || n > r->size / 2))
        rc = TORUS_FAIL(TDATA_EFORMAT, "%s:%d: expected 'items N'", r->l.path,
                        r->l.ln);
    if (rc == TDATA_OK && !(s->items = calloc(n ? n : 1, sizeof *s->items)))
        rc = TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for %llu items", r->l.path,
                        n);
    s->cap = n;
    for (unsigned long long i = 0; rc == TDATA_OK && i < n; i++)
        if ((rc = _need(r, "the item lines")) == TDATA_OK) {
            s->n++; /* counted first: tdata_pack_src_free frees a half item */
            rc = _item(r, source, s->num_classes, &s->items[i]);
        }
    return rc;
}

int tdata_listing_read(const char *path, const char *source, tdata_pack_src *s)
{
    memset(s, 0, sizeof *s);
    int fd;
    _lread r = {.version = 0};
    int rc = tdata_open_regular(path, &fd, &r.size);
    FILE *f = rc ? NULL : fdopen(fd, "r");
    if (rc == TDATA_OK && !f) {
        close(fd);
        rc = TORUS_FAIL(TDATA_ENOMEM, "%s: %s", path, strerror(errno));
    }
    if (rc)
        return torus_error_prefix(rc, "--listing");
    tdata_lines_init(&r.l, f, path);
    rc = _read_classes(&r, s);
    if (rc == TDATA_OK)
        rc = _read_items(&r, source, s);
    tdata_lines_free(&r.l);
    fclose(f);
    return rc;
}
