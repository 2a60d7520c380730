/* read/stage.c: copies a dataset's shards to node-local disk before training.
 * One sequential pass with 8 MiB reads per shard is the cheapest way to
 * move data off a parallel file system; afterwards the random per-sample
 * reads of every epoch hit the local SSD or page cache instead of the
 * OSTs/NSDs. With the global per-epoch shuffle every rank needs samples
 * from every shard, so every shard is staged. Ranks sharing a node share
 * the copy: the first to take DEST.lock copies, the others wait for it
 * (never forever: another user's lock, or one that stays past the
 * deadline, ends staging with an error naming it). The copy is written to
 * a temporary name never opened through a link, and fsync'd before it and
 * its directory entry become visible (format/durable.c). */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "data/read/read.h"

/* A lock older than this (s) is left by a crashed rank and taken over. */
#define _STALE_S 600
/* The longest a rank waits for another to copy one shard (s): past the
 * stale age, so a crashed copier's lock is taken over first. */
#define _WAIT_S 900

static int _copy(const char *from, const char *to)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", to, (long)getpid());
    int in;
    if (tdata_open_regular(from, &in, NULL))
        return torus_error_prefix(TDATA_EIO, "stage");
    int out = tdata_tmp_create(tmp);
    if (out < 0) {
        int e = errno;
        close(in);
        return TORUS_FAIL(TDATA_EIO, "stage: %s: %s " TDATA_TMP_REFUSED, tmp,
                          strerror(e));
    }
    posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
    size_t cap = 8u << 20;
    char *buf = malloc(cap);
    int rc = buf ? TDATA_OK
                 : TORUS_FAIL(TDATA_ENOMEM, "stage: %s: no memory for the copy",
                              from);
    while (rc == TDATA_OK) {
        ssize_t r = read(in, buf, cap);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = TORUS_FAIL(TDATA_EIO, "stage: %s: %s", from, strerror(errno));
            break;
        }
        if (r == 0)
            break;
        for (ssize_t done = 0; done < r;) {
            ssize_t w = write(out, buf + done, (size_t)(r - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                rc = TORUS_FAIL(TDATA_EIO, "stage: %s: %s", tmp,
                                strerror(errno));
                break;
            }
            done += w;
        }
        if (rc)
            break;
    }
    free(buf);
    close(in);
    if (close(out) != 0 && rc == TDATA_OK)
        rc = TORUS_FAIL(TDATA_EIO, "stage: %s: %s", tmp, strerror(errno));
    if (rc == TDATA_OK && tdata_publish(tmp, to) != 0)
        rc = TORUS_FAIL(TDATA_EIO, "stage: %s: fsync or rename: %s", to,
                        strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}

static int _have(const char *path, uint64_t bytes)
{
    struct stat st;
    return stat(path, &st) == 0 && (uint64_t)st.st_size == bytes;
}

/* Why the rank waiting on LOCK must stop: another user's lock (not one of
 * our ranks, so never released for us), a stale one we cannot remove, or
 * the wait deadline. 0 to keep waiting. */
static int _lock_blocks(const char *lock, time_t since)
{
    struct stat st;
    if (lstat(lock, &st) != 0)
        return 0; /* released meanwhile */
    if (st.st_uid != geteuid()) {
        struct passwd *pw = getpwuid(st.st_uid);
        return TORUS_FAIL(TDATA_EIO,
                          "stage: %s is held by user %s (uid %ld), not by a "
                          "rank of this job; remove it or stage elsewhere",
                          lock, pw ? pw->pw_name : "?", (long)st.st_uid);
    }
    time_t now = time(NULL);
    /* A lock older than _STALE_S is left over from a crash: take it over. */
    if (now - st.st_mtime > _STALE_S && unlink(lock) != 0 && errno != ENOENT)
        return TORUS_FAIL(TDATA_EIO, "stage: stale lock %s: %s", lock,
                          strerror(errno));
    if (now - since > _WAIT_S)
        return TORUS_FAIL(TDATA_EIO,
                          "stage: gave up after %d s waiting for %s (the rank "
                          "copying it is stuck?)",
                          _WAIT_S, lock);
    return 0;
}

/* Copies FROM to TO unless a copy of BYTES bytes is there; the rank that
 * creates LOCK copies, the others wait for it. */
static int _stage_one(const char *from, const char *to, const char *lock,
                      uint64_t bytes)
{
    time_t since = time(NULL);
    while (!_have(to, bytes)) {
        int fd = open(
            lock, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            close(fd);
            int rc = _copy(from, to);
            unlink(lock);
            return rc;
        }
        if (errno != EEXIST)
            return TORUS_FAIL(TDATA_EIO, "stage: %s: %s", lock,
                              strerror(errno));
        int rc = _lock_blocks(lock, since);
        if (rc)
            return rc;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return TDATA_OK;
}

int tdata_stage(tdata_dataset *ds, const char *dir)
{
    if (!dir || !*dir)
        dir = getenv("SLURM_TMPDIR");
    if (!dir || !*dir)
        dir = getenv("TMPDIR");
    if (!dir || !*dir)
        return TORUS_FAIL(TDATA_EINVAL,
                          "stage: no directory given and "
                          "neither SLURM_TMPDIR nor TMPDIR is set");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return TORUS_FAIL(TDATA_EIO, "stage: %s: %s", dir, strerror(errno));
    const tdata_index *ix = tdata_dataset_index(ds);
    for (int i = 0; i < ix->num_shards; i++) {
        char to[4096], lock[4200];
        snprintf(to, sizeof to, "%s/%s", dir, ix->shards[i].file);
        snprintf(lock, sizeof lock, "%s.lock", to);
        int rc = _stage_one(tdata_dataset_shard_path(ds, i), to, lock,
                            ix->shards[i].bytes);
        if (rc)
            return rc;
    }
    /* Re-open from the copies; each is checked against the index again. */
    return tdata_dataset_relocate(ds, dir);
}
