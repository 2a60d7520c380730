/* arena.c: greedy lowest-offset planner for buffers with lifetimes. */
#include "trainer/engine/arena.h"

#include <stdlib.h>

static int _overlap(const teng_interval *a, const teng_interval *b)
{
    return a->first <= b->last && b->first <= a->last;
}

static size_t _round(size_t n, size_t align)
{
    return (n + align - 1) & ~(align - 1);
}

size_t teng_arena_plan(teng_interval *buf, int n, size_t align)
{
    size_t total = 0;
    /* Placement order: by first use, then larger first, so the long-lived
     * big buffers settle low. n is a few hundred: O(n^2) is fine. */
    int *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!order)
        return (size_t)-1;
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++) {
        int v = order[i], j = i - 1;
        while (j >= 0 && (buf[order[j]].first > buf[v].first ||
                          (buf[order[j]].first == buf[v].first &&
                           buf[order[j]].bytes < buf[v].bytes))) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = v;
    }
    for (int i = 0; i < n; i++) {
        teng_interval *b = &buf[order[i]];
        size_t need = _round(b->bytes, align), off = 0;
        /* Move past any placed, time-overlapping buffer that collides,
         * restarting the scan after each move (offsets only grow). */
        for (int moved = 1; moved;) {
            moved = 0;
            for (int j = 0; j < i; j++) {
                const teng_interval *o = &buf[order[j]];
                size_t oend = o->offset + _round(o->bytes, align);
                if (_overlap(b, o) && off < oend && o->offset < off + need) {
                    off = oend;
                    moved = 1;
                }
            }
        }
        b->offset = off;
        if (off + need > total)
            total = off + need;
    }
    free(order);
    return total;
}
