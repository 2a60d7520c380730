/* backend.c: the registry of compiled-in backends. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "trainer/engine/backend.h"

#ifdef TORUS_HAVE_DNNL
#include "trainer/backend_dnnl/dnnl_backend.h"
#endif

const char *teng_backend_list(void)
{
#ifdef TORUS_HAVE_DNNL
    return "dnnl";
#else
    return "";
#endif
}

int teng_backend_open(const char *name, const teng_backend_opts *opts,
                      teng_backend **out, char *err, size_t errlen)
{
    teng_backend_opts defaults = {0};
    *out = NULL;
    if (!opts)
        opts = &defaults;
#ifdef TORUS_HAVE_DNNL
    if (!strcmp(name, "dnnl") || !strcmp(name, "cpu") || !strcmp(name, "auto"))
        return tdnnl_backend_create(opts, out, err, errlen);
#endif
    snprintf(err, errlen, "backend '%s' is not built in (available: %s)", name,
             *teng_backend_list() ? teng_backend_list() : "none");
    return TENG_EINVAL;
}

void teng_backend_close(teng_backend *bk)
{
    if (bk)
        bk->ops->destroy(bk);
}
