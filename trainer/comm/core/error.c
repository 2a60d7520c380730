/* core/error.c: libtcomm's "last error" accessor. The message itself is
 * the per-thread one of common/torus_error.c, recorded by TORUS_FAIL where
 * a failure is detected; this only keeps tcomm_error() answering for the
 * callers that report it (torus-train, the tests). */
#include "trainer/comm/core/error.h"

const char *tcomm_error(void)
{
    return torus_error_msg();
}
