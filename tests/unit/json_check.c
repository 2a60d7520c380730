/* json_check.c: reads a JSON file torus wrote back through json-c
 * (common/torus_json.h, the readers' own rules: strict JSON, no duplicate
 * key, one object per line) and checks each object's schema (every field
 * present, with its JSON type; null only for a number), so a writer
 * that stops going through the library, or drops or retypes a field, fails
 * the test that produced the file. Used by the tests that make the files
 * for real: torus_layout_cli.sh (layout), comm_bench.sh (bench),
 * sweep_cluster.sh (results, metrics).
 *
 *   json_check KIND FILE     KIND: layout | bench | metrics | results
 *
 * Prints "ok: N objects" and exits 0, or the first error (naming the file
 * and line) and exits 1. */
#include <stdio.h>
#include <string.h>

#include "common/torus_error.h"
#include "common/torus_json.h"

#define _CAP 65536

/* The fields every record of a kind has, and their JSON types. */
typedef struct {
    const char *key;
    json_type type;
} _field;

static int _fields(const torus_json_rec *r, const _field *f, int n)
{
    for (int i = 0; i < n; i++) {
        json_object *x = NULL;
        /* Absent is not null: every field is required; a present null
         * stands for a number that was not finite. */
        if (!json_object_object_get_ex(r->obj, f[i].key, &x))
            return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: no \"%s\"", r->path,
                              r->line, f[i].key);
        json_type t = json_object_get_type(x);
        if (t != f[i].type && !(f[i].type == json_type_double &&
                                (t == json_type_int || t == json_type_null)))
            return TORUS_FAIL(TORUS_JSON_EBAD, "%s:%ld: \"%s\" is %s, not %s",
                              r->path, r->line, f[i].key,
                              json_type_to_name(t),
                              json_type_to_name(f[i].type));
    }
    return 0;
}
#define _FIELDS(r, f) _fields(r, f, (int)(sizeof(f) / sizeof(f[0])))

/* torus-layout --json: dims [R, C], every task placed inside them. */
static int _layout(const torus_json_rec *r)
{
    static const _field f[] = {{"dims", json_type_array},
                               {"source", json_type_string},
                               {"groups", json_type_array},
                               {"tasks", json_type_array}};
    static const _field task[] = {{"procid", json_type_int},
                                  {"node", json_type_string},
                                  {"row", json_type_int},
                                  {"col", json_type_int},
                                  {"group", json_type_int}};
    if (_FIELDS(r, f))
        return 1;
    json_object *dims = json_object_object_get(r->obj, "dims"),
                *tasks = json_object_object_get(r->obj, "tasks");
    if (json_object_array_length(dims) != 2)
        return TORUS_FAIL(1, "%s:%ld: dims is not [R, C]", r->path, r->line);
    long long rows = json_object_get_int64(json_object_array_get_idx(dims, 0)),
              cols = json_object_get_int64(json_object_array_get_idx(dims, 1));
    for (size_t i = 0; i < json_object_array_length(tasks); i++) {
        torus_json_rec t = {json_object_array_get_idx(tasks, i), r->path,
                            r->line};
        long long v;
        if (_FIELDS(&t, task) ||
            torus_json_int(&t, "procid", (long long)i, (long long)i, &v) ||
            torus_json_int(&t, "row", 0, rows - 1, &v) ||
            torus_json_int(&t, "col", 0, cols - 1, &v))
            return 1;
    }
    return 0;
}

static int _bench(const torus_json_rec *r)
{
    static const _field f[] = {{"ranks", json_type_int},
                               {"nodes", json_type_int},
                               {"grid", json_type_string},
                               {"algo", json_type_string},
                               {"wire", json_type_string}};
    /* a size sweep row or a --resnet50 row */
    static const _field sweep[] = {{"size", json_type_int},
                                   {"count", json_type_int}};
    static const _field model[] = {{"mode", json_type_string},
                                   {"time_ms", json_type_double},
                                   {"busbw_GBps", json_type_double},
                                   {"wire_bytes", json_type_int}};
    return _FIELDS(r, f) || (torus_json_has(r, "mode") ? _FIELDS(r, model)
                                                       : _FIELDS(r, sweep));
}

/* One of torus-train's records or the sweep's mark. */
static int _metrics(const torus_json_rec *r)
{
    static const _field step[] = {
        {"epoch", json_type_int},         {"step", json_type_int},
        {"global_step", json_type_int},   {"images_per_s", json_type_double},
        {"loss", json_type_double},       {"lr", json_type_double},
        {"global_batch", json_type_int},  {"data_wait", json_type_double},
        {"comm_wait", json_type_double}};
    static const _field eval[] = {
        {"epoch", json_type_int},       {"global_step", json_type_int},
        {"top1", json_type_double},     {"top5", json_type_double},
        {"test_loss", json_type_double}, {"time", json_type_double}};
    static const _field target[] = {{"target_top1", json_type_double},
                                    {"global_step", json_type_int},
                                    {"top1", json_type_double},
                                    {"time", json_type_double}};
    static const _field div[] = {{"diverged", json_type_int},
                                 {"global_step", json_type_int}};
    static const _field mark[] = {{"sweep_time_before", json_type_double}};
    if (torus_json_has(r, "sweep_time_before"))
        return _FIELDS(r, mark);
    if (torus_json_has(r, "diverged"))
        return _FIELDS(r, div);
    if (torus_json_has(r, "target_top1"))
        return _FIELDS(r, target);
    return torus_json_has(r, "top5") ? _FIELDS(r, eval) : _FIELDS(r, step);
}

static int _results(const torus_json_rec *r)
{
    static const _field f[] = {
        {"task", json_type_int},   {"batch", json_type_int},
        {"recipe", json_type_string}, {"trial", json_type_int},
        {"lr", json_type_double},  {"reached", json_type_int},
        {"steps", json_type_int},  {"time", json_type_double},
        {"top1", json_type_double}};
    return _FIELDS(r, f);
}

int main(int argc, char **argv)
{
    static char buf[_CAP + 1];
    static const struct {
        const char *kind;
        int (*check)(const torus_json_rec *);
    } kinds[] = {{"layout", _layout},
                 {"bench", _bench},
                 {"metrics", _metrics},
                 {"results", _results}};
    int k = 0;
    while (argc == 3 && k < 4 && strcmp(argv[1], kinds[k].kind))
        k++;
    if (argc != 3 || k == 4) {
        fprintf(stderr, "usage: json_check layout|bench|metrics|results FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    long line = 0, n = 0;
    int rc = 0;
    for (;;) {
        torus_json_rec r;
        rc = torus_json_read_line(f, argv[2], &line, buf, _CAP, &r) ||
             (r.obj && kinds[k].check(&r));
        int end = rc || !r.obj;
        n += !end;
        torus_json_rec_free(&r);
        if (end)
            break;
    }
    fclose(f);
    if (rc || !n) {
        fprintf(stderr, "json_check: %s\n",
                rc ? torus_error_msg() : "no JSON object in the file");
        return 1;
    }
    printf("ok: %ld %s objects\n", n, argv[1]);
    return 0;
}
