/* pack/pack_source.c: turns torus-pack's SOURCE into a list of labelled items.
 * Layouts:
 *   - a directory of class folders (ImageNet train/WNID/NAME.JPEG, val/ in
 *     class folders, or any class/file tree): label = class folder;
 *   - a flat directory (ImageNet val/) with --val-labels: either
 *     LOC_val_solution.csv (ImageId,PredictionString "wnid x y x y ...") or
 *     the devkit's ILSVRC2012_validation_ground_truth.txt (one ILSVRC ID per
 *     image, in file-number order) with --devkit-synsets (wnid per ID);
 *   - an IDX file (MNIST/Fashion-MNIST, gz or not).
 * Classes are the sorted folder/wnid names unless --classes=FILE fixes
 * the order (and gives the words, as in LOC_synset_mapping.txt). Every
 * regular, non-hidden file becomes an item; every other entry of the walk
 * (FIFO, device, socket, dangling link, a folder inside a class folder)
 * is reported on stderr and counted (torus-pack then exits 1), and what
 * fails to decode later is reported too: nothing is silently dropped. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "data/pack/pack.h"

static int _cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int _add(tdata_pack_src *s, const char *path, const char *name,
                int32_t label, uint64_t bytes)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->items = realloc(s->items, s->cap * sizeof *s->items);
    }
    tdata_pack_item *it = &s->items[s->n++];
    it->path = strdup(path);
    it->name = strdup(name);
    it->label = label;
    it->bytes = bytes;
    it->rec = 0;
    return 0;
}

/* A directory entry: name and, for files, size. */
typedef struct _ent {
    char *name;
    uint64_t size;
} _ent;

static int _cmpent(const void *a, const void *b)
{
    return strcmp(((const _ent *)a)->name, ((const _ent *)b)->name);
}

/* Reports (torus_note) why source entry PATH is not packed (name escaped: it
 * may hold a newline) and counts it: torus-pack's exit status then says
 * something was left out. */
static void _skip(tdata_pack_src *s, const char *path, const char *why,
                  const char *detail)
{
    char *e = tdata_name_escape(path, 0);
    torus_note("skipped %s: %s%s", e ? e : "(no memory)", why, detail);
    free(e);
    s->skipped++;
}

/* What entry P of a listed directory is: 1 a directory, 2 a regular file
 * (size in *size), 0 anything else, reported through _skip unless it is
 * a plain file where folders are listed (dirs). */
static int _kind(tdata_pack_src *s, const char *p, unsigned char d_type,
                 int dirs, uint64_t *size)
{
    struct stat st;
    *size = 0;
    if (d_type == DT_DIR && dirs)
        return 1;
    if (stat(p, &st) != 0) {
        int e = errno;
        if (lstat(p, &st) == 0 && S_ISLNK(st.st_mode) && e == ENOENT)
            _skip(s, p, "a dangling symbolic link", "");
        else
            _skip(s, p, "cannot stat: ", strerror(e));
        return 0;
    }
    *size = (uint64_t)st.st_size;
    if (S_ISDIR(st.st_mode) && !dirs)
        _skip(s, p, "a directory inside a class folder (not walked)", "");
    else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
        _skip(s, p, tdata_file_kind(st.st_mode), ", not a regular file");
    return S_ISDIR(st.st_mode) ? 1 : S_ISREG(st.st_mode) ? 2 : 0;
}

/* Sorted entries of DIR that are directories (dirs=1) or regular files
 * (dirs=0), hidden ones excluded; every other entry is reported (_kind).
 * One stat() per file (for its size, the shard balance needs it); a
 * folder's type comes from d_type when the file system fills it in,
 * sparing a stat() per class folder. */
static int _list(tdata_pack_src *s, const char *dir, int dirs, _ent **out,
                 int *n)
{
    DIR *d = opendir(dir);
    int cap = 64;
    _ent *v = malloc(cap * sizeof *v);
    *n = 0;
    *out = v;
    if (!d || !v) {
        int e = errno;
        if (d)
            closedir(d);
        return TORUS_FAIL(TDATA_EIO, "%s: cannot list: %s", dir, strerror(e));
    }
    struct dirent *e;
    int rc = TDATA_OK;
    while (rc == TDATA_OK && (e = readdir(d))) {
        char p[4096];
        uint64_t size;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' ||
            _kind(s, p, e->d_type, dirs, &size) != (dirs ? 1 : 2))
            continue;
        if (*n == cap) {
            _ent *nv = realloc(v, (size_t)cap * 2 * sizeof *v);
            if (!nv) {
                rc = TORUS_FAIL(TDATA_ENOMEM, "%s: no memory to list it", dir);
                break;
            }
            *out = v = nv;
            cap *= 2;
        }
        v[*n].size = size;
        if (!(v[*n].name = strdup(e->d_name)))
            rc = TORUS_FAIL(TDATA_ENOMEM, "%s: no memory to list it", dir);
        else
            (*n)++;
    }
    closedir(d);
    qsort(v, *n, sizeof *v, _cmpent);
    return rc;
}

