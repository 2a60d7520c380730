/*
 * fuzz_json.c: libFuzzer target for torus's JSON readers, all over json-c
 * through common/torus_json.c: the sweep's results file
 * (tsweep_results_read, checked against a fixed 18-task plan), a task's
 * metrics as the sweep reads them (tsweep_outcome, tsweep_diverged), and
 * torus_json_parse on the raw bytes with every typed getter. The input is
 * written to a file under TMPDIR (the readers take paths, as in use). Any
 * input must end in 0 or an error with a message: never a crash, a
 * sanitizer report or a leak. Built by hand or by `make fuzz-smoke`:
 *
 *   make fuzz-json && tests/fuzz/fuzz_json -max_total_time=60 \
 *       tests/fuzz/corpus-json
 *
 * The first input byte picks the reader; the rest is the file.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_json.h"
#include "trainer/sweep/tsweep.h"

static tsweep_plan _p;
static char _path[512];

static void _init(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(_path, sizeof _path, "%s/fuzz_json.%d.jsonl", t ? t : "/tmp",
             (int)getpid());
    tsweep_plan_defaults(&_p);
    _p.target = 80;
    _p.trials = 3;
    if (tsweep_parse_batches(&_p, "32:128") ||
        tsweep_add_recipe(&_p, "sgd=--warmup-epochs 0") ||
        tsweep_add_recipe(&_p, "lars=--lars --lr 2") ||
        tsweep_plan_expand(&_p))
        abort(); /* the fixed plan is valid: a failure is a bug */
}

/* Every getter on every field of a parsed object; each must return 0 or
 * an error, whatever the types. */
static void _getters(const uint8_t *d, size_t n)
{
    torus_json_rec r = {.path = "input", .line = 1};
    if (torus_json_parse((const char *)d, n, &r) == 0) {
        static const char *const keys[] = {"task", "top1", "recipe", "x"};
        char s[16];
        long long i;
        double v;
        for (int k = 0; k < 4; k++) {
            (void)torus_json_has(&r, keys[k]);
            (void)torus_json_int(&r, keys[k], -5, 5, &i);
            (void)torus_json_num(&r, keys[k], -1e9, 1e9, &v);
            (void)torus_json_str(&r, keys[k], s, sizeof s);
        }
        (void)torus_json_only(&r, keys, 4);
    }
    torus_json_rec_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!_path[0])
        _init();
    if (size < 1)
        return 0;
    uint8_t pick = data[0] % 4;
    if (pick == 3) {
        _getters(data + 1, size - 1);
        return 0;
    }
    FILE *f = fopen(_path, "w");
    if (!f)
        return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    if (pick == 0) {
        tsweep_result *r = NULL;
        int n = 0;
        int rc = tsweep_results_read(_path, &_p, &r, &n);
        if (rc && !torus_error_msg()[0])
            abort(); /* an error without its message */
        free(r);
    } else if (pick == 1) {
        tsweep_result r = {.task = 4};
        (void)tsweep_outcome(_path, data[0] & 0x80 ? 50 : -1, &r);
    } else {
        int d;
        (void)tsweep_diverged(_path, &d);
    }
    unlink(_path);
    torus_error_clear();
    return 0;
}
