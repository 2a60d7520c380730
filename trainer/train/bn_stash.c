/* bn_stash.c: each rank's own BN running statistics around a checkpoint
 * (see ttrain_bn_stash.h). The file is a 32-byte header (magic, world,
 * rank, step, count, CRC32C of the floats) and the floats, little-endian
 * as this host writes them: it is read back only by the same job on the
 * same machines. */
#include "trainer/train/ttrain_bn_stash.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "data/format/tdata_format.h"
#include "trainer/train/ttrain_checkpoint.h"
#include "trainer/train/ttrain_error.h"

static const char _MAGIC[8] = {'T', 'O', 'R', 'U', 'S', 'B', 'N', '1'};

typedef struct {
    char magic[8];
    int32_t world, rank;
    int64_t step;
    uint32_t count, crc;
} _header;

static void _path(char *p, size_t n, const char *dir, const char *run, int rank)
{
    snprintf(p, n, "%s/bn-%s-r%d.f32", dir, run, rank);
}

/* Reads (put 0) or writes (put 1) every statistics vector at its place
 * in v. */
static int _each(float *v, teng_net *net, int put)
{
    size_t at = 0;
    for (int i = 0; i < teng_net_nstats(net); i++) {
        if (put ? teng_stats_write(net, i, v + at)
                : teng_stats_read(net, i, v + at))
            return torus_error_prefix(-1, "BN statistics");
        at += teng_stats_count(net, i);
    }
    return 0;
}

int ttrain_bn_stash_take(ttrain_bn_stash *s, teng_net *net)
{
    size_t n = 0;
    for (int i = 0; i < teng_net_nstats(net); i++)
        n += teng_stats_count(net, i);
    if (!s->v) {
        s->v = malloc((n ? n : 1) * sizeof(float));
        if (!s->v)
            return TORUS_FAIL(TTRAIN_ENOMEM, "BN statistics: out of memory");
        s->n = n;
    }
    return _each(s->v, net, 0);
}

int ttrain_bn_stash_put(const ttrain_bn_stash *s, teng_net *net)
{
    return _each(s->v, net, 1);
}

int ttrain_bn_stash_save(const ttrain_bn_stash *s, const char *dir,
                         const char *run, int rank, int world, long step)
{
    char path[1200], tmp[1300];
    _path(path, sizeof path, dir, run, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    _header h = {.world = world,
                 .rank = rank,
                 .step = step,
                 .count = (uint32_t)s->n,
                 .crc = tdata_crc32c(0, s->v, s->n * sizeof(float))};
    memcpy(h.magic, _MAGIC, sizeof h.magic);
    /* A stop before the first checkpoint: rank 0 has not made DIR yet. */
    if (mkdir(dir, 0777) && errno != EEXIST)
        return TORUS_FAIL(TTRAIN_EIO, "%s: %s", dir, strerror(errno));
    FILE *f = fopen(tmp, "wx");
    if (!f)
        return TORUS_FAIL(TTRAIN_EIO, "%s: %s", tmp, strerror(errno));
    int bad = fwrite(&h, sizeof h, 1, f) != 1 ||
              fwrite(s->v, sizeof(float), s->n, f) != s->n;
    bad |= fclose(f) != 0;
    if (bad || tdata_publish(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return TORUS_FAIL(TTRAIN_EIO, "%s: %s", path, strerror(e));
    }
    return 0;
}

static int _finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

/* Reads and checks the file into s->v; 0, 1 (none that fits) or -1. Only
 * a regular file is opened (a FIFO would block the resume). */
static int _read(ttrain_bn_stash *s, const char *path, int rank, int world,
                 long step)
{
    if (access(path, F_OK) && errno == ENOENT)
        return 1;
    int fd = ttrain_ckpt_open_regular(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        if (fd >= 0)
            close(fd);
        return fd < 0 ? -1
                      : TORUS_FAIL(TTRAIN_CKPT_EBAD, "%s: %s", path,
                                   strerror(errno));
    }
    _header h;
    struct stat st;
    int rc = 1;
    if (fstat(fileno(f), &st) || fread(&h, sizeof h, 1, f) != 1 ||
        memcmp(h.magic, _MAGIC, sizeof h.magic))
        rc = TORUS_FAIL(TTRAIN_CKPT_EBAD, "%s: not a BN statistics file", path);
    else if (h.world != world || h.rank != rank || h.step != step ||
             h.count != s->n)
        rc = 1; /* another stop's, or another number of ranks' */
    else if ((uint64_t)st.st_size != sizeof h + s->n * sizeof(float) ||
             fread(s->v, sizeof(float), s->n, f) != s->n ||
             tdata_crc32c(0, s->v, s->n * sizeof(float)) != h.crc)
        rc = TORUS_FAIL(TTRAIN_CKPT_EBAD,
                        "%s: truncated or damaged (size or CRC32C)", path);
    else if (!_finite(s->v, s->n))
        rc = TORUS_FAIL(TTRAIN_CKPT_EBAD,
                        "%s: holds NaN or infinite statistics", path);
    else
        rc = 0;
    fclose(f);
    return rc;
}

int ttrain_bn_stash_load(ttrain_bn_stash *s, teng_net *net, const char *dir,
                         const char *run, int rank, int world, long step)
{
    char path[1200];
    _path(path, sizeof path, dir, run, rank);
    /* Sized from the net, never from the file. */
    if (ttrain_bn_stash_take(s, net))
        return -1;
    int rc = _read(s, path, rank, world, step);
    if (rc)
        return rc;
    return ttrain_bn_stash_put(s, net);
}

void ttrain_bn_stash_remove(const char *dir, const char *run, int rank)
{
    char path[1200];
    _path(path, sizeof path, dir, run, rank);
    unlink(path);
}

void ttrain_bn_stash_free(ttrain_bn_stash *s)
{
    free(s->v);
    s->v = NULL;
    s->n = 0;
}
