/* format/durable.c: how libtdata puts a file under its final name (shards,
 * the index, staged copies). The temporary file is created, never opened
 * through a symbolic link or over another user's file, so a link planted
 * at the temporary name in a shared directory cannot redirect the write;
 * the data is fsync'd before the rename and the directory after it, so a
 * file under its final name survives a crash of the node complete. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/format/format.h"

int tdata_tmp_clear(const char *tmp)
{
    struct stat st;
    if (lstat(tmp, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    /* Only our own regular file is a leftover of ours (a crash under the
     * same pid); anything else is someone else's and is refused. */
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        errno = EEXIST;
        return -1;
    }
    return unlink(tmp);
}

int tdata_tmp_create(const char *tmp)
{
    if (tdata_tmp_clear(tmp) != 0)
        return -1;
    return open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0644);
}

/* fsync of directory dir; a file system that cannot sync directories
 * (EINVAL, ENOTSUP) has nothing to flush. 0, or -1 with errno. */
static int _fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc && (e == EINVAL || e == ENOTSUP || e == EOPNOTSUPP))
        return 0;
    errno = e;
    return rc;
}

/* fsync of the directory holding PATH. */
static int _fsync_parent(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    return _fsync_dir(dir);
}

int tdata_publish(const char *tmp, const char *path)
{
    int fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return TDATA_PUBLISH_SYNC;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    if (rc != 0)
        return TDATA_PUBLISH_SYNC;
    if (rename(tmp, path) != 0)
        return TDATA_PUBLISH_RENAME;
    return _fsync_parent(path) ? TDATA_PUBLISH_DIRSYNC : 0;
}

FILE *tdata_tmp_fopen(const char *tmp)
{
    int fd = tdata_tmp_create(tmp);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f && fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

int tdata_publish_stream(FILE *f, const char *tmp, const char *path)
{
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad && errno == 0)
        errno = EIO;
    if (bad || tdata_publish(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}
