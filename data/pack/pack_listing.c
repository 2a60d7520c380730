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
    FILE *f = fopen(tmp, "w");
    if (!f)
        return TORUS_FAIL(TDATA_EIO, "--listing=%s: %s", tmp, strerror(errno));
    fprintf(f, "torus-listing 1\nclasses %d\n", s->num_classes);
    for (int i = 0; i < s->num_classes; i++)
        fprintf(f, "%s\t%s\n", s->class_ids[i], s->class_words[i]);
    fprintf(f, "items %llu\n", (unsigned long long)s->n);
    for (uint64_t i = 0; i < s->n; i++)
        fprintf(f, "%d\t%llu\t%s\n", s->items[i].label,
                (unsigned long long)s->items[i].bytes, s->items[i].name);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return TORUS_FAIL(TDATA_EIO, "--listing=%s: write failed", path);
    }
    return TDATA_OK;
}

int tdata_listing_read(const char *path, const char *source, tdata_pack_src *s)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "r");
    if (!f)
        return TORUS_FAIL(TDATA_EIO, "--listing=%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int ln = 0, rc = TDATA_OK;
    unsigned long long n = 0;
    int nc = 0;
    if (getline(&line, &cap, f) <= 0 || strcmp(line, "torus-listing 1\n") ||
        getline(&line, &cap, f) <= 0 || sscanf(line, "classes %d", &nc) != 1 ||
        nc < 1)
        rc = TORUS_FAIL(TDATA_EFORMAT,
                        "--listing=%s: not a torus-pack "
                        "listing (version 1)",
                        path);
    ln = 2;
    s->class_ids = calloc(nc > 0 ? nc : 1, sizeof(char *));
    s->class_words = calloc(nc > 0 ? nc : 1, sizeof(char *));
    for (int i = 0; rc == TDATA_OK && i < nc; i++, ln++) {
        char *tab;
        if (getline(&line, &cap, f) <= 0 || !(tab = strchr(line, '\t'))) {
            rc = TORUS_FAIL(TDATA_EFORMAT, "%s:%d: bad class line", path,
                            ln + 1);
            break;
        }
        line[strcspn(line, "\n")] = 0;
        *tab = 0;
        s->class_ids[i] = strdup(line);
        s->class_words[i] = strdup(tab + 1);
        s->num_classes = i + 1;
    }
    if (rc == TDATA_OK &&
        (getline(&line, &cap, f) <= 0 || sscanf(line, "items %llu", &n) != 1))
        rc = TORUS_FAIL(TDATA_EFORMAT, "%s:%d: expected 'items N'", path,
                        ln + 1);
    ln++;
    if (rc == TDATA_OK) {
        s->items = calloc(n ? n : 1, sizeof *s->items);
        s->cap = n;
    }
    for (unsigned long long i = 0; rc == TDATA_OK && i < n; i++) {
        int label, pos = 0;
        unsigned long long bytes;
        ln++;
        if (getline(&line, &cap, f) <= 0 ||
            sscanf(line, "%d\t%llu\t%n", &label, &bytes, &pos) != 2 || !pos ||
            label < 0 || label >= s->num_classes) {
            rc = TORUS_FAIL(TDATA_EFORMAT, "%s:%d: bad item line", path, ln);
            break;
        }
        line[strcspn(line, "\n")] = 0;
        char p[8200];
        snprintf(p, sizeof p, "%s/%s", source, line + pos);
        tdata_pack_item *it = &s->items[s->n++];
        it->path = strdup(p);
        it->name = strdup(line + pos);
        it->label = label;
        it->bytes = bytes;
    }
    free(line);
    fclose(f);
    return rc;
}