static void _free_list(_ent *v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

static int _find_class(const tdata_pack_src *s, const char *id)
{
    for (int i = 0; i < s->num_classes; i++) /* at most 1000s, once per file */
        if (!strcmp(s->class_ids[i], id))
            return i;
    return -1;
}

static int _load_classes(const char *file, tdata_pack_src *s)
{
    FILE *f;
    if (tdata_fopen_regular(file, &f))
        return torus_error_prefix(TDATA_EIO, "--classes");
    char *line = NULL;
    size_t cap = 0;
    int ln = 0, n = 0, ncap = 0;
    while (getline(&line, &cap, f) > 0) {
        ln++;
        line[strcspn(line, "\r\n")] = 0;
        char id[256];
        int pos = 0;
        if (sscanf(line, "%255s %n", id, &pos) != 1)
            continue;
        if (n == ncap) {
            ncap = ncap ? ncap * 2 : 256;
            s->class_ids = realloc(s->class_ids, ncap * sizeof(char *));
            s->class_words = realloc(s->class_words, ncap * sizeof(char *));
        }
        s->class_ids[n] = strdup(id);
        s->class_words[n] = strdup(line + pos);
        s->num_classes = ++n;
        if (_find_class(s, id) != n - 1) {
            free(line);
            fclose(f);
            return TORUS_FAIL(TDATA_EINVAL, "%s:%d: class '%s' listed twice",
                              file, ln, id);
        }
    }
    free(line);
    fclose(f);
    if (n == 0)
        return TORUS_FAIL(TDATA_EINVAL, "--classes=%s: no classes", file);
    return TDATA_OK;
}

static int _set_classes_from(tdata_pack_src *s, char **names, int n)
{
    s->class_ids = calloc(n, sizeof(char *));
    s->class_words = calloc(n, sizeof(char *));
    for (int i = 0; i < n; i++) {
        s->class_ids[i] = strdup(names[i]);
        s->class_words[i] = strdup("");
    }
    s->num_classes = n;
    return TDATA_OK;
}

static int _scan_tree(const tdata_pack_opts *o, tdata_pack_src *s,
                      _ent *classes, int nc)
{
    if (!s->num_classes) {
        char **names = malloc((nc ? nc : 1) * sizeof *names);
        for (int c = 0; c < nc; c++)
            names[c] = classes[c].name;
        _set_classes_from(s, names, nc);
        free(names);
    }
    for (int c = 0; c < nc; c++) {
        int label = _find_class(s, classes[c].name);
        if (label < 0)
            return TORUS_FAIL(TDATA_EINVAL,
                              "%s/%s: folder is not a class "
                              "listed in --classes=%s",
                              o->source, classes[c].name, o->classes_file);
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", o->source, classes[c].name);
        int nf;
        _ent *files;
        int rc = _list(s, dir, 0, &files, &nf);
        for (int i = 0; rc == TDATA_OK && i < nf; i++) {
            char p[8200], nm[8200];
            snprintf(p, sizeof p, "%s/%s", dir, files[i].name);
            snprintf(nm, sizeof nm, "%s/%s", classes[c].name, files[i].name);
            _add(s, p, nm, label, files[i].size);
        }
        _free_list(files, nf);
        if (rc)
            return rc;
    }
    return TDATA_OK;
}

/* Labels of a flat val/ directory: name -> wnid. */
typedef struct {
    char *file, *wnid;
} _vlab;

static int _cmpvlab(const void *a, const void *b)
{
    return strcmp(((const _vlab *)a)->file, ((const _vlab *)b)->file);
}

/* Reading --val-labels: which of its two formats, and where. */
typedef struct _vread {
    const tdata_pack_opts *o;
    const _ent *files; /* the flat directory, in name order */
    int nf;
    int ln, n;  /* line number, labels so far */
    int csv;    /* -1 until the first line says */
    char **syn; /* devkit: wnid of each ILSVRC2012_ID */
    int nsyn;
} _vread;

/* --devkit-synsets: one wnid per line, in ID order. */
static int _read_synsets(_vread *r)
{
    const tdata_pack_opts *o = r->o;
    if (!o->devkit_synsets)
        return TORUS_FAIL(TDATA_EINVAL,
                          "--val-labels=%s looks like "
                          "the devkit ground truth: give "
                          "--devkit-synsets=FILE (wnid per ILSVRC "
                          "ID)",
                          o->val_labels);
    FILE *sf;
    if (tdata_fopen_regular(o->devkit_synsets, &sf))
        return torus_error_prefix(TDATA_EIO, "--devkit-synsets");
    char *sl = NULL;
    size_t sc = 0;
    while (getline(&sl, &sc, sf) > 0) {
        char id[256];
        if (sscanf(sl, "%255s", id) != 1)
            continue;
        char **ns = realloc(r->syn, (r->nsyn + 1) * sizeof *r->syn);
        if (!ns)
            break;
        r->syn = ns;
        r->syn[r->nsyn++] = strdup(id);
    }
    free(sl);
    fclose(sf);
    return TDATA_OK;
}

/* LOC_val_solution.csv: "ImageId,wnid x y x y ...". */
static int _csv_label(const _vread *r, char *line, _vlab *v)
{
    char *comma = strchr(line, ',');
    char id[256];
    if (!comma || sscanf(comma + 1, "%255s", id) != 1)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s:%d: expected "
                          "'ImageId,wnid ...'",
                          r->o->val_labels, r->ln);
    *comma = 0;
    /* ImageId has no extension: match on the file's stem. */
    v->file = strdup(line);
    v->wnid = strdup(id);
    return TDATA_OK;
}

