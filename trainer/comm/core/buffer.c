/* core/buffer.c: scratch buffers that grow and are reused across calls
 * (tc_buf, core/comm.h): the first touch of fresh pages costs more than a
 * small all-reduce, so every algorithm keeps its wire buffers here. They
 * are 64-byte aligned for the vector kernels and never shrink. */
#include <stdlib.h>

#include "trainer/comm/core/comm.h"

void *tc_buf_get(tc_buf *b, size_t bytes)
{
    if (bytes == 0) /* callers test for NULL: never hand out none */
        bytes = 1;
    if (bytes > b->bytes) {
        void *p = NULL;
        /* Round up so a slowly growing size does not reallocate each call. */
        size_t want = bytes + bytes / 4 + 4096;
        if (posix_memalign(&p, 64, want) != 0)
            return NULL;
        free(b->p);
        b->p = p;
        b->bytes = want;
    }
    return b->p;
}

void tc_buf_free(tc_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->bytes = 0;
}
