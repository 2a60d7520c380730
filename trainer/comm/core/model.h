/* trainer/comm/core/model.h: libtcomm's names for the one alpha-beta cost model, which
 * lives in topology/torus_cost.h (libtoruscost) so that the plugin's grid
 * choice and tcomm's hybrid pick read the same struct through the same
 * functions. This shim only maps tcomm's enums (tcomm_algo, tcomm_wire) to
 * the model's; every number comes from topology/cost_model.c. */
#ifndef TORUS_TCOMM_COST_MODEL_H
#define TORUS_TCOMM_COST_MODEL_H

#include <stddef.h>

#include "topology/torus_cost.h"
#include "trainer/comm/tcomm.h"

typedef torus_cost_link_t tcomm_link;
typedef torus_cost_t tcomm_model_params;

#define TCOMM_MODEL_INPLACE_ROWS   TORUS_COST_INPLACE_ROWS
#define TCOMM_MODEL_INPLACE_GROUPS TORUS_COST_INPLACE_GROUPS

/* The model's defaults with this project's test machine as the machine
 * (torus_cost_local_machine), P ranks, ranks_per_node to a node, one row,
 * groups of a node; then TCOMM_COST (the plugstack keys, "k=v,k=v") if
 * set. Returns TCOMM_ERR_ENV for a bad TCOMM_COST. */
tcomm_rc tcomm_model_defaults_env(tcomm_model_params *m, int P,
                                  int ranks_per_node);
/* The same without the environment (tests, torus-bench presets). */
void tcomm_model_defaults(tcomm_model_params *m, int P, int ranks_per_node);

double tcomm_model_time(const tcomm_model_params *m, tcomm_algo a, size_t count,
                        tcomm_wire wire);
int tcomm_model_pieces(int pipeline, double wire_bytes, int parts);
tcomm_algo tcomm_model_best(const tcomm_model_params *m, size_t count,
                            tcomm_wire wire);
double tcomm_model_link_limit(const tcomm_model_params *m, size_t count,
                              tcomm_wire wire);
/* How many times this process has asked the model (the four calls above
 * count; setting defaults does not). The buckets' routes are resolved at
 * seal (fusion/plan.h), so a training step adds nothing to it: the unit
 * and integration tests read it before and after steps. */
unsigned long tcomm_model_calls(void);

#endif
