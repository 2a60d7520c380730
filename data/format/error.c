/* format/error.c: libtdata's error codes as words.
 * Messages follow common/torus_error.h: TORUS_FAIL at the point of failure
 * records one sentence per thread; the boundary (a tool's main, the
 * trainer) reports it once, read through torus_error_msg(). */
#include "data/format/tdata_format.h"

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
