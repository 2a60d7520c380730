/* trainer/backends/cuda/chunk_plan.c: the multi-tensor chunk plan (see
 * chunk_plan.h). Plain C, so make check tests it on any machine. */
#include "trainer/backends/cuda/chunk_plan.h"

#include <stdlib.h>

#include "common/torus_error.h"
#include "trainer/engine/teng.h"

/* Chunks of every param, or TENG_EINVAL when they do not fit a grid. */
static int _count(const size_t *counts, int np, size_t chunk, uint32_t *out)
{
    uint64_t total = 0;
    for (int i = 0; i < np; i++) {
        /* Written without n + chunk - 1, which could wrap. */
        uint64_t c = counts[i] / chunk + (counts[i] % chunk != 0);
        if (c > TCUDA_PLAN_MAX_CHUNKS - total)
            return TORUS_FAIL(TENG_EINVAL,
                              "chunk plan: param %d (%zu elements) takes "
                              "the plan past %u chunks",
                              i, counts[i], TCUDA_PLAN_MAX_CHUNKS);
        total += c;
    }
    *out = (uint32_t)total;
    return TENG_OK;
}

int tcuda_plan_build(const size_t *counts, int np, size_t chunk,
                     tcuda_plan *out)
{
    *out = (tcuda_plan){0};
    if (np < 0 || chunk == 0 || (np > 0 && !counts))
        return TORUS_FAIL(TENG_EINVAL,
                          "chunk plan: %d params in chunks of %zu elements", np,
                          chunk);
    uint32_t n = 0;
    int rc = _count(counts, np, chunk, &n);
    if (rc)
        return rc;
    out->first = malloc(((size_t)np + 1) * sizeof *out->first);
    out->chunks = malloc((n ? n : 1) * sizeof *out->chunks);
    if (!out->first || !out->chunks) {
        tcuda_plan_free(out);
        return TORUS_FAIL(TENG_ENOMEM, "chunk plan: no memory for %u chunks",
                          n);
    }
    uint32_t c = 0;
    for (int i = 0; i < np; i++) {
        out->first[i] = c;
        /* By index: k * chunk < counts[i] never wraps, b += chunk could. */
        size_t nk = counts[i] / chunk + (counts[i] % chunk != 0);
        for (size_t k = 0; k < nk; k++) {
            size_t b = k * chunk;
            size_t e = counts[i] - b > chunk ? b + chunk : counts[i];
            out->chunks[c++] = (tcuda_chunk){(uint32_t)i, 0, b, e};
        }
    }
    out->first[np] = c;
    out->np = np;
    out->nchunks = n;
    return TENG_OK;
}

void tcuda_plan_free(tcuda_plan *p)
{
    free(p->chunks);
    free(p->first);
    *p = (tcuda_plan){0};
}
