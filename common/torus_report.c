/* common/torus_report.c: the reporter behind torus_warn, torus_note and
 * torus_progress (torus_report.h). One process-wide sink, set by the
 * program; the stderr sink serialises lines under a lock so that reports
 * from the loader's threads and the progress line do not interleave. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/torus_report.h"

static const char *_prog;
static torus_report_sink _sink;
static pthread_mutex_t _lock = PTHREAD_MUTEX_INITIALIZER;
static int _open_progress; /* a progress line waits for its newline */

void torus_report_set(const char *prog, torus_report_sink sink)
{
    _prog = prog;
    _sink = sink;
}

static void _stderr_sink(torus_report_kind kind, const char *msg)
{
    const char *prog = _prog ? _prog : program_invocation_short_name;
    pthread_mutex_lock(&_lock);
    if (kind == TORUS_REPORT_PROGRESS || kind == TORUS_REPORT_DONE) {
        fprintf(stderr, "\r%s: %s%s", prog, msg,
                kind == TORUS_REPORT_DONE ? "\n" : "");
        _open_progress = kind == TORUS_REPORT_PROGRESS;
    } else {
        fprintf(stderr, "%s%s: %s%s\n", _open_progress ? "\n" : "", prog,
                kind == TORUS_REPORT_WARNING ? "warning: " : "", msg);
        _open_progress = 0;
    }
    fflush(stderr);
    pthread_mutex_unlock(&_lock);
}

static void _report(torus_report_kind kind, const char *fmt, va_list ap)
{
    char msg[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
    (_sink ? _sink : _stderr_sink)(kind, msg);
}

void torus_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _report(TORUS_REPORT_WARNING, fmt, ap);
    va_end(ap);
}

void torus_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _report(TORUS_REPORT_NOTE, fmt, ap);
    va_end(ap);
}

void torus_progress(int done, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _report(done ? TORUS_REPORT_DONE : TORUS_REPORT_PROGRESS, fmt, ap);
    va_end(ap);
}
