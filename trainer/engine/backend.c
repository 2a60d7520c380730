/* backend.c: the engine's side of a backend's lifetime. Backends are
 * opened through the registry above the engine (trainer/backends/), which
 * is the only place that knows them by name; the engine closes them. */
#include "trainer/engine/backend.h"

void teng_backend_close(teng_backend *bk)
{
    if (bk)
        bk->ops->destroy(bk);
}

const char *teng_backend_name(const teng_backend *bk)
{
    return bk->ops->name;
}

void *teng_backend_stream(const teng_backend *bk)
{
    return bk->stream;
}

int teng_backend_host_memory(const teng_backend *bk)
{
    return bk->ops->host_memory;
}

int teng_backend_graph_supported(const teng_backend *bk)
{
    return bk->ops->graph_begin != NULL;
}
