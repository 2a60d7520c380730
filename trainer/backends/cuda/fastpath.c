/* trainer/backends/cuda/fastpath.c: the fast-path counters' line (see
 * tcuda_fastpath.h). Built into libtorustrain, not the module: the
 * program that prints the line links no CUDA library. */
#include <stdio.h>

#include "trainer/backends/cuda/tcuda_fastpath.h"

int tcuda_fastpath_format(const tcuda_fastpath *c, char *buf, size_t n)
{
    return snprintf(buf, n,
                    "fastpath: graph_capture=%lu graph_replay=%lu bn_ex=%lu "
                    "bn_fallback=%lu conv_tuned=%lu conv_cached=%lu "
                    "conv_heuristic=%lu",
                    c->graph_capture, c->graph_replay, c->bn_ex,
                    c->bn_fallback, c->conv_tuned, c->conv_cached,
                    c->conv_heuristic);
}
