/*
 * spec.c: the --torus spec ("auto", "off", "RxC"), error texts and the strict
 * number parser every other parser in the library builds on.
 *
 * The spec arrives from users (srun --torus, #SBATCH, the environment), so
 * it is parsed strictly: bounded length, digits only, no silent clamping.
 */
#include "config.h"

#include <string.h>

#include "topology/internal.h"

const char *torus_layout_strerror(torus_layout_rc rc)
{
    switch (rc) {
    case TORUS_LAYOUT_OK:
        return "success";
    case TORUS_LAYOUT_EINVAL:
        return "invalid input";
    case TORUS_LAYOUT_ENOFIT:
        return "spec does not fit the step";
    case TORUS_LAYOUT_ENOMEM:
        return "out of memory";
    case TORUS_LAYOUT_EIO:
        return "cannot read file";
    case TORUS_LAYOUT_ERANGE:
        return "input too large";
    }
    return "unknown error";
}

bool torus_layout_parse_uint(const char *p, const char *end, uint64_t max,
                             uint64_t *out)
{
    uint64_t v = 0;
    if (p >= end)
        return false;
    /* A leading zero is allowed only as the number 0 itself ("08" is more
     * likely a typo than an intent, and strtoul would read it as octal). */
    if (*p == '0' && end - p > 1)
        return false;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return false;
        unsigned d = (unsigned)(*p - '0');
        if (v > (max - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

torus_layout_rc torus_layout_spec_parse(const char *text,
                                        torus_layout_spec_t *out)
{
    if (!text || !*text)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "empty spec (expected auto, off or RxC)");
    size_t len = strnlen(text, TORUS_LAYOUT_SPEC_MAX + 1);
    if (len > TORUS_LAYOUT_SPEC_MAX)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL, "spec longer than %d characters",
                          TORUS_LAYOUT_SPEC_MAX);
    if (strcmp(text, "auto") == 0) {
        *out = (torus_layout_spec_t){.kind = TORUS_SPEC_AUTO};
        return TORUS_LAYOUT_OK;
    }
    if (strcmp(text, "off") == 0) {
        *out = (torus_layout_spec_t){.kind = TORUS_SPEC_OFF};
        return TORUS_LAYOUT_OK;
    }
    const char *x = memchr(text, 'x', len);
    uint64_t r, c;
    if (!x || !torus_layout_parse_uint(text, x, TORUS_LAYOUT_TASKS_MAX, &r) ||
        !torus_layout_parse_uint(x + 1, text + len, TORUS_LAYOUT_TASKS_MAX, &c))
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "'%s' is not auto, off or RxC (e.g. 4x8)", text);
    if (r == 0 || c == 0)
        return TORUS_FAIL(TORUS_LAYOUT_EINVAL,
                          "'%s': rows and columns must be at least 1", text);
    if (r * c > TORUS_LAYOUT_TASKS_MAX)
        return TORUS_FAIL(TORUS_LAYOUT_ERANGE, "'%s': more than %u tasks", text,
                          TORUS_LAYOUT_TASKS_MAX);
    *out = (torus_layout_spec_t){
        .kind = TORUS_SPEC_EXPLICIT, .rows = (uint32_t)r, .cols = (uint32_t)c};
    return TORUS_LAYOUT_OK;
}

void torus_layout_spec_format(const torus_layout_spec_t *spec, char *buf,
                              size_t len)
{
    switch (spec->kind) {
    case TORUS_SPEC_OFF:
        snprintf(buf, len, "off");
        break;
    case TORUS_SPEC_AUTO:
        snprintf(buf, len, "auto");
        break;
    case TORUS_SPEC_EXPLICIT:
        snprintf(buf, len, "%ux%u", (unsigned)spec->rows, (unsigned)spec->cols);
        break;
    }
}

uint64_t torus_layout_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}
