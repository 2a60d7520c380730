/* layout_env.h: where each rank sits (grid row/column, node group), from the
 * TORUS_* env contract, from --grid/--group-size, or one row per node.
 * Pure functions with no MPI or PMIx, so unit tests drive them directly. */
#ifndef TORUS_TCOMM_LAYOUT_ENV_H
#define TORUS_TCOMM_LAYOUT_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/comm/tcomm.h"

/* The TORUS_* variables as parsed; present = 0 when none is set. */
typedef struct {
    int present;
    int rows, cols, row, col;
    int group, ngroups; /* -1 when TORUS_GROUP is absent */
    int node_index;     /* -1 when absent */
    char source[48];
} tcomm_env_layout;

/* Where the layout came from. */
enum {
    TCOMM_SRC_ENV = 1,
    TCOMM_SRC_OPTIONS = 2,
    TCOMM_SRC_NODES = 4,
    TCOMM_SRC_GROUP_OPT = 8
};

/* One rank's place, exchanged with every rank at start-up. */
typedef struct {
    int32_t rank, node, local_rank, local_size;
    int32_t rows, cols, row, col;
    int32_t group, ngroups;
    int32_t node_index; /* TORUS_NODE_INDEX, or -1 */
} tcomm_place;

typedef const char *(*tcomm_getenv_fn)(const char *name);

/* Strictly parse TORUS_DIMS, TORUS_COORD, TORUS_GROUP, TORUS_NGROUPS,
 * TORUS_NODE_INDEX, TORUS_VERSION, TORUS_SOURCE through get (getenv in
 * production). A bad value is TCOMM_ERR_ENV naming the variable. */
tcomm_rc tcomm_layout_parse_env(tcomm_getenv_fn get, tcomm_env_layout *out);

/* Parse "RxC" and a positive count (also used for the --grid option). */
tcomm_rc tcomm_parse_dims(const char *what, const char *s, int *r, int *c);
tcomm_rc tcomm_parse_count(const char *what, const char *s, int max, int *v);

/* This rank's place before the exchange: from env, options or its node. */
tcomm_rc tcomm_layout_place(const tcomm_env_layout *env,
                            const tcomm_options *opt, int rank, int size,
                            int node, int local_rank, int local_size,
                            tcomm_place *me, int *src);

/* After every rank's place is known (all[i] is rank i): check and finish
 * the layout identically on every rank. For the per-node default it numbers
 * the rows by node and falls back to one 1 x P row when nodes hold different
 * task counts. A bad TORUS_* layout (duplicate or out-of-range coordinates,
 * R*C != P, disagreeing dims) is TCOMM_ERR_ENV naming a rank. */
tcomm_rc tcomm_layout_finish(tcomm_place *all, int size, int src, char *note,
                             size_t notelen);

#endif
