/* format/index.c: the dataset index, SPLIT-index.txt (docs/shard-format.md).
 * A small line-oriented text file, so that a person can read it and a job
 * script can grep it; it is written last (tmp + rename) from the shards'
 * own attributes, which makes it reproducible from the shards alone.
 * Read as hostile input: opened only as a regular file, lines bounded
 * (TDATA_MAX_LINE), names escaped on write and unescaped on read
 * (format/textio.c), mean and std finite with std in (1e-6, 1e6). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "data/format/format.h"

void tdata_shard_filename(char *buf, size_t n, const char *split, int i,
                          int count)
{
    snprintf(buf, n, "%s-%05d-of-%05d.h5", split, i, count);
}

void tdata_index_free(tdata_index *ix)
{
    tdata_strv_free(ix->class_ids, ix->num_classes);
    tdata_strv_free(ix->class_words, ix->num_classes);
    free(ix->shards);
    memset(ix, 0, sizeof *ix);
}

/* The escaped form of S (tdata_name_escape) into *out, for the index being
 * written to PATH (WHAT I names it in the message): 0, or a code when it
 * is out of memory or too long for a line the reader takes. */
static int _esc(const char *path, const char *what, int i, const char *s,
                int flags, char **out)
{
    char *e = tdata_name_escape(s, flags);
    *out = NULL;
    if (!e)
        return TORUS_FAIL(TDATA_ENOMEM, "%s: no memory to escape %s %d", path,
                          what, i);
    size_t n = strlen(e);
    if (n > TDATA_MAX_LINE / 2) {
        free(e);
        return TORUS_FAIL(TDATA_EINVAL,
                          "%s: %s %d is %zu bytes once escaped, too long for "
                          "an index line (%d bytes); refused",
                          path, what, i, n, TDATA_MAX_LINE);
    }
    *out = e;
    return TDATA_OK;
}

/* The dataset's keys, the split and creator escaped (they come from a
 * shard's attributes). 0 or a code. */
static int _write_head(FILE *f, const char *path, const tdata_index *ix)
{
    char *cr, *sp = NULL;
    int rc = _esc(path, "creator", 0, ix->creator, 0, &cr);
    if (rc == TDATA_OK && (rc = _esc(path, "split", 0, ix->split, 0, &sp))) {
        free(cr);
        return rc;
    }
    if (rc)
        return rc;
    fprintf(f, "# torus dataset index; format: docs/shard-format.md\n");
    fprintf(f, "torus-index %d\n", TDATA_FORMAT_VERSION);
    fprintf(f, "creator %s\n", cr);
    fprintf(f, "split %s\n", sp);
    free(cr);
    free(sp);
    fprintf(f, "layout %s\n",
            ix->layout == TDATA_LAYOUT_DENSE ? "dense" : "encoded");
    if (ix->layout == TDATA_LAYOUT_DENSE)
        fprintf(f, "shape %d %d %d\n", ix->height, ix->width, ix->channels);
    fprintf(f, "images %llu\n", (unsigned long long)ix->num_images);
    fprintf(f, "mean %.6f %.6f %.6f\n", ix->mean[0], ix->mean[1], ix->mean[2]);
    fprintf(f, "std %.6f %.6f %.6f\n", ix->std[0], ix->std[1], ix->std[2]);
    return TDATA_OK;
}

/* "class I ID WORDS": the id escaped with its spaces (a field), the words
 * escaped (the rest of the line). */
static int _write_classes(FILE *f, const char *path, const tdata_index *ix)
{
    fprintf(f, "classes %d\n", ix->num_classes);
    for (int i = 0; i < ix->num_classes; i++) {
        char *id, *w = NULL;
        int rc =
            _esc(path, "class id", i, ix->class_ids[i], TDATA_ESC_SPACE, &id);
        if (rc == TDATA_OK)
            rc = _esc(path, "class words", i, ix->class_words[i], 0, &w);
        if (rc == TDATA_OK)
            fprintf(f, "class %d %s%s%s\n", i, id, w[0] ? " " : "", w);
        free(id);
        free(w);
        if (rc)
            return rc;
    }
    return TDATA_OK;
}

