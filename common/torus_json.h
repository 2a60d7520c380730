/* common/torus_json.h: every JSON file torus writes or reads goes through
 * json-c (the library Slurm uses); this header adds the project's rules on
 * top of it, so each writer and reader states only its fields.
 *
 * Contract:
 * - Writing: build a json_object, add numbers with the helpers below (a
 *   fixed number of decimals or %.17g, kept as text so files stay
 *   byte-compatible with what the readers and tests expect; a non-finite
 *   value is written as null), then torus_json_write_line() writes the
 *   object compact, on one line, with one fputs, and releases it.
 * - Reading: files are hostile. torus_json_read_line() reads one line of at
 *   most `cap` bytes (a longer line, a NUL byte or a last line without its
 *   newline is an error, not a silent cut) and parses it as one JSON object:
 *   strict JSON, valid UTF-8, at most TORUS_JSON_DEPTH levels, no duplicate
 *   key, no \u0000, nothing after the object. The typed getters
 *   (torus_json_int/_num/_str) require the field, its type and its range.
 *   Every failure returns TORUS_JSON_EBAD with one TORUS_FAIL message that
 *   names the file and line ("PATH:LINE: ..."); callers return their own
 *   code on top without a second message.
 * Layer 0: includes nothing of torus but the error convention. */
#ifndef TORUS_COMMON_JSON_H
#define TORUS_COMMON_JSON_H

#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>
#include <json-c/json_visit.h>

enum { TORUS_JSON_EBAD = 1, TORUS_JSON_EIO = 2 };

/* Deepest nesting a reader accepts (torus's own files have 3 levels). */
#define TORUS_JSON_DEPTH 8

/* o[key] = v as text with `decimals` decimals (%.*f), or null when v is
 * not finite. */
void torus_json_fixed(json_object *o, const char *key, double v, int decimals);
/* o[key] = v as %.17g (exact round trip), or null when not finite. */
void torus_json_exact(json_object *o, const char *key, double v);
/* o[key] = integer v / string s (copied). */
void torus_json_int64(json_object *o, const char *key, long long v);
void torus_json_string(json_object *o, const char *key, const char *s);

/* The object as compact JSON on one line, without the newline, in a
 * buffer owned by o (valid until o changes or is released); NULL when out
 * of memory. */
const char *torus_json_text(json_object *o);
/* Writes o's text and a newline to f with one call (so lines of
 * processes appending to one file do not interleave), then releases o
 * (also on error).
 * Returns 0, or -1 with errno set. */
int torus_json_write_line(FILE *f, json_object *o);

/* One parsed line: the object and where it came from, for messages. */
typedef struct {
    json_object *obj;
    const char *path;
    long line;
} torus_json_rec;

/* Reads and parses f's next line (counted in *line) into r (release with
 * torus_json_rec_free). buf (cap + 1 bytes) holds the text. Returns 0 with
 * r->obj NULL at the end of the file, 0 with the object, or an error. */
int torus_json_read_line(FILE *f, const char *path, long *line, char *buf,
                         size_t cap, torus_json_rec *r);
/* Parses text (len bytes, one JSON object) with the rules above. */
int torus_json_parse(const char *text, size_t len, torus_json_rec *r);
void torus_json_rec_free(torus_json_rec *r);

/* 1 when r has field key with a value other than null (the getters
 * below take null for missing). */
int torus_json_has(const torus_json_rec *r, const char *key);
/* The field, required: an integer in [lo, hi]; a number (integer or not,
 * finite) in [lo, hi]; a string of at most size - 1 bytes. */
int torus_json_int(const torus_json_rec *r, const char *key, long long lo,
                   long long hi, long long *v);
int torus_json_num(const torus_json_rec *r, const char *key, double lo,
                   double hi, double *v);
int torus_json_str(const torus_json_rec *r, const char *key, char *buf,
                   size_t size);
/* The object has no field but those of keys[0..n-1]. */
int torus_json_only(const torus_json_rec *r, const char *const *keys, int n);

#endif
