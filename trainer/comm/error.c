/* error.c: the per-thread "last error" of libtcomm. Functions return codes;
 * the message lives here until the caller reports it once at its boundary. */
#include <stdio.h>
#include <string.h>

#include "trainer/comm/tcomm_internal.h"

static _Thread_local char _tc_errmsg[1024];

tcomm_rc tcomm_set_error_(tcomm_rc rc, const char *file, int line,
                          const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Keep only the file name: full build paths add noise, not meaning. */
    const char *base = strrchr(file, '/');
    snprintf(_tc_errmsg, sizeof _tc_errmsg, "%s (%s:%d)", msg,
             base ? base + 1 : file, line);
    return rc;
}

const char *tcomm_error(void)
{
    return _tc_errmsg;
}