int tdata_index_write(const char *path, const tdata_index *ix)
{
    char tmp[4096];
    /* A unique temporary name: job-array tasks may race to write it. */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = tdata_tmp_fopen(tmp);
    if (!f)
        return TORUS_FAIL(TDATA_EIO, "%s: %s " TDATA_TMP_REFUSED, tmp,
                          strerror(errno));
    int rc = _write_head(f, path, ix);
    if (rc == TDATA_OK)
        rc = _write_classes(f, path, ix);
    if (rc) {
        fclose(f);
        unlink(tmp);
        return rc;
    }
    fprintf(f, "shards %d\n", ix->num_shards);
    for (int i = 0; i < ix->num_shards; i++)
        fprintf(f, "shard %d %s %llu %llu %08x\n", i, ix->shards[i].file,
                (unsigned long long)ix->shards[i].count,
                (unsigned long long)ix->shards[i].bytes, ix->shards[i].crc);
    if (tdata_publish_stream(f, tmp, path) != 0)
        return TORUS_FAIL(TDATA_EIO, "%s: write failed: %s", path,
                          strerror(errno));
    return TDATA_OK;
}

static int _bad_line(const char *path, int line, const char *what)
{
    return TORUS_FAIL(TDATA_EFORMAT, "%s:%d: %s", path, line, what);
}

/* Where the reader is in an index file. */
typedef struct _ixread {
    const char *path;
    int ln;             /* line number, for messages */
    int nclass, nshard; /* class and shard lines so far */
    int norm;           /* 1: mean seen, 2: std seen */
    tdata_index *ix;
} _ixread;

/* The version line, which must come first. */
static int _key_version(_ixread *r, const char *val)
{
    tdata_index *ix = r->ix;
    ix->version = atoi(val);
    if (ix->version > TDATA_FORMAT_VERSION)
        return TORUS_FAIL(TDATA_EVERSION,
                          "%s: index format version %d "
                          "is newer than this reader supports (%d); "
                          "update torus",
                          r->path, ix->version, TDATA_FORMAT_VERSION);
    if (ix->version < 1)
        return _bad_line(r->path, r->ln, "bad format version");
    return TDATA_OK;
}

/* "mean M M M" or "std S S S": every batch is normalised by them, so a
 * value that is not finite, or a std so small or large that the inputs
 * become inf or 0, is refused here rather than trained on. */
static int _key_norm(_ixread *r, const char *key, const char *val)
{
    int is_std = key[0] == 's';
    double *d = is_std ? r->ix->std : r->ix->mean;
    char *end;
    const char *p = val;
    for (int c = 0; c < 3; c++, p = end) {
        d[c] = strtod(p, &end);
        if (end == p)
            return _bad_line(r->path, r->ln, "bad mean/std (want 3 numbers)");
        if (!isfinite(d[c]) ||
            (is_std && (d[c] <= TDATA_STD_MIN || d[c] >= TDATA_STD_MAX)))
            return TORUS_FAIL(TDATA_EFORMAT,
                              "%s:%d: %s %g of channel %d refused: want a "
                              "finite number%s",
                              r->path, r->ln, key, d[c], c,
                              is_std ? " above 1e-06 and below 1e+06" : "");
    }
    r->norm |= is_std ? 2 : 1;
    return TDATA_OK;
}

/* Keys of the whole dataset. Returns 0, a code, or -1 when KEY is none of
 * them. */
