/* ttrain_trace.h: torus-train's step timeline (--trace FILE), written as
 * Chrome trace-event JSON that Perfetto and chrome://tracing open.
 *
 * Each rank is a process (pid = rank) and each thread a thread (tid = the
 * kernel's thread id): the step thread's spans (step, data wait, forward,
 * backward and its layer groups, exchange wait, update, checkpoint) and the
 * communication thread's bucket reductions (algorithm, bytes, wire, the
 * time the bucket plan predicted). Every
 * span is a complete ("X") event; spans of one thread nest, as they are
 * closed innermost first. Time is in microseconds from a barrier all ranks
 * passed at open, so the ranks' rows line up to within that barrier.
 *
 * Events are kept in memory, at most TTRAIN_TRACE_MAX_BYTES per rank; past
 * that a rank records no more and the file says so (an instant event named
 * "trace_truncated" and a warning on stderr). At close rank 0 gathers every
 * rank's events through libtcomm and writes the file: one event per line.
 *
 * Every call takes a NULL trace and then does nothing, so the hooks cost a
 * test and a branch when --trace is off. */
#ifndef TORUS_TRAINER_TRAIN_TRACE_H
#define TORUS_TRAINER_TRAIN_TRACE_H

#include <stddef.h>

#include "trainer/comm/tcomm.h"
#include "trainer/comm/tcomm_fusion.h"
#include "trainer/engine/teng.h"

#define TTRAIN_TRACE_MAX_BYTES ((size_t)64 << 20)

typedef struct ttrain_trace ttrain_trace;

/* Collective over comm's world (comm NULL or world 1: this process alone).
 * Rank 0 creates path at once, so an unwritable path fails at start-up on
 * every rank. Returns 0, or -1 with the message in torus_error_msg(). */
int ttrain_trace_open(const char *path, tcomm_t *comm, int rank, int world,
                      ttrain_trace **out);

/* A span on the calling thread: begin pushes it, end closes the innermost
 * open one (end_step with the step and epoch as its "args": the step
 * span). Spans deeper than 16 are not recorded (their ends still match).
 * Events are json-c objects (common/torus_json.h), escaped there. */
void ttrain_trace_begin(ttrain_trace *t, const char *name);
void ttrain_trace_end(ttrain_trace *t);
void ttrain_trace_end_step(ttrain_trace *t, long step, int epoch);

/* The engine's gradient hook saw layer finish its backward: the backward
 * span open on this thread is cut into layer groups (a ResNet stage
 * "layerN", the "head" before the first stage, the "stem" after the last),
 * each a span nested in it that ends where the group's last layer did. */
void ttrain_trace_layer(ttrain_trace *t, teng_net *net, int layer);

/* tcomm_fusion_options.on_bucket: one bucket's reduction on the
 * communication thread (ctx: the trace). */
void ttrain_trace_bucket(void *ctx, const tcomm_fusion_span *s);

/* Collective like open: rank 0 writes the file with every rank's events;
 * *events (may be NULL) gets their number. Frees t. Returns 0, or -1 with
 * the message in torus_error_msg() (on every rank when rank 0 could not
 * write). */
int ttrain_trace_close(ttrain_trace *t, tcomm_t *comm, size_t *events);

#endif
