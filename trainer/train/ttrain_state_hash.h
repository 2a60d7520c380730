/* ttrain_state_hash.h: a 64-bit fingerprint of what every rank must hold alike
 * (weights and BN running statistics), so that ranks which have drifted
 * apart are caught instead of silently training different models. */
#ifndef TORUS_TRAINER_TRAIN_STATE_HASH_H
#define TORUS_TRAINER_TRAIN_STATE_HASH_H

#include <stdint.h>

#include "trainer/engine/teng.h"

/* FNV-1a over the canonical (NCHW/OIHW) bytes of every param and every
 * BN statistics vector, in order. 0 on success, else a TENG_ error with
 * its message in torus_error_msg(). Bitwise: equal only if every float is
 * equal. */
int ttrain_state_hash(teng_net *net, uint64_t *out);

#endif
