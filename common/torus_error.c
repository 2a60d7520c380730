/* common/torus_error.c: the per-thread error message behind TORUS_FAIL.
 * Why per thread: the data loader's I/O and decode threads, the comm thread
 * and the main thread fail independently; each boundary reports its own. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/torus_error.h"

static _Thread_local char _err_msg[TORUS_ERROR_LEN];

int torus_error_set_(int rc, const char *file, int line, const char *fmt, ...)
{
    if (!fmt || !*fmt)
        return rc;
    char msg[TORUS_ERROR_LEN - 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!file) {
        snprintf(_err_msg, sizeof _err_msg, "%s", msg);
        return rc;
    }
    /* Keep only the file's base name: build paths add noise, not meaning. */
    const char *base = strrchr(file, '/');
    snprintf(_err_msg, sizeof _err_msg, "%s (%s:%d)", msg,
             base ? base + 1 : file, line);
    return rc;
}

int torus_error_prefix(int rc, const char *fmt, ...)
{
    char head[256], old[TORUS_ERROR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, _err_msg, sizeof old);
    /* Truncation keeps the head of the message, which is what names the
     * failure; the tail is the source location. */
    size_t n = strlen(head);
    if (n + 2 >= sizeof _err_msg)
        n = sizeof _err_msg - 3;
    memcpy(_err_msg, head, n);
    memcpy(_err_msg + n, ": ", 2);
    size_t room = sizeof _err_msg - n - 3;
    size_t m = strnlen(old, room);
    memcpy(_err_msg + n + 2, old, m);
    _err_msg[n + 2 + m] = '\0';
    return rc;
}

const char *torus_error_msg(void)
{
    return _err_msg;
}

void torus_error_clear(void)
{
    _err_msg[0] = '\0';
}
