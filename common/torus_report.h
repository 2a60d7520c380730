/* common/torus_report.h: the one reporter of what is not an error (see
 * docs/ARCHITECTURE.md, "Errors").
 *
 * Contract:
 * - Library code never prints. What a user should hear about while the
 *   work goes on (a checkpoint passed over, an image rejected, a layout
 *   ignored, a progress line) goes to torus_warn, torus_note or
 *   torus_progress; errors still travel up as codes (torus_error.h).
 * - The program sets where the reports go, once, early in main
 *   (torus_report_set): a program name for the prefix and, optionally, its
 *   own sink. Without it, reports go to stderr prefixed with the process's
 *   name.
 * - The stderr sink writes whole lines: "PROG: warning: MSG",
 *   "PROG: MSG", and a progress line "\rPROG: MSG" that the next report
 *   ends with a newline first. Safe from several threads.
 * Layer 0: includes nothing of torus. */
#ifndef TORUS_COMMON_REPORT_H
#define TORUS_COMMON_REPORT_H

typedef enum {
    TORUS_REPORT_NOTE,     /* a fact the user asked for or needs */
    TORUS_REPORT_WARNING,  /* something went wrong and the work goes on */
    TORUS_REPORT_PROGRESS, /* a line that the next one overwrites */
    TORUS_REPORT_DONE      /* the last progress line: it stays */
} torus_report_kind;

/* A program's own sink: msg is the report without prefix or newline. */
typedef void (*torus_report_sink)(torus_report_kind kind, const char *msg);

/* prog: the prefix of the stderr sink (NULL: the process's name); sink:
 * NULL for the stderr sink. Call before starting threads. */
void torus_report_set(const char *prog, torus_report_sink sink);

void torus_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void torus_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* done: the last progress line, which stays on the screen. */
void torus_progress(int done, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
