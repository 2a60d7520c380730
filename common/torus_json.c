/* common/torus_json.c: the project's rules over json-c (see torus_json.h).
 * json-c parses and escapes; what it lets through and torus refuses
 * (a key given twice, which json-c keeps silently as the last value, and a
 * \u0000 that would cut a C string) is checked here on the text that
 * json-c has already accepted as JSON. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "common/torus_json.h"

/* Each adder takes o NULL (a json-c allocation that failed) and does
 * nothing: the writer's torus_json_write_line(NULL) then fails. */
static void _num_text(json_object *o, const char *key, double v,
                      const char *text)
{
    if (o)
        json_object_object_add(o, key,
                           isfinite(v) ? json_object_new_double_s(v, text)
                                       : NULL);
}

void torus_json_fixed(json_object *o, const char *key, double v, int decimals)
{
    char t[400]; /* %f of DBL_MAX: 309 digits, and the decimals */
    snprintf(t, sizeof(t), "%.*f", decimals > 40 ? 40 : decimals, v);
    _num_text(o, key, v, t);
}

void torus_json_exact(json_object *o, const char *key, double v)
{
    char t[64];
    snprintf(t, sizeof(t), "%.17g", v);
    _num_text(o, key, v, t);
}

void torus_json_int64(json_object *o, const char *key, long long v)
{
    if (o)
        json_object_object_add(o, key, json_object_new_int64(v));
}

void torus_json_string(json_object *o, const char *key, const char *s)
{
    if (o)
        json_object_object_add(o, key, json_object_new_string(s));
}

const char *torus_json_text(json_object *o)
{
    /* NOSLASHESCAPE: "topology/tree", not "topology\/tree". */
    return json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

int torus_json_write_line(FILE *f, json_object *o)
{
    const char *s = o ? torus_json_text(o) : NULL;
    int rc = s && fprintf(f, "%s\n", s) >= 0 ? 0 : -1;
    if (!s)
        errno = ENOMEM;
    json_object_put(o);
    return rc;
}

int torus_json_read_line(FILE *f, const char *path, long *line, char *buf,
                         size_t cap, torus_json_rec *r)
{
    size_t n = 0;
    int c;
    *r = (torus_json_rec){.path = path, .line = *line + 1};
    while ((c = getc(f)) != EOF && c != '\n') {
        if (n == cap)
            return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: line longer than %zu "
                              "bytes", path, r->line, cap);
        if (!c)
            return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: a NUL byte at byte "
                              "%zu", path, r->line, n + 1);
        buf[n++] = (char)c;
    }
    if (ferror(f))
        return TORUS_FAIL(TORUS_JSON_EIO, "%s:%ld: read error: %s", path,
                          r->line, strerror(errno));
    if (c == EOF && !n)
        return 0;
    *line = r->line;
    if (c == EOF)
        return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: the last line has no "
                          "newline (a cut write?)", path, r->line);
    buf[n] = '\0';
    return torus_json_parse(buf, n, r);
}

static int _count_members(json_object *o, int flags, json_object *parent,
                          const char *key, size_t *index, void *arg)
{
    (void)parent, (void)key, (void)index;
    if (!(flags & JSON_C_VISIT_SECOND) && json_object_is_type(o, json_type_object))
        *(size_t *)arg += (size_t)json_object_object_length(o);
    return JSON_C_VISIT_RETURN_CONTINUE;
}

/* json-c keeps the last of a key given twice and cuts a key at \u0000. In
 * valid JSON every member has exactly one ':' outside strings, so fewer
 * members parsed than such colons means a duplicate. */
static int _check_text(const char *text, size_t len, const torus_json_rec *r)
{
    size_t colons = 0, members = 0;
    char q = 0; /* the open string's quote (json-c takes '...' too) */
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (!q) {
            q = c == '"' || c == '\'' ? c : 0;
            colons += c == ':';
        } else if (c == '\\') {
            if (len - i > 5 && !memcmp(text + i + 1, "u0000", 5))
                return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: \\u0000 in a "
                                  "string", r->path, r->line);
            i++;
        } else if (c == q) {
            q = 0;
        }
    }
    json_c_visit(r->obj, 0, _count_members, &members);
    if (members != colons)
        return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: a key given twice in one "
                          "object", r->path, r->line);
    return 0;
}

