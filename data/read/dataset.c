/* read/dataset.c: a packed dataset opened for reading: the index plus every
 * shard, each checked against the index before training starts so that a
 * missing, truncated, foreign or newer shard fails at start-up with the
 * file's name instead of hours later. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/torus_error.h"
#include "data/read/read.h"

struct tdata_dataset {
    tdata_index ix;
    tdata_dataset_info info;
    char *dir;
    tdata_shard *shards;
    uint64_t *first; /* first global id of each shard, num_shards+1 */
};

/* INDEX may be a directory holding exactly one *-index.txt. */
static int _resolve(const char *arg, char *path, size_t n)
{
    struct stat st;
    if (stat(arg, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(path, n, "%s", arg);
        return TDATA_OK;
    }
    DIR *d = opendir(arg);
    int found = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 10 && !strcmp(e->d_name + l - 10, "-index.txt")) {
            found++;
            snprintf(path, n, "%s/%s", arg, e->d_name);
        }
    }
    if (d)
        closedir(d);
    if (found != 1)
        return TORUS_FAIL(found ? TDATA_EINVAL : TDATA_EMISSING,
                          "%s: %s; name the index file", arg,
                          found ? "several *-index.txt files"
                                : "no *-index.txt file");
    return TDATA_OK;
}

static int _check_shard(const tdata_index_shard *is, const tdata_shard *s,
                        const tdata_index *ix, const char *path, int i)
{
    if (s->file_size < is->bytes)
        return TORUS_FAIL(TDATA_ETRUNCATED,
                          "%s: truncated: %llu bytes, the "
                          "index says %llu",
                          path, (unsigned long long)s->file_size,
                          (unsigned long long)is->bytes);
    if (s->file_size != is->bytes || s->n != is->count ||
        s->crc_of_crcs != is->crc || s->shard_index != i ||
        s->num_classes != ix->num_classes || s->layout != ix->layout)
        return TORUS_FAIL(TDATA_EMISMATCH,
                          "%s: does not match the index "
                          "(shard %d: %llu images, %llu bytes, crc %08x; "
                          "index: %llu images, %llu bytes, crc %08x)",
                          path, s->shard_index, (unsigned long long)s->n,
                          (unsigned long long)s->file_size, s->crc_of_crcs,
                          (unsigned long long)is->count,
                          (unsigned long long)is->bytes, is->crc);
    /* The decode threads size every dense image by the index's shape and
     * read it from the shard: the two must agree, or they read past it. */
    if (ix->layout == TDATA_LAYOUT_DENSE &&
        (s->height != ix->height || s->width != ix->width ||
         s->channels != ix->channels))
        return TORUS_FAIL(TDATA_EMISMATCH,
                          "%s: image shape %d x %d x %d differs from the "
                          "index's 'shape %d %d %d'",
                          path, s->height, s->width, s->channels, ix->height,
                          ix->width, ix->channels);
    return TDATA_OK;
}

/* Every shard keeps a descriptor open for pread(); ImageNet's ~1000
 * shards exceed the usual soft limit of 1024, so raise it towards the hard
 * limit, and say so clearly when even that is too low. */
static int _fd_budget(int shards, const char *path)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)shards + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
        return TDATA_OK;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need
                      ? need
                      : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < need)
        return TORUS_FAIL(TDATA_EINVAL,
                          "%s: %d shards need %llu open files "
                          "but the hard limit is %llu (ulimit -Hn); pack "
                          "fewer, larger shards or raise the limit",
                          path, shards, (unsigned long long)need,
                          (unsigned long long)rl.rlim_max);
    return TDATA_OK;
}

/* Open shard i and check it against its index line. */
static int _open_shard(tdata_dataset *ds, int i)
{
    const tdata_index *ix = &ds->ix;
    char sp[4096];
    snprintf(sp, sizeof sp, "%s/%s", ds->dir, ix->shards[i].file);
    int rc = tdata_shard_open(sp, &ds->shards[i], 0);
    if (rc == TDATA_EFORMAT) {
        /* An HDF5 file cut short usually fails to open at all. */
        struct stat st;
        if (stat(sp, &st) == 0 && (uint64_t)st.st_size < ix->shards[i].bytes)
            rc = TORUS_FAIL(TDATA_ETRUNCATED,
                            "%s: truncated: %llu bytes, "
                            "the index says %llu",
                            sp, (unsigned long long)st.st_size,
                            (unsigned long long)ix->shards[i].bytes);
    }
    if (rc == TDATA_OK)
        rc = _check_shard(&ix->shards[i], &ds->shards[i], ix, sp, i);
    return rc;
}

static void _fill_info(tdata_dataset *ds)
{
    const tdata_index *ix = &ds->ix;
    tdata_dataset_info *in = &ds->info;
    in->layout = ix->layout;
    in->format_version = ix->version;
    in->num_images = ix->num_images;
    in->num_shards = ix->num_shards;
    in->num_classes = ix->num_classes;
    in->height = ix->height;
    in->width = ix->width;
    in->channels = ix->layout == TDATA_LAYOUT_DENSE ? ix->channels : 3;
    memcpy(in->mean, ix->mean, sizeof in->mean);
    memcpy(in->std, ix->std, sizeof in->std);
    snprintf(in->split, sizeof in->split, "%s", ix->split);
    snprintf(in->creator, sizeof in->creator, "%s", ix->creator);
}