static int _key_dataset(_ixread *r, const char *key, char *val)
{
    tdata_index *ix = r->ix;
    if (!strcmp(key, "torus-index"))
        return _key_version(r, val);
    if (!strcmp(key, "creator") || !strcmp(key, "split")) {
        if (tdata_name_unescape(val))
            return _bad_line(r->path, r->ln, "escaped NUL byte");
        if (key[0] == 'c')
            snprintf(ix->creator, sizeof ix->creator, "%s", val);
        else
            snprintf(ix->split, sizeof ix->split, "%s", val);
    } else if (!strcmp(key, "layout")) {
        ix->layout =
            !strcmp(val, "dense") ? TDATA_LAYOUT_DENSE : TDATA_LAYOUT_ENCODED;
    } else if (!strcmp(key, "shape")) {
        if (sscanf(val, "%d %d %d", &ix->height, &ix->width, &ix->channels) !=
                3 ||
            ix->height < 1 || ix->width < 1 ||
            (ix->channels != 1 && ix->channels != 3))
            return _bad_line(r->path, r->ln,
                             "bad shape (want H W C, C 1 or 3)");
    } else if (!strcmp(key, "images")) {
        ix->num_images = strtoull(val, NULL, 10);
    } else if (!strcmp(key, "mean") || !strcmp(key, "std")) {
        return _key_norm(r, key, val);
    } else {
        return -1;
    }
    return TDATA_OK;
}

/* "classes N" and its N "class I WNID [words]" lines; returns like
 * _key_dataset. */
static int _key_classes(_ixread *r, const char *key, char *val)
{
    tdata_index *ix = r->ix;
    if (!strcmp(key, "classes")) {
        /* A second 'classes' line must not change the count that sized
         * the arrays: tdata_index_free walks them by it. */
        int nc = atoi(val);
        if (nc < 1 || nc > TDATA_MAX_CLASSES || ix->class_ids)
            return _bad_line(r->path, r->ln, "bad class count");
        ix->num_classes = nc;
        ix->class_ids = calloc(ix->num_classes, sizeof(char *));
        ix->class_words = calloc(ix->num_classes, sizeof(char *));
        if (!ix->class_ids || !ix->class_words)
            return TORUS_FAIL(TDATA_ENOMEM, "%s:%d: no memory for %d classes",
                              r->path, r->ln, ix->num_classes);
        return TDATA_OK;
    }
    if (strcmp(key, "class"))
        return -1;
    /* "I ID[ WORDS]", ID and WORDS escaped (tdata_name_escape). */
    char *end, *id, *words;
    long i = strtol(val, &end, 10);
    if (!ix->class_ids || end == val || *end != ' ' || i != r->nclass ||
        i >= ix->num_classes)
        return _bad_line(r->path, r->ln, "bad class line");
    id = end + strspn(end, " ");
    words = id + strcspn(id, " ");
    if (*words)
        *words++ = 0;
    if (!*id || tdata_name_unescape(id) || tdata_name_unescape(words))
        return _bad_line(r->path, r->ln,
                         "bad class line (no id, or an escaped NUL byte)");
    ix->class_ids[i] = strdup(id);
    ix->class_words[i] = strdup(words);
    if (!ix->class_ids[i] || !ix->class_words[i])
        return TORUS_FAIL(TDATA_ENOMEM, "%s:%d: no memory for a class name",
                          r->path, r->ln);
    r->nclass++;
    return TDATA_OK;
}

/* 1 when S holds a control character: a shard's file name is made from the
 * split, which never holds one, and is printed in every message about it. */
static int _has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

/* "shards N" and its N "shard I FILE COUNT BYTES CRC" lines; returns like
 * _key_dataset. */
static int _key_shards(_ixread *r, const char *key, const char *val)
{
    tdata_index *ix = r->ix;
    if (!strcmp(key, "shards")) {
        int ns = atoi(val);
        if (ns < 1 || ns > TDATA_MAX_SHARDS || ix->shards)
            return _bad_line(r->path, r->ln, "bad shard count");
        ix->num_shards = ns;
        ix->shards = calloc(ix->num_shards, sizeof *ix->shards);
        if (!ix->shards)
            return TORUS_FAIL(TDATA_ENOMEM, "%s:%d: no memory for %d shards",
                              r->path, r->ln, ix->num_shards);
        return TDATA_OK;
    }
    if (strcmp(key, "shard"))
        return -1;
    int i;
    unsigned long long cnt, bytes;
    unsigned crc;
    if (!ix->shards)
        return _bad_line(r->path, r->ln, "shard line before 'shards N'");
    /* Check the count before sscanf writes the file name into the slot. */
    if (r->nshard >= ix->num_shards)
        return _bad_line(r->path, r->ln, "more shard lines than 'shards'");
    tdata_index_shard *s = &ix->shards[r->nshard];
    if (sscanf(val, "%d %255s %llu %llu %x", &i, s->file, &cnt, &bytes, &crc) !=
            5 ||
        i != r->nshard || strchr(s->file, '/') || _has_control(s->file) ||
        !strcmp(s->file, "..") || !strcmp(s->file, "."))
        return _bad_line(r->path, r->ln, "bad shard line");
    s->count = cnt;
    s->bytes = bytes;
    s->crc = crc;
    r->nshard++;
    return TDATA_OK;
}

