/* error.c: per-thread error messages for libtdata.
 * Functions return a TDATA_E* code and leave one human sentence here, so the
 * boundary (a tool's main, the trainer) reports the error exactly once. */
#include <stdarg.h>
#include <stdio.h>

#include "data/tdata.h"
#include "data/tdata_internal.h"

static _Thread_local char _msg[1024];

const char *tdata_errmsg(void)
{
    return _msg;
}

int tdata_seterr(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(_msg, sizeof _msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *tdata_strerror(int code)
{
    switch (code) {
    case TDATA_OK:
        return "success";
    case TDATA_EIO:
        return "I/O error";
    case TDATA_EFORMAT:
        return "bad format";
    case TDATA_EVERSION:
        return "newer format version";
    case TDATA_EMISMATCH:
        return "index and shard disagree";
    case TDATA_EMISSING:
        return "missing shard";
    case TDATA_ETRUNCATED:
        return "truncated shard";
    case TDATA_EDECODE:
        return "undecodable image";
    case TDATA_ECRC:
        return "CRC32C mismatch";
    case TDATA_ETOOMANYBAD:
        return "too many bad samples";
    case TDATA_EINVAL:
        return "invalid argument";
    case TDATA_ENOMEM:
        return "out of memory";
    default:
        return "unknown error";
    }
}
