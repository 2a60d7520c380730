/* algo/pipeline.c: one message in K pieces through a node stage, a network
 * stage and a node stage again, with the network stage of one piece on a
 * thread of its own so that it overlaps the node stages of the others
 * (torus2d: row reduce-scatter / column ring / row all-gather; hier:
 * reduce to the leader / leaders' ring / broadcast). On the emulated
 * 1 Gbit/s cluster the shared-memory stages are a tenth of the time; run
 * one after the other they add to the link time, pipelined only about
 * 1/K of them does. Every rank cuts the same pieces, so results stay
 * deterministic and identical on all ranks. */
#include <pthread.h>
#include <stdio.h>

#include "common/torus_error.h"
#include "trainer/comm/algo/algo.h"

typedef struct {
    tcomm_t *c;
    void *ctx;
    tc_stage_fn net;
    int K;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready; /* pieces through pre (caller) */
    int done;  /* pieces through net (network thread) */
    int stop;  /* the caller gave up: do not wait for more */
    tcomm_rc rc;
    char err[1024];
} _pipe;

static void *_net_thread(void *arg)
{
    _pipe *p = arg;
    for (int i = 0; i < p->K; i++) {
        pthread_mutex_lock(&p->mu);
        while (p->ready <= i && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        int stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        tcomm_rc rc = p->net(p->c, p->ctx, i);
        pthread_mutex_lock(&p->mu);
        if (rc) {
            p->rc = rc; /* the message is this thread's: hand it over */
            snprintf(p->err, sizeof p->err, "%s", torus_error_msg());
        } else {
            p->done = i + 1;
        }
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (rc)
            break;
    }
    return NULL;
}

tcomm_rc tc_pipeline_run(tcomm_t *c, int K, tc_stage_fn pre, tc_stage_fn net,
                         tc_stage_fn post, void *ctx)
{
    _pipe p = {.c = c, .ctx = ctx, .net = net, .K = K};
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    pthread_t th;
    tcomm_rc rc = TCOMM_OK;
    if (pthread_create(&th, NULL, _net_thread, &p)) {
        pthread_cond_destroy(&p.cv);
        pthread_mutex_destroy(&p.mu);
        return TORUS_FAIL(TCOMM_ERR_NOMEM,
                          "rank %d: cannot start the pipeline's network thread",
                          c->info.rank);
    }
    for (int i = 0; i < K && !rc; i++) {
        rc = pre(c, ctx, i);
        pthread_mutex_lock(&p.mu);
        if (!rc)
            p.ready = i + 1;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
    }
    for (int i = 0; i < K && !rc; i++) {
        pthread_mutex_lock(&p.mu);
        while (p.done <= i && !p.rc)
            pthread_cond_wait(&p.cv, &p.mu);
        int failed = p.rc != TCOMM_OK;
        pthread_mutex_unlock(&p.mu);
        if (failed)
            break; /* reported below, with the network thread's message */
        rc = post(c, ctx, i);
    }
    pthread_mutex_lock(&p.mu);
    p.stop = 1;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    pthread_join(th, NULL); /* its waits have the same deadline as ours */
    if (!rc && p.rc)
        rc = TORUS_FAIL(p.rc, "%s", p.err);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    return rc;
}
