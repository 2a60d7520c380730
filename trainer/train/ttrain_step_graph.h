/* trainer/train/ttrain_step_graph.h: when torus-train records its training step
 * in a CUDA graph and replays it (prefix ttrain_sg_), as plain C, tested
 * without a GPU (tests/unit/test_step_graph.c).
 *
 * What a graph holds: the forward, backward and, on the NCCL path, the
 * gradient exchange's launches and its end (the compute stream's wait and
 * the inf/nan count's copy), as recorded once (engine teng_net_graph_*);
 * with the device step on (ttrain_sg_set_update; engine teng_net_dstep),
 * also the whole update and the loss-scale decision (its device part,
 * TENG_DSTEP_QUEUE: the step's lr comes from a fixed pinned ring that the
 * host fills before the launch, the scale from device memory).
 * What it bakes in, so that a change means recording again: the plan's
 * shapes and buffers (teng_net_plan_id: the batch, and any re-plan such as
 * evaluation's short batches), the global batch and the loss scale (the
 * loss layer's backward multiplies by them; under the device step the
 * backward reads the scale from device memory, and torus-train keys it
 * as 0, unless a test injects an inf), and the weights' place
 * (a checkpoint restore counts as a new generation). After any change,
 * one step runs eagerly first (cuDNN and cuBLAS allocate lazily at a
 * shape's first call, which a recording refuses), the next is recorded,
 * and the ones after replay it.
 *
 * Never recorded: without the backend's graphs; TCUDA_GRAPH=0; the staged
 * exchange (host sums in the step); dropout (its masks' key changes every
 * step and is a kernel argument); after a recording failed (reported
 * once, then eager for good). */
#ifndef TORUS_TRAINER_TRAIN_STEP_GRAPH_H
#define TORUS_TRAINER_TRAIN_STEP_GRAPH_H

typedef struct {
    unsigned plan;     /* teng_net_plan_id */
    int global_batch;  /* the loss normaliser */
    double loss_scale; /* of this step */
    unsigned gen;      /* checkpoint restores so far */
} ttrain_sg_key;

typedef enum {
    TTRAIN_SG_EAGER,  /* launch forward and backward as calls */
    TTRAIN_SG_RECORD, /* record them, then replay the recording */
    TTRAIN_SG_REPLAY  /* replay the recording */
} ttrain_sg_act;

typedef struct {
    const char *off; /* why graphs are never used (NULL: they may be) */
    int failed;      /* a recording failed: eager for good */
    int have;        /* a recording exists, for key */
    int warm;        /* an eager step ran with key */
    int update;      /* recordings hold the update (the device step) */
    ttrain_sg_key key;
    long records, replays; /* for the summary */
} ttrain_sg;

/* env: TCUDA_GRAPH's value (NULL when unset; "0" turns graphs off);
 * supported: the backend records graphs; host_exchange: the step's
 * exchange does host work (the staged path, or the host fusion);
 * dropout: the net has dropout. */
void ttrain_sg_init(ttrain_sg *s, const char *env, int supported,
                    int host_exchange, int dropout);
/* The next step's action for key k. *drop = 1 when the caller must free
 * the recording it holds first (stale: the key changed, or graphs are
 * off for good). */
ttrain_sg_act ttrain_sg_next(ttrain_sg *s, const ttrain_sg_key *k, int *drop);
/* The result of a TTRAIN_SG_RECORD step (every rank's: one failure makes
 * all run eagerly, as all must launch the same collectives). Returns 1
 * when the caller should report this failure (the first one only). */
int ttrain_sg_recorded(ttrain_sg *s, int ok);
/* Whether recordings from now on hold the update (the device step's
 * device part). A change makes the next step eager (and drops a
 * recording), as a new key does. */
void ttrain_sg_set_update(ttrain_sg *s, int on);
/* Whether a step with action act (ran: the graph ran, i.e. a replay or a
 * recording that succeeded) leaves the update to the caller: 1 unless a
 * graph that holds the update ran. */
int ttrain_sg_update_eager(const ttrain_sg *s, int ran);
/* A step that replayed the recording (counted for the summary). */
void ttrain_sg_replayed(ttrain_sg *s);
/* "on", "off: <why>" or "failed" (for the banner and summary). */
const char *ttrain_sg_state(const ttrain_sg *s);

#endif
