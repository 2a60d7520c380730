/* common/torus_error.h: the one error convention of torus (see
 * docs/ARCHITECTURE.md, "Errors").
 *
 * Contract:
 * - A function that can fail returns an int: 0 on success, otherwise a
 *   positive code from its module's enum (tcomm_rc, tdata_err, teng_status,
 *   torus_layout_rc, ...). Codes travel up unchanged.
 * - Where the failure is detected, TORUS_FAIL(code, fmt, ...) records one
 *   sentence that names what failed: the file and line of the input, the
 *   option, the rank, the tensor. The source location (file:line of the
 *   TORUS_FAIL) is appended for the developer. The message is per thread.
 * - A usage error (a bad option or setting, which the message names) is
 *   recorded with TORUS_FAIL_USAGE: the same, without the source location,
 *   since the user's input is the whole story.
 * - Layers in between may add context in front (torus_error_prefix) but never
 *   print. The boundary (a main(), a SPANK callback, a test) reports
 *   torus_error_msg() once.
 * This header is layer 0: it includes nothing of torus and every layer may
 * include it. */
#ifndef TORUS_COMMON_ERROR_H
#define TORUS_COMMON_ERROR_H

#include <stddef.h>

/* Longest message kept, with its location. 4096: a checkpoint refused for
 * another configuration names every difference (models, batch schedules,
 * data paths and identities: up to ~2.5 KB), which must not be cut. */
#define TORUS_ERROR_LEN 4096

/* Record `rc`'s message for this thread and return rc (so callers can write
 * `return TORUS_FAIL(...)`). A NULL or empty fmt keeps the old message. */
int torus_error_set_(int rc, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define TORUS_FAIL(rc, ...) \
    torus_error_set_((rc), __FILE__, __LINE__, __VA_ARGS__)
/* A NULL file records the message alone. */
#define TORUS_FAIL_USAGE(rc, ...) torus_error_set_((rc), NULL, 0, __VA_ARGS__)

/* Put "<context>: " in front of this thread's message (e.g. the rank or the
 * shard file a lower layer did not know). Returns rc, like TORUS_FAIL. */
int torus_error_prefix(int rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* On a function that returns a code: a caller that drops it fails the
 * build (-Wunused-result, an error under --enable-werror). GCC lets no
 * (void) cast through, so a site that truly may ignore a code (a cleanup
 * after an earlier failure) says why in a comment and tests it anyway. */
#define TORUS_MUST_CHECK __attribute__((warn_unused_result))

/* This thread's last message ("" when none since the last clear). */
const char *torus_error_msg(void);
void torus_error_clear(void);

#endif