/* The devkit's ground truth: line k holds the ID of the k-th file in name
 * order (ILSVRC2012_val_0000000k.JPEG). */
static int _devkit_label(const _vread *r, const char *line, _vlab *v)
{
    int idn = atoi(line);
    if (idn < 1 || idn > r->nsyn)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s:%d: ID %d not in "
                          "--devkit-synsets (%d entries)",
                          r->o->val_labels, r->ln, idn, r->nsyn);
    if (r->n >= r->nf)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: more labels (%d) than "
                          "files in %s",
                          r->o->val_labels, r->n + 1, r->o->source);
    char stem[4096];
    snprintf(stem, sizeof stem, "%s", r->files[r->n].name);
    char *dot = strrchr(stem, '.');
    if (dot)
        *dot = 0;
    v->file = strdup(stem);
    v->wnid = strdup(r->syn[idn - 1]);
    return TDATA_OK;
}

/* One non-empty line into (*out)[r->n] (grown as needed). The first line
 * decides the format: a comma means the CSV (its header is skipped). */
static int _val_line(_vread *r, char *line, _vlab **out, int *ncap)
{
    if (r->csv < 0) {
        r->csv = strchr(line, ',') != NULL;
        if (r->csv && !strncmp(line, "ImageId", 7))
            return TDATA_OK; /* header */
        int rc = r->csv ? TDATA_OK : _read_synsets(r);
        if (rc)
            return rc;
    }
    if (r->n == *ncap) {
        *ncap = *ncap ? *ncap * 2 : 1024;
        *out = realloc(*out, *ncap * sizeof **out);
    }
    _vlab *v = &(*out)[r->n];
    int rc = r->csv ? _csv_label(r, line, v) : _devkit_label(r, line, v);
    if (rc == TDATA_OK)
        r->n++;
    return rc;
}

static int _read_val_labels(const tdata_pack_opts *o, _ent *files, int nf,
                            _vlab **out, int *nout)
{
    FILE *f;
    if (tdata_fopen_regular(o->val_labels, &f))
        return torus_error_prefix(TDATA_EIO, "--val-labels");
    _vread r = {.o = o, .files = files, .nf = nf, .csv = -1};
    char *line = NULL;
    size_t cap = 0;
    int ncap = 0, rc = TDATA_OK;
    while (rc == TDATA_OK && getline(&line, &cap, f) > 0) {
        r.ln++;
        line[strcspn(line, "\r\n")] = 0;
        if (line[0])
            rc = _val_line(&r, line, out, &ncap);
    }
    free(line);
    fclose(f);
    tdata_strv_free(r.syn, r.nsyn);
    *nout = r.n;
    if (rc == TDATA_OK)
        qsort(*out, r.n, sizeof **out, _cmpvlab);
    return rc;
}

