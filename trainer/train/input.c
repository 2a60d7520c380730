/* train/input.c: each step's batch into the net (see ttrain_input.h). */
#include "common/torus_error.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_input.h"

/* The batch of (epoch, step) from the source; an 8-bit batch is also
 * staged: its copy to the device starts (slot in->slot) and runs while
 * the caller goes on. */
static int _fetch(ttrain_input *in, int epoch, long step, int lbatch,
                  ttrain_batch *b, double *data_s)
{
    ttrain_trace_begin(in->trace, "data wait");
    if (in->src->next(in->src, lbatch, b))
        return -1;
    ttrain_trace_end(in->trace);
    /* Epochs hold whole global batches and each rank its share of each,
     * so a short batch is a data-source bug, never to be trained. */
    if (b->n != lbatch)
        return TORUS_FAIL(TTRAIN_EDATA,
                          "rank %d: the source gave %d samples for a local "
                          "batch of %d at epoch %d step %ld",
                          in->rank, b->n, lbatch, epoch, step);
    *data_s += b->wait_s;
    if (b->px &&
        teng_net_stage_input_u8(in->net, in->slot, b->px, b->flips, b->n))
        return -1;
    return 0;
}

/* An 8-bit batch is normalised and mirrored by the backend. */
int ttrain_input_step(ttrain_input *in, int epoch, long step, int lbatch,
                      double *data_s)
{
    ttrain_batch b;
    if (in->staged)
        b = in->next, in->staged = 0;
    else if (_fetch(in, epoch, step, lbatch, &b, data_s))
        return -1;
    if (b.px ? teng_net_use_input_u8(in->net, in->slot, b.scale, b.bias)
             : teng_net_set_input(in->net, b.x))
        return -1;
    in->slot ^= b.px != NULL;
    return teng_net_set_labels(in->net, b.y) ? -1 : 0;
}

int ttrain_input_ahead(ttrain_input *in, int epoch, long step, int lbatch,
                       double *data_s)
{
    int rc = _fetch(in, epoch, step, lbatch, &in->next, data_s);
    in->staged = rc == 0;
    return rc;
}

uint64_t ttrain_input_served(const ttrain_input *in)
{
    return in->src->samples -
           (in->staged ? (uint64_t)in->src->global_batch : 0);
}
