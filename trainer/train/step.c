/* train/step.c: a step's forward and backward, as calls or as the step's
 * CUDA graph (see ttrain_step.h). */
#include <stdio.h>
#include <stdlib.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "trainer/train/ttrain_step.h"

void ttrain_step_open(ttrain_step *s)
{
    int dropout = 0;
    teng_layer_info l;
    for (int i = 0; !teng_net_layer_info(s->net, i, &l); i++)
        dropout |= l.kind == TENG_L_DROPOUT;
    int host_ex = !ttrain_exchange_capturable(s->ex);
    ttrain_sg_init(&s->sg, getenv("TCUDA_GRAPH"),
                   teng_net_graph_supported(s->net), host_ex, dropout);
}

/* Forward and backward as calls (the gradient hook starts the all-reduce
 * of finished buckets while backward goes on). */
static int _fwd_bwd(ttrain_step *s)
{
    int rc;
    ttrain_trace_begin(s->trace, "forward");
    if ((rc = teng_net_forward(s->net, 1)))
        return rc;
    ttrain_trace_end(s->trace);
    ttrain_trace_begin(s->trace, "backward");
    if ((rc = teng_net_backward(s->net)))
        return rc;
    ttrain_trace_end(s->trace);
    return 0;
}

/* Records forward, backward and the exchange's end (and, under the device
 * step, the update's device part) as the step graph. Every rank takes the
 * same decision: a failure on any rank leaves every rank eager for good.
 * *got: 1 recorded, 0 not (run eagerly). */
static int _record(ttrain_step *s, int *got)
{
    teng_graph *g = NULL;
    char why[256] = "on another rank";
    int bad = teng_net_graph_begin(s->net) != 0;
    if (!bad) {
        bad = _fwd_bwd(s) || ttrain_exchange_finish_device(s->ex) ||
              (s->sg.update && topt_sgd_dstep(s->opt, 0, TENG_DSTEP_QUEUE));
        bad |= teng_net_graph_end(s->net, &g) != 0; /* ends it in any case */
    }
    if (bad) {
        snprintf(why, sizeof why, "%s", torus_error_msg());
        teng_net_graph_free(s->net, g);
        g = NULL;
        ttrain_exchange_abandon(s->ex);
    }
    double v = bad;
    int rc = s->world > 1 ? tcomm_max_double(s->comm, &v) : 0;
    if (rc)
        return torus_error_prefix(rc, "step graph");
    if (v != 0.0 && g) {
        teng_net_graph_free(s->net, g);
        g = NULL;
    }
    if (ttrain_sg_recorded(&s->sg, g != NULL) && (bad || s->rank == 0))
        torus_warn("rank %d: recording the step as a CUDA graph failed (%s); "
                   "every step runs eagerly from now on",
                   s->rank, why);
    s->graph = g;
    *got = g != NULL;
    return 0;
}

int ttrain_step_run(ttrain_step *s, int lbatch, double scale, int *replayed)
{
    ttrain_sg_key k = {teng_net_plan_id(s->net), lbatch * s->world, scale,
                       s->restores};
    int drop, got = 0, rc;
    ttrain_sg_act act = ttrain_sg_next(&s->sg, &k, &drop);
    if (drop) { /* a stale graph goes once its last replay is done */
        if ((rc = teng_net_sync(s->net)))
            return torus_error_prefix(rc, "step");
        teng_net_graph_free(s->net, s->graph);
        s->graph = NULL;
    }
    if (act == TTRAIN_SG_RECORD && (rc = _record(s, &got)))
        return rc;
    *replayed = act == TTRAIN_SG_REPLAY || got;
    s->upd_eager = ttrain_sg_update_eager(&s->sg, *replayed);
    if (*replayed) {
        if ((rc = teng_net_graph_replay(s->net, s->graph)))
            return torus_error_prefix(rc, "step");
        ttrain_sg_replayed(&s->sg);
        return 0;
    }
    rc = _fwd_bwd(s);
    return rc ? torus_error_prefix(rc, "step") : 0;
}

void ttrain_step_close(ttrain_step *s)
{
    if (s->graph && !teng_net_sync(s->net))
        teng_net_graph_free(s->net, s->graph);
    s->graph = NULL;
}
