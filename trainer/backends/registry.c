/* registry.c: the table of compiled-in compute backends, best first, and
 * the lookup by name behind --backend (see tbackends.h). The only file that
 * names each backend; the engine includes none of them. */
#include <string.h>

#include "common/torus_error.h"
#include "config.h"
#include "trainer/backends/tbackends.h"
#include "trainer/engine/backend.h"
#ifdef TORUS_HAVE_CUDNN
#include "trainer/backends/cuda/tcuda.h"
#endif
#ifdef TORUS_HAVE_DNNL
#include "trainer/backends/dnnl/tdnnl.h"
#endif

/* Best first: "auto" takes the GPU when its probe sees one. */
static const teng_backend_desc *const _table[] = {
#ifdef TORUS_HAVE_CUDNN
    &tcuda_backend_desc,
    &tcuda_backend_fp16_desc,
#endif
#ifdef TORUS_HAVE_DNNL
    &tdnnl_backend_desc,
#endif
    NULL,
};

static int _named(const teng_backend_desc *d, const char *name)
{
    if (!strcmp(d->name, name))
        return 1;
    for (const char *const *a = d->aliases; a && *a; a++)
        if (!strcmp(*a, name))
            return 1;
    return 0;
}

/* The descriptor called name; "auto": the first that probes usable. */
static const teng_backend_desc *_find(const char *name)
{
    int any = !strcmp(name, "auto");
    for (int i = 0; _table[i]; i++) {
        const teng_backend_desc *d = _table[i];
        if (any ? !d->probe || d->probe() : _named(d, name))
            return d;
    }
    return NULL;
}

const char *tbackends_list(void)
{
    static char list[128];
    if (!list[0])
        for (int i = 0; _table[i]; i++) {
            if (i)
                strncat(list, ", ", sizeof(list) - strlen(list) - 1);
            strncat(list, _table[i]->name, sizeof(list) - strlen(list) - 1);
        }
    return list;
}

int tbackends_gpus(const char *name)
{
#ifdef TORUS_HAVE_CUDNN
    const teng_backend_desc *d = _find(name);
    if (d == &tcuda_backend_desc || d == &tcuda_backend_fp16_desc)
        return tcuda_device_count();
#else
    (void)name;
#endif
    return 0;
}

int tbackends_device_memory(const teng_backend *bk, size_t *used, size_t *total)
{
#ifdef TORUS_HAVE_CUDNN
    return tcuda_device_memory(bk, used, total);
#else
    (void)bk, (void)used, (void)total;
    return -1;
#endif
}

int tbackends_known(const char *name)
{
    if (!strcmp(name, "auto"))
        return 1;
    for (int i = 0; _table[i]; i++)
        if (_named(_table[i], name))
            return 1;
    return 0;
}

int tbackends_open(const char *name, const teng_backend_opts *opts,
                   teng_backend **out)
{
    teng_backend_opts defaults = {0};
    *out = NULL;
    const teng_backend_desc *d = _find(name);
    if (!d)
        return TORUS_FAIL(TENG_EINVAL,
                          "backend '%s' is not built in (available: %s)", name,
                          *tbackends_list() ? tbackends_list() : "none");
    return d->create(opts ? opts : &defaults, out);
}