int torus_json_parse(const char *text, size_t len, torus_json_rec *r)
{
    r->obj = NULL;
    if (len > INT32_MAX)
        return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: %zu bytes of JSON: too "
                          "long", r->path, r->line, len);
    json_tokener *t = json_tokener_new_ex(TORUS_JSON_DEPTH);
    if (!t)
        return TORUS_FAIL(TORUS_JSON_EIO, "out of memory");
    json_tokener_set_flags(t, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *o = json_tokener_parse_ex(t, text, (int)len);
    enum json_tokener_error e = json_tokener_get_error(t);
    size_t end = json_tokener_get_parse_end(t);
    json_tokener_free(t);
    if (e == json_tokener_continue)
        return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: the JSON ends early (a "
                          "cut line?)", r->path, r->line);
    if (e != json_tokener_success || end != len) {
        json_object_put(o);
        return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: not JSON: %s at byte %zu",
                          r->path, r->line,
                          e ? json_tokener_error_desc(e) : "text after it",
                          end + 1);
    }
    r->obj = o;
    if (!json_object_is_type(o, json_type_object))
        return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: not a JSON object",
                          r->path, r->line);
    return _check_text(text, len, r);
}

void torus_json_rec_free(torus_json_rec *r)
{
    json_object_put(r->obj);
    r->obj = NULL;
}

int torus_json_has(const torus_json_rec *r, const char *key)
{
    json_object *x = NULL;
    return json_object_object_get_ex(r->obj, key, &x) && x;
}

/* The field key of type t (int also passes for double), or NULL with the
 * message recorded. */
static json_object *_get(const torus_json_rec *r, const char *key, json_type t,
                         const char *what)
{
    json_object *x = NULL;
    if (!json_object_object_get_ex(r->obj, key, &x) || !x) {
        TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: field \"%s\" is missing",
                   r->path, r->line, key);
        return NULL;
    }
    json_type have = json_object_get_type(x);
    if (have != t && !(t == json_type_double && have == json_type_int)) {
        TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: field \"%s\": %s, not %s",
                   r->path, r->line, key, json_type_to_name(have), what);
        return NULL;
    }
    return x;
}

int torus_json_int(const torus_json_rec *r, const char *key, long long lo,
                   long long hi, long long *v)
{
    json_object *x = _get(r, key, json_type_int, "an integer");
    if (!x)
        return TORUS_JSON_EBAD;
    /* json-c saturates an integer past int64 (and keeps one past
     * INT64_MAX as uint64): both land outside any range asked here. */
    *v = (long long)json_object_get_int64(x);
    if (*v < lo || *v > hi || *v == INT64_MAX || *v == INT64_MIN)
        return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: field \"%s\": %.40s is "
                          "not in [%lld, %lld]", r->path, r->line, key,
                          json_object_to_json_string(x), lo, hi);
    return 0;
}

int torus_json_num(const torus_json_rec *r, const char *key, double lo,
                   double hi, double *v)
{
    json_object *x = _get(r, key, json_type_double, "a number");
    if (!x)
        return TORUS_JSON_EBAD;
    *v = json_object_get_double(x);
    if (!isfinite(*v) || *v < lo || *v > hi ||
        (json_object_is_type(x, json_type_int) &&
         (json_object_get_int64(x) == INT64_MAX ||
          json_object_get_int64(x) == INT64_MIN)))
        return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: field \"%s\": %.40s is "
                          "not a number in [%g, %g]", r->path, r->line, key,
                          json_object_to_json_string(x), lo, hi);
    return 0;
}

int torus_json_str(const torus_json_rec *r, const char *key, char *buf,
                   size_t size)
{
    json_object *x = _get(r, key, json_type_string, "a string");
    if (!x)
        return TORUS_JSON_EBAD;
    size_t n = (size_t)json_object_get_string_len(x);
    if (n >= size)
        return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: field \"%s\": longer "
                          "than %zu bytes", r->path, r->line, key, size - 1);
    memcpy(buf, json_object_get_string(x), n + 1);
    return 0;
}

int torus_json_only(const torus_json_rec *r, const char *const *keys, int n)
{
    struct json_object_iterator it = json_object_iter_begin(r->obj),
                                end = json_object_iter_end(r->obj);
    for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
        const char *k = json_object_iter_peek_name(&it);
        int i = 0;
        while (i < n && strcmp(keys[i], k))
            i++;
        if (i == n)
            return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: unknown field "
                              "\"%.40s\"", r->path, r->line, k);
    }
    return 0;
}