static int _scan_flat(const tdata_pack_opts *o, tdata_pack_src *s)
{
    int nf;
    _ent *files;
    _vlab *labs = NULL;
    int nl = 0;
    int rc = _list(s, o->source, 0, &files, &nf);
    if (rc == TDATA_OK)
        rc = _read_val_labels(o, files, nf, &labs, &nl);
    if (rc == TDATA_OK && !s->num_classes) {
        /* Classes: the sorted distinct wnids, ImageNet's usual order. */
        char **ids = malloc((nl ? nl : 1) * sizeof *ids);
        for (int i = 0; i < nl; i++)
            ids[i] = labs[i].wnid;
        qsort(ids, nl, sizeof *ids, _cmpstr);
        int u = 0;
        for (int i = 0; i < nl; i++)
            if (u == 0 || strcmp(ids[u - 1], ids[i]))
                ids[u++] = ids[i];
        _set_classes_from(s, ids, u);
        free(ids);
    }
    for (int i = 0; rc == TDATA_OK && i < nf; i++) {
        char stem[4096], p[4096];
        snprintf(stem, sizeof stem, "%s", files[i].name);
        char *dot = strrchr(stem, '.');
        if (dot)
            *dot = 0;
        _vlab key = {stem, NULL};
        _vlab *hit = bsearch(&key, labs, nl, sizeof *labs, _cmpvlab);
        if (!hit) {
            rc = TORUS_FAIL(TDATA_EINVAL, "%s/%s: no label in --val-labels=%s",
                            o->source, files[i].name, o->val_labels);
            break;
        }
        int label = _find_class(s, hit->wnid);
        if (label < 0) {
            rc = TORUS_FAIL(TDATA_EINVAL,
                            "%s: class '%s' of %s is not in "
                            "the class list",
                            o->val_labels, hit->wnid, files[i].name);
            break;
        }
        snprintf(p, sizeof p, "%s/%s", o->source, files[i].name);
        _add(s, p, files[i].name, label, files[i].size);
    }
    for (int i = 0; i < nl; i++) {
        free(labs[i].file);
        free(labs[i].wnid);
    }
    free(labs);
    _free_list(files, nf);
    return rc;
}

static char *_guess_idx_labels(const char *images)
{
    const char *p = strstr(images, "images-idx3");
    if (!p)
        return NULL;
    size_t pre = (size_t)(p - images);
    char *l = malloc(strlen(images) + 2);
    memcpy(l, images, pre);
    strcpy(l + pre, "labels-idx1");
    strcat(l, p + strlen("images-idx3"));
    return l;
}

int tdata_pack_scan(const tdata_pack_opts *o, tdata_pack_src *s)
{
    memset(s, 0, sizeof *s);
    struct stat st;
    if (stat(o->source, &st) != 0)
        return TORUS_FAIL(TDATA_EIO, "%s: %s", o->source, strerror(errno));
    if (S_ISREG(st.st_mode)) {
        char *guess = o->idx_labels ? NULL : _guess_idx_labels(o->source);
        const char *lab = o->idx_labels ? o->idx_labels : guess;
        if (!lab)
            return TORUS_FAIL(TDATA_EINVAL,
                              "%s: an IDX image file needs "
                              "--idx-labels=FILE",
                              o->source);
        int rc = tdata_idx_load(o->source, lab, s);
        free(guess);
        return rc;
    }
    int rc = TDATA_OK;
    if (o->classes_file && (rc = _load_classes(o->classes_file, s)))
        return rc;
    int nc;
    _ent *classes = NULL;
    if (!o->val_labels && (rc = _list(s, o->source, 1, &classes, &nc))) {
        _free_list(classes, nc);
        return rc;
    }
    if (o->val_labels)
        nc = 0;
    if (nc > 0 && !o->val_labels)
        rc = _scan_tree(o, s, classes, nc);
    else if (o->val_labels)
        rc = _scan_flat(o, s);
    else
        rc = TORUS_FAIL(TDATA_EINVAL,
                        "%s: no class folders; a flat "
                        "directory (ImageNet val/) needs --val-labels=FILE",
                        o->source);
    _free_list(classes, nc);
    if (rc == TDATA_OK && s->n == 0)
        rc = TORUS_FAIL(TDATA_EINVAL, "%s: no files found", o->source);
    return rc;
}

void tdata_pack_src_free(tdata_pack_src *s)
{
    for (uint64_t i = 0; i < s->n; i++) {
        free(s->items[i].path);
        free(s->items[i].name);
    }
    tdata_strv_free(s->class_ids, s->num_classes);
    tdata_strv_free(s->class_words, s->num_classes);
    free(s->items);
    free(s->idx_pixels);
    memset(s, 0, sizeof *s);
}
