/* format/textio.c: how libtdata opens its input files and reads and writes
 * the text ones (the index, torus-pack's listing and report).
 *
 * Promises (docs/shard-format.md, "Names and lines"):
 *   - an input is opened only when it is a regular file: O_NONBLOCK and
 *     fstat before anything reads it, so a FIFO, device or socket planted
 *     at a shard's, index's or listing's name is refused by name instead
 *     of blocking the reader (HDF5 would block inside H5Fopen);
 *   - a text line is read with a bound (TDATA_MAX_LINE) and never holds a
 *     NUL byte, so /dev/zero-like content or one huge line fails fast with
 *     the file and line;
 *   - a name written into a text file is escaped so that it cannot forge
 *     structure: control characters (C0, DEL, C1), bytes that are not
 *     UTF-8 and the backslash itself become \xHH (and, where the field is
 *     space-delimited, the space too). tdata_name_unescape undoes it
 *     exactly. A backslash that does not start \xHH reads as itself, so
 *     names written before the escaping existed read unchanged. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "data/format/format.h"

const char *tdata_file_kind(unsigned mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "not a file";
}

int tdata_open_regular(const char *path, int *fd_out, uint64_t *size)
{
    *fd_out = -1;
    /* O_NONBLOCK: opening a FIFO without a writer returns at once instead
     * of waiting for one; fstat then says what was opened. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return TORUS_FAIL(errno == ENOENT ? TDATA_EMISSING : TDATA_EIO,
                          "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return TORUS_FAIL(TDATA_EIO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return TORUS_FAIL(TDATA_EIO,
                          "%s: %s, not a regular file; refused (reading it "
                          "could block or never end)",
                          path, tdata_file_kind(st.st_mode));
    }
    /* Back to blocking reads: a regular file never blocks anyway, and
     * whoever takes the descriptor expects the usual semantics. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (size)
        *size = (uint64_t)st.st_size;
    *fd_out = fd;
    return TDATA_OK;
}

int tdata_fopen_regular(const char *path, FILE **out)
{
    int fd;
    *out = NULL;
    int rc = tdata_open_regular(path, &fd, NULL);
    if (rc)
        return rc;
    *out = fdopen(fd, "r");
    if (!*out) {
        int e = errno;
        close(fd);
        return TORUS_FAIL(TDATA_ENOMEM, "%s: %s", path, strerror(e));
    }
    return TDATA_OK;
}

void tdata_lines_init(tdata_lines *r, FILE *f, const char *path)
{
    memset(r, 0, sizeof *r);
    r->f = f;
    r->path = path;
}

void tdata_lines_free(tdata_lines *r)
{
    free(r->line);
    r->line = NULL;
}

int tdata_lines_next(tdata_lines *r, int *got)
{
    *got = 0;
    if (!r->line && !(r->line = malloc(TDATA_MAX_LINE + 1)))
        return TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for a line", r->path);
    size_t n = 0;
    int c = EOF;
    while ((c = getc_unlocked(r->f)) != EOF && c != '\n') {
        if (c == 0)
            return TORUS_FAIL(TDATA_EFORMAT, "%s:%d: NUL byte in a text line",
                              r->path, r->ln + 1);
        if (n == TDATA_MAX_LINE)
            return TORUS_FAIL(TDATA_EFORMAT,
                              "%s:%d: line longer than %d bytes (the "
                              "limit of a text line)",
                              r->path, r->ln + 1, TDATA_MAX_LINE);
        r->line[n++] = (char)c;
    }
    if (ferror(r->f))
        return TORUS_FAIL(TDATA_EIO, "%s:%d: %s", r->path, r->ln + 1,
                          strerror(errno));
    if (c == EOF && n == 0)
        return TDATA_OK;
    if (n > 0 && r->line[n - 1] == '\r')
        n--;
    r->line[n] = 0;
    r->len = n;
    r->ln++;
    *got = 1;
    return TDATA_OK;
}

/* Length of the well-formed UTF-8 sequence at p (at most n bytes), or 0:
 * no overlong forms, no surrogates, nothing past U+10FFFF. */
static size_t _utf8_len(const unsigned char *p, size_t n)
{
    if (p[0] < 0x80)
        return 1;
    size_t len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (len == 0 || p[0] > 0xf4 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return len;
}

/* 1 when the sequence of len bytes at p must be written as \xHH bytes. */
static int _must_escape(const unsigned char *p, size_t len, int flags)
{
    if (len == 0)
        return 1; /* not UTF-8 */
    if (len == 1)
        return p[0] < 0x20 || p[0] == 0x7f || p[0] == '\\' ||
               (p[0] == ' ' && (flags & TDATA_ESC_SPACE));
    return len == 2 && p[0] == 0xc2 && p[1] < 0xa0; /* C1: U+0080-U+009F */
}

char *tdata_name_escape(const char *name, int flags)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(name);
    if (n > (SIZE_MAX - 1) / 4)
        return NULL;
    char *out = malloc(4 * n + 1), *o = out;
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)name;
    while (*p) {
        size_t len =
            _utf8_len(p, n - (size_t)(p - (const unsigned char *)name));
        if (!_must_escape(p, len, flags)) {
            memcpy(o, p, len);
            o += len;
            p += len;
            continue;
        }
        for (size_t i = 0; i < (len ? len : 1); i++, p++) {
            *o++ = '\\';
            *o++ = 'x';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = 0;
    return out;
}

static int _hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int tdata_name_unescape(char *s)
{
    char *o = s;
    for (const char *p = s; *p;) {
        int hi, lo;
        if (p[0] == '\\' && p[1] == 'x' && (hi = _hexval(p[2])) >= 0 &&
            (lo = _hexval(p[3])) >= 0) {
            if (hi == 0 && lo == 0)
                return -1; /* a name cannot hold a NUL byte */
            *o++ = (char)(hi << 4 | lo);
            p += 4;
        } else {
            *o++ = *p++;
        }
    }
    *o = 0;
    return 0;
}
