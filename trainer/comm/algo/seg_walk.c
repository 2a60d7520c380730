/* algo/seg_walk.c: the walk over a range of a vector given as pieces
 * (tcomm_seg), shared by the packed and the in-place paths of
 * tcomm_allreduce_segs (segs.c, shared_grads.c): both cut a fused bucket
 * into chunks by position and must map each chunk to the same pieces. */
#include "trainer/comm/algo/algo.h"

void tc_seg_walk(const tcomm_seg *s, int ns, size_t from, size_t len,
                 tc_piece_fn fn, void *arg)
{
    size_t base = 0, end = from + len;
    for (int i = 0; i < ns && base < end; base += s[i].count, i++) {
        size_t lo = from > base ? from : base,
               hi = end < base + s[i].count ? end : base + s[i].count;
        if (lo < hi)
            fn(s[i].p + (lo - base), hi - lo, lo - from, arg);
    }
}
