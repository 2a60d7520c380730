/* trainer/comm/core/model.c: the shim from tcomm's enums to the one cost model
 * (topology/cost_model.c). Nothing is priced here. */
#include <stdlib.h>

#include "common/torus_error.h"
#include "trainer/comm/core/error.h"
#include "trainer/comm/core/model.h"

/* tcomm_model_calls: bumped by each call below, from any thread (the
 * theta trial prices on the caller's thread while nothing else runs, but
 * a tool may price on several). */
static unsigned long _calls;
#define _COUNT() __atomic_fetch_add(&_calls, 1, __ATOMIC_RELAXED)

unsigned long tcomm_model_calls(void)
{
    return __atomic_load_n(&_calls, __ATOMIC_RELAXED);
}

/* The model's algorithms are tcomm's, in the same order. */
_Static_assert((int)TORUS_COST_FLAT == (int)TCOMM_ALGO_FLAT &&
                   (int)TORUS_COST_RING == (int)TCOMM_ALGO_RING &&
                   (int)TORUS_COST_HIER == (int)TCOMM_ALGO_HIER &&
                   (int)TORUS_COST_HIER_RS == (int)TCOMM_ALGO_HIER_RS &&
                   (int)TORUS_COST_TORUS2D == (int)TCOMM_ALGO_TORUS2D,
               "torus_cost_algo and tcomm_algo differ");

void tcomm_model_defaults(tcomm_model_params *m, int P, int ranks_per_node)
{
    torus_cost_defaults(m);
    torus_cost_local_machine(m);
    m->P = P > 0 ? P : 1;
    m->ranks_per_node = ranks_per_node > 0 ? ranks_per_node : 1;
    m->rows = 1;
    m->cols = m->P;
    m->group_size = m->ranks_per_node;
}

tcomm_rc tcomm_model_defaults_env(tcomm_model_params *m, int P,
                                  int ranks_per_node)
{
    tcomm_model_defaults(m, P, ranks_per_node);
    const char *list = getenv("TCOMM_COST");
    /* The model records its message the common way; tcomm reports its own. */
    if (list && torus_cost_set_list(m, list, "TCOMM_COST"))
        return TCOMM_ERR_ENV;
    return TCOMM_OK;
}

double tcomm_model_time(const tcomm_model_params *m, tcomm_algo a, size_t count,
                        tcomm_wire wire)
{
    _COUNT();
    if (a < TCOMM_ALGO_FLAT || a > TCOMM_ALGO_TORUS2D)
        return -1.0;
    return torus_cost_time(m, (torus_cost_algo)a, count,
                           (int)tcomm_wire_bytes(wire));
}

int tcomm_model_pieces(int pipeline, double wire_bytes, int parts)
{
    _COUNT();
    return torus_cost_pieces(pipeline, wire_bytes, parts);
}

tcomm_algo tcomm_model_best(const tcomm_model_params *m, size_t count,
                            tcomm_wire wire)
{
    _COUNT();
    return (tcomm_algo)torus_cost_best(m, count, (int)tcomm_wire_bytes(wire));
}

double tcomm_model_link_limit(const tcomm_model_params *m, size_t count,
                              tcomm_wire wire)
{
    _COUNT();
    return torus_cost_link_limit(m, count, (int)tcomm_wire_bytes(wire));
}