int tdata_dataset_open(const char *index_path, tdata_dataset **out)
{
    char path[4096];
    *out = NULL;
    int rc = tdata_limits_env();
    if (!rc)
        rc = _resolve(index_path, path, sizeof path);
    if (rc)
        return rc;
    tdata_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for the dataset", path);
    if ((rc = tdata_index_read(path, &ds->ix))) {
        free(ds);
        return rc;
    }
    char *slash = strrchr(path, '/');
    ds->dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
    tdata_index *ix = &ds->ix;
    if (!ds->dir)
        rc = TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for the path", path);
    if (rc || (rc = _fd_budget(ix->num_shards, path))) {
        tdata_index_free(ix);
        free(ds->dir);
        free(ds);
        return rc;
    }
    ds->shards = calloc(ix->num_shards, sizeof *ds->shards);
    ds->first = calloc(ix->num_shards + 1, sizeof *ds->first);
    for (int i = 0; ds->shards && i < ix->num_shards; i++)
        ds->shards[i].fd = -1;
    if (!ds->shards || !ds->first) {
        rc = TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for %d shards", path,
                        ix->num_shards);
        tdata_dataset_close(ds);
        return rc;
    }
    for (int i = 0; i < ix->num_shards && rc == TDATA_OK; i++) {
        rc = _open_shard(ds, i);
        ds->first[i + 1] = ds->first[i] + ix->shards[i].count;
    }
    if (rc) {
        tdata_dataset_close(ds);
        return rc;
    }
    _fill_info(ds);
    *out = ds;
    return TDATA_OK;
}

void tdata_dataset_close(tdata_dataset *ds)
{
    if (!ds)
        return;
    for (int i = 0; ds->shards && i < ds->ix.num_shards; i++)
        tdata_shard_close(&ds->shards[i]);
    free(ds->shards);
    free(ds->first);
    free(ds->dir);
    tdata_index_free(&ds->ix);
    free(ds);
}

const tdata_dataset_info *tdata_dataset_get_info(const tdata_dataset *ds)
{
    return &ds->info;
}

const char *tdata_dataset_class_name(const tdata_dataset *ds, int cls)
{
    return cls >= 0 && cls < ds->ix.num_classes ? ds->ix.class_ids[cls] : NULL;
}

const char *tdata_dataset_shard_path(const tdata_dataset *ds, int shard)
{
    return ds->shards[shard].path;
}

uint64_t tdata_dataset_shard_count(const tdata_dataset *ds, int shard)
{
    return ds->shards[shard].n;
}

/* Internal accessor for the loader and the bench. */
tdata_shard *tdata_dataset_shard(tdata_dataset *ds, int i)
{
    return &ds->shards[i];
}

const tdata_index *tdata_dataset_index(const tdata_dataset *ds)
{
    return &ds->ix;
}

void tdata_dataset_locate(const tdata_dataset *ds, uint64_t id, int *shard,
                          uint64_t *idx)
{
    int lo = 0, hi = ds->ix.num_shards - 1;
    while (lo < hi) { /* last shard whose first id <= id */
        int mid = (lo + hi + 1) / 2;
        if (ds->first[mid] <= id)
            lo = mid;
        else
            hi = mid - 1;
    }
    *shard = lo;
    *idx = id - ds->first[lo];
}

int tdata_dataset_read(tdata_dataset *ds, uint64_t id, uint8_t **buf,
                       size_t *cap, size_t *len, int32_t *label, uint32_t *crc)
{
    if (id >= ds->info.num_images)
        return TORUS_FAIL(TDATA_EINVAL, "sample %llu out of range",
                          (unsigned long long)id);
    int s;
    uint64_t i;
    tdata_dataset_locate(ds, id, &s, &i);
    tdata_shard *sh = &ds->shards[s];
    uint64_t lo = sh->offsets[i], hi = sh->offsets[i + 1];
    if (*cap < hi - lo || !*buf) {
        uint8_t *nb = realloc(*buf, hi - lo ? hi - lo : 1);
        if (!nb)
            return TORUS_FAIL(TDATA_ENOMEM, "out of memory");
        *buf = nb;
        *cap = hi - lo;
    }
    *len = hi - lo;
    if (label)
        *label = sh->labels[i];
    if (crc)
        *crc = sh->crcs[i];
    return tdata_shard_pread(sh, lo, hi, *buf);
}

int tdata_dataset_name(tdata_dataset *ds, uint64_t id, char *name, size_t n)
{
    int s;
    uint64_t i;
    tdata_dataset_locate(ds, id, &s, &i);
    return tdata_shard_name(&ds->shards[s], i, name, n);
}

int tdata_dataset_relocate(tdata_dataset *ds, const char *dir)
{
    for (int i = 0; i < ds->ix.num_shards; i++) {
        char sp[4096];
        snprintf(sp, sizeof sp, "%s/%s", dir, ds->ix.shards[i].file);
        tdata_shard s;
        int rc = tdata_shard_open(sp, &s, 0);
        if (rc == TDATA_OK)
            rc = _check_shard(&ds->ix.shards[i], &s, &ds->ix, sp, i);
        if (rc) {
            tdata_shard_close(&s);
            return rc;
        }
        tdata_shard_close(&ds->shards[i]);
        ds->shards[i] = s;
    }
    char *nd = strdup(dir);
    if (!nd)
        return TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for the path", dir);
    free(ds->dir);
    ds->dir = nd;
    return TDATA_OK;
}
