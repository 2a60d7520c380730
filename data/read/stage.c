/* read/stage.c: copies a dataset's shards to node-local disk before training.
 * One sequential pass with 8 MiB reads per shard is the cheapest way to
 * move data off a parallel file system; afterwards the random per-sample
 * reads of every epoch hit the local SSD or page cache instead of the
 * OSTs/NSDs. With the global per-epoch shuffle every rank needs samples
 * from every shard, so every shard is staged. Ranks sharing a node share
 * the copy: the first to take DEST.lock copies, the others wait for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "data/read/read.h"

static int _copy(const char *from, const char *to)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", to, (long)getpid());
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return TORUS_FAIL(TDATA_EIO, "stage: %s: %s", from, strerror(errno));
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        close(in);
        return TORUS_FAIL(TDATA_EIO, "stage: %s: %s", tmp, strerror(errno));
    }
    posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
    size_t cap = 8u << 20;
    char *buf = malloc(cap);
    int rc = TDATA_OK;
    for (;;) {
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
    if (rc == TDATA_OK && rename(tmp, to) != 0)
        rc = TORUS_FAIL(TDATA_EIO, "stage: %s: %s", to, strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}

static int _have(const char *path, uint64_t bytes)
{
    struct stat st;
    return stat(path, &st) == 0 && (uint64_t)st.st_size == bytes;
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
        while (!_have(to, ix->shards[i].bytes)) {
            int fd = open(lock, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (fd >= 0) {
                close(fd);
                int rc = _copy(tdata_dataset_shard_path(ds, i), to);
                unlink(lock);
                if (rc)
                    return rc;
                break;
            }
            /* Another rank copies it; a lock older than 10 minutes is left
             * over from a crash and is taken over. */
            struct stat st;
            if (stat(lock, &st) == 0 && time(NULL) - st.st_mtime > 600)
                unlink(lock);
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    /* Re-open from the copies; each is checked against the index again. */
    return tdata_dataset_relocate(ds, dir);
}
