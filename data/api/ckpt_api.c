/* api/ckpt_api.c: libtorusdata's checkpoint functions (tdata_api_ckpt_*,
 * see tdata_api.h): format/tdata_ckpt.h's names and checked tensors behind
 * the narrow API, for the Python package's converter. Thin: every check is
 * tdata_ckpt's, so Python refuses a checkpoint for the reason torus-train
 * does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "data/api/tdata_api.h"
#include "data/format/tdata_ckpt.h"
#include "data/format/tdata_h5attr.h"

struct tdata_api_ckpt {
    int fd;   /* the regular file checked */
    hid_t f;  /* HDF5's view of that same file */
    char *path;
};

int tdata_api_ckpt_name(const char *dir, int64_t step, const char *run,
                        char *out, uint64_t n)
{
    return tdata_ckpt_name(out, (size_t)n, dir, step, run);
}

/* H5Fopen of the descriptor's file (/proc/self/fd/N: what was checked is
 * what HDF5 reads, even if the name changed since), under the lock. */
static hid_t _h5_open(int fd)
{
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    tdata_h5_lock();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(self, H5F_ACC_RDONLY, H5P_DEFAULT);
    tdata_h5_unlock();
    return f;
}

int tdata_api_ckpt_open(const char *path, tdata_api_ckpt **out)
{
    *out = NULL;
    if (!path || !*path)
        return TORUS_FAIL(TDATA_EINVAL, "no checkpoint given");
    tdata_api_ckpt *c = calloc(1, sizeof *c);
    if (!c || !(c->path = malloc(strlen(path) + 1))) {
        free(c);
        return TORUS_FAIL(TDATA_ENOMEM, "%s: out of memory", path);
    }
    memcpy(c->path, path, strlen(path) + 1);
    int rc = tdata_open_regular(path, &c->fd, NULL);
    if (rc) {
        free(c->path);
        free(c);
        return rc;
    }
    if ((c->f = _h5_open(c->fd)) < 0) {
        close(c->fd);
        free(c->path);
        free(c);
        return TORUS_FAIL(TDATA_EFORMAT, "%s: not a readable HDF5 file",
                          path);
    }
    *out = c;
    return 0;
}

int tdata_api_ckpt_fd(const tdata_api_ckpt *c)
{
    return c->fd;
}

int tdata_api_ckpt_tensor(tdata_api_ckpt *c, const char *group,
                          const char *dset, uint64_t count, int32_t kind,
                          float *buf)
{
    char label[512];
    snprintf(label, sizeof(label), "%s/%s", group, dset);
    hid_t g = tdata_ckpt_group(c->f, group);
    if (g < 0)
        return torus_error_prefix(TDATA_EFORMAT, "%s", c->path);
    int rc = tdata_ckpt_tensor(g, dset, label, count, kind, buf);
    tdata_h5_lock();
    H5Gclose(g);
    tdata_h5_unlock();
    return rc ? torus_error_prefix(rc, "%s", c->path) : 0;
}

void tdata_api_ckpt_close(tdata_api_ckpt *c)
{
    if (!c)
        return;
    tdata_h5_lock();
    H5Fclose(c->f);
    tdata_h5_unlock();
    close(c->fd);
    free(c->path);
    free(c);
}
