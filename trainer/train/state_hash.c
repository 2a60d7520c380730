/* state_hash.c: fingerprint of the weights and BN statistics (see
 * ttrain_state_hash.h). Reads through the engine's canonical-layout accessors, so
 * it means the same on every backend, and costs one pass over the params
 * (about 0.1 s for ResNet-50 on this CPU), done once per evaluation. */
#include "trainer/train/ttrain_state_hash.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/torus_error.h"

static uint64_t _fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

int ttrain_state_hash(teng_net *net, uint64_t *out)
{
    float *buf = malloc(teng_net_largest_buffer(net) * sizeof(float));
    if (!buf)
        return TORUS_FAIL(TENG_ENOMEM, "state hash: out of memory");
    uint64_t h = 0xcbf29ce484222325ULL;
    int rc = 0;
    for (int i = 0; i < teng_net_nparams(net) && !rc; i++)
        if (!(rc = teng_param_read(net, i, 0, buf)))
            h = _fnv1a(h, buf, teng_net_param(net, i)->count * sizeof(float));
    for (int i = 0; i < teng_net_nstats(net) && !rc; i++)
        if (!(rc = teng_stats_read(net, i, buf)))
            h = _fnv1a(h, buf, teng_stats_count(net, i) * sizeof(float));
    free(buf);
    *out = h;
    return rc;
}