/* One line. Unknown keys are skipped: minor additions stay readable. */
static int _line(_ixread *r, char *line)
{
    char key[32];
    int pos = 0;
    if (sscanf(line, "%31s %n", key, &pos) != 1)
        return _bad_line(r->path, r->ln, "unreadable line");
    char *val = line + pos;
    if (r->ix->version == 0 && strcmp(key, "torus-index") != 0)
        return _bad_line(r->path, r->ln,
                         "not a torus index (first line must be "
                         "'torus-index VERSION')");
    int rc = _key_dataset(r, key, val);
    if (rc < 0)
        rc = _key_classes(r, key, val);
    if (rc < 0)
        rc = _key_shards(r, key, val);
    return rc < 0 ? TDATA_OK : rc;
}

/* What must hold once the whole file is read. */
static int _check_totals(const _ixread *r)
{
    const tdata_index *ix = r->ix;
    if (ix->version == 0)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: empty or not a torus index",
                          r->path);
    if (r->nclass != ix->num_classes || r->nclass == 0)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: %d class lines for %d classes",
                          r->path, r->nclass, ix->num_classes);
    if (r->nshard != ix->num_shards || r->nshard == 0)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: %d shard lines for %d shards",
                          r->path, r->nshard, ix->num_shards);
    uint64_t sum = 0;
    for (int i = 0; i < r->nshard; i++) {
        if (ix->shards[i].count > UINT64_MAX - sum)
            return TORUS_FAIL(TDATA_EFORMAT,
                              "%s: shard counts add up past 2^64", r->path);
        sum += ix->shards[i].count;
    }
    if (r->norm != 3)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: no '%s' line", r->path,
                          r->norm & 1 ? "std" : "mean");
    if (ix->layout == TDATA_LAYOUT_DENSE && ix->height == 0)
        return TORUS_FAIL(TDATA_EFORMAT, "%s: dense index without 'shape'",
                          r->path);
    if (sum != ix->num_images)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: shard counts add up to %llu, "
                          "'images' says %llu",
                          r->path, (unsigned long long)sum,
                          (unsigned long long)ix->num_images);
    return TDATA_OK;
}

int tdata_index_read(const char *path, tdata_index *ix)
{
    memset(ix, 0, sizeof *ix);
    FILE *f;
    int rc = tdata_fopen_regular(path, &f);
    if (rc)
        return rc;
    _ixread r = {.path = path, .ix = ix};
    tdata_lines lr;
    tdata_lines_init(&lr, f, path);
    int got = 1;
    while (rc == TDATA_OK && (rc = tdata_lines_next(&lr, &got)) == 0 && got) {
        r.ln = lr.ln;
        if (lr.line[0] != '#' && lr.line[0] != 0)
            rc = _line(&r, lr.line);
    }
    tdata_lines_free(&lr);
    fclose(f);
    if (rc == TDATA_OK)
        rc = _check_totals(&r);
    if (rc)
        tdata_index_free(ix);
    return rc;
}

/* Pixel statistics summed over the shards. */
typedef struct _pixsum {
    double sum[3], sq[3], count;
} _pixsum;

/* Enter open shard i (at PATH) into ix: shard 0 gives the dataset's
 * attributes and class names, the others must agree with it. */
