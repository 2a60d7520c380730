/* common/torus_share.h: how a global batch is split over ranks, defined
 * once for the data loader (data/read/loader.c, the global-block order)
 * and torus-train (each rank's local batch, the synthetic source's
 * positions), so the two cannot disagree on who serves which sample.
 *
 * Rank r of k takes floor(g/k) samples of a global batch of g, one more
 * for the first g mod k ranks; the shares tile [0, g) in rank order.
 * Layer 0: includes nothing. */
#ifndef TORUS_COMMON_SHARE_H
#define TORUS_COMMON_SHARE_H

/* Rank r's share: returns its size and sets *first, its offset into the
 * global batch; 0 (and *first 0) for a rank outside 0..k-1. */
static inline int torus_share(int g, int k, int r, int *first)
{
    if (k < 1 || r < 0 || r >= k || g < 0) {
        *first = 0;
        return 0;
    }
    int per = g / k, extra = g % k;
    *first = per * r + (r < extra ? r : extra);
    return per + (r < extra);
}

#endif
