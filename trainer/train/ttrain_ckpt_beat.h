/* ttrain_ckpt_beat.h: the checkpoint module's rank-0 write with several
 * ranks. Rank 0 alone writes a checkpoint; its write must not make the
 * others call it lost: a write to a shared file system can outlast
 * --comm-timeout, and they would wait for it inside the next all-reduce.
 * So they wait in rounds of tcomm_max_double, kept going by a heartbeat
 * thread of rank 0 (a round every min(1 s, comm timeout / 4), each well
 * within the timeout, so libtcomm still notices a rank that dies), up to
 * --checkpoint-timeout. Built into torus-train (it links libtcomm), beside
 * checkpoint.c, which writes the file. Errors: TORUS_FAIL (TTRAIN_ERANKS
 * when rank 0 failed or was late), message in torus_error_msg(). */
#ifndef TORUS_TRAINER_TRAIN_CKPT_BEAT_H
#define TORUS_TRAINER_TRAIN_CKPT_BEAT_H

#include "trainer/comm/tcomm.h"

typedef struct {
    tcomm_t *comm;
    int rank, world;
    double comm_timeout, ckpt_timeout; /* seconds */
    /* Ends the job from the heartbeat thread, where the writer may be
     * stuck in the file system: reports (what, msg) and aborts. */
    int (*fail)(const char *what, const char *msg);
} ttrain_ckpt_beat;

/* Rank 0: runs write(ctx) (0 or an error, which it has reported itself
 * before the others hear of it) while the heartbeat keeps the others'
 * rounds going; returns write's result. -1: no heartbeat thread. */
int ttrain_ckpt_beat_write(const ttrain_ckpt_beat *b, int (*write)(void *ctx),
                           void *ctx);
/* The other ranks: rounds until rank 0 says how the write ended. */
int ttrain_ckpt_beat_wait(const ttrain_ckpt_beat *b);

#endif
