/* core/names.c: the small pure helpers of the public API (layer core):
 * the names of algorithms and wires and their parsers, the bytes one value
 * takes on each wire, and the monotonic clock every timing uses. */
#include <string.h>
#include <time.h>

#include "trainer/comm/tcomm.h"

static const char *const _algo_names[TCOMM_ALGO_COUNT] = {
    "flat", "ring", "hier", "hier-rs", "torus2d", "hybrid"};
static const char *const _wire_names[TCOMM_WIRE_COUNT] = {"fp32", "fp16",
                                                          "bf16"};

const char *tcomm_algo_name(tcomm_algo a)
{
    return (unsigned)a < TCOMM_ALGO_COUNT ? _algo_names[a] : "?";
}

const char *tcomm_wire_name(tcomm_wire w)
{
    return (unsigned)w < TCOMM_WIRE_COUNT ? _wire_names[w] : "?";
}

int tcomm_algo_parse(const char *s)
{
    for (int i = 0; s && i < TCOMM_ALGO_COUNT; i++)
        if (strcmp(s, _algo_names[i]) == 0)
            return i;
    if (s && strcmp(s, "hier_rs") == 0)
        return TCOMM_ALGO_HIER_RS;
    return -1;
}

int tcomm_wire_parse(const char *s)
{
    for (int i = 0; s && i < TCOMM_WIRE_COUNT; i++)
        if (strcmp(s, _wire_names[i]) == 0)
            return i;
    return -1;
}

double tcomm_wtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t tcomm_wire_bytes(tcomm_wire w)
{
    return w == TCOMM_WIRE_FP32 ? 4 : 2;
}
