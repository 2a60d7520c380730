/* dnnl_util.c: the oneDNN backend's helpers that both dnnl_backend.c and
 * dnnl_layers.c call (dnnl_internal.h): a failed call recorded the
 * project's way, and the plain descriptor of a tensor. A file below both,
 * so that dnnl_backend.c calls down into dnnl_layers.c and neither calls
 * back. */
#include "common/torus_error.h"
#include "trainer/backends/dnnl/dnnl_internal.h"

int _tdnnl_fail(teng_backend *bk, const char *file, int line, const char *what,
                dnnl_status_t st)
{
    (void)bk;
    return torus_error_set_(TENG_EBACKEND, file, line, "%s: %s", what,
                            dnnl_status2str(st));
}

void _tdnnl_plain_md(dnnl_memory_desc_t *md, int ndims, const int *dims)
{
    static const dnnl_format_tag_t tags[] = {dnnl_format_tag_undef, dnnl_a,
                                             dnnl_ab, dnnl_abc, dnnl_abcd};
    dnnl_dims_t d;
    for (int i = 0; i < ndims; i++)
        d[i] = dims[i];
    dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32, tags[ndims]);
}