static int _add_shard(tdata_index *ix, tdata_shard *s, int i, const char *path,
                      _pixsum *px)
{
    if (s->shard_index != i || s->num_shards != ix->num_shards)
        return TORUS_FAIL(TDATA_EMISMATCH, "%s: says it is shard %d of %d",
                          path, s->shard_index, s->num_shards);
    if (i == 0) {
        snprintf(ix->creator, sizeof ix->creator, "%s", s->creator);
        ix->layout = s->layout;
        ix->height = s->height;
        ix->width = s->width;
        ix->channels = s->channels;
        ix->num_classes = s->num_classes;
        ix->class_ids = s->class_ids;
        ix->class_words = s->class_words;
        s->class_ids = s->class_words = NULL;
    } else if (s->num_classes != ix->num_classes || s->layout != ix->layout) {
        return TORUS_FAIL(TDATA_EMISMATCH,
                          "%s: class count or layout "
                          "differs from shard 0",
                          path);
    }
    ix->shards[i].count = s->n;
    ix->shards[i].bytes = s->file_size;
    ix->shards[i].crc = s->crc_of_crcs;
    ix->num_images += s->n;
    for (int c = 0; c < 3; c++) {
        px->sum[c] += s->pixel_sum[c];
        px->sq[c] += s->pixel_sumsq[c];
    }
    px->count += s->pixel_count;
    return TDATA_OK;
}

/* Mean and std per channel from the shards' pixel sums. A channel whose
 * variance is too small to divide by (one constant colour) gets std 1, as
 * the reader would refuse it; sums that are not finite (a forged shard)
 * are refused, naming the directory. */
static int _norm_from(const _pixsum *px, const char *dir, tdata_index *ix)
{
    for (int c = 0; c < 3; c++) {
        double cnt = px->count;
        ix->mean[c] = cnt > 0 ? px->sum[c] / cnt : 0.5;
        double var =
            cnt > 0 ? px->sq[c] / cnt - ix->mean[c] * ix->mean[c] : 0.25;
        ix->std[c] = var > 1e-10 ? sqrt(var) : 1.0;
        if (!isfinite(ix->mean[c]) || !isfinite(ix->std[c]) ||
            ix->std[c] >= TDATA_STD_MAX)
            return TORUS_FAIL(TDATA_EFORMAT,
                              "%s: the shards' pixel_sum/pixel_sumsq give "
                              "mean %g, std %g for channel %d; refused",
                              dir, ix->mean[c], ix->std[c], c);
    }
    return TDATA_OK;
}

int tdata_index_build(const char *dir, const char *split, int num_shards,
                      char *index_path, size_t n)
{
    tdata_index ix;
    memset(&ix, 0, sizeof ix);
    ix.version = TDATA_FORMAT_VERSION;
    snprintf(ix.split, sizeof ix.split, "%s", split);
    ix.num_shards = num_shards;
    ix.shards = calloc(num_shards > 0 ? num_shards : 1, sizeof *ix.shards);
    if (!ix.shards)
        return TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for %d shards", dir,
                          num_shards);
    _pixsum px = {{0}, {0}, 0};
    int rc = TDATA_OK;
    for (int i = 0; i < num_shards && rc == TDATA_OK; i++) {
        char path[4096];
        tdata_shard_filename(ix.shards[i].file, sizeof ix.shards[i].file, split,
                             i, num_shards);
        snprintf(path, sizeof path, "%s/%s", dir, ix.shards[i].file);
        tdata_shard s;
        rc = tdata_shard_open(path, &s, i == 0);
        if (rc == TDATA_OK)
            rc = _add_shard(&ix, &s, i, path, &px);
        tdata_shard_close(&s);
    }
    if (rc == TDATA_OK)
        rc = _norm_from(&px, dir, &ix);
    if (rc == TDATA_OK) {
        snprintf(index_path, n, "%s/%s-index.txt", dir, split);
        rc = tdata_index_write(index_path, &ix);
    }
    tdata_index_free(&ix);
    return rc;
}
