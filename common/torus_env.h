/* common/torus_env.h: the names of the TORUS_* environment contract, defined
 * once. spank_torus.so (plugins/remote.c) sets them in every task; libtcomm
 * (trainer/comm/core/layout_env.c) reads them back. Both include this header,
 * so the writer and the reader cannot drift apart. The meaning of each value is
 * in docs/env-contract.md.
 *
 * The names are string-literal macros so they can be pasted into messages
 * ("TORUS_COORD='%s' ..."). Layer 0: includes nothing. */
#ifndef TORUS_COMMON_ENV_H
#define TORUS_COMMON_ENV_H

#define TORUS_ENV_VERSION    "TORUS_VERSION"    /* contract version: "1" */
#define TORUS_ENV_DIMS       "TORUS_DIMS"       /* "RxC" */
#define TORUS_ENV_COORD      "TORUS_COORD"      /* "r,c" of this task */
#define TORUS_ENV_GROUP      "TORUS_GROUP"      /* this task's node group */
#define TORUS_ENV_NGROUPS    "TORUS_NGROUPS"    /* groups in the step */
#define TORUS_ENV_NODE_INDEX "TORUS_NODE_INDEX" /* node's torus position */
#define TORUS_ENV_SOURCE     "TORUS_SOURCE" /* where the topology came from */

/* GPUs and rails: set only when the step has GPUs (docs/env-contract.md,
 * "GPUs per node"). TORUS_LOCAL_GPU is the task's GPU as an index into the
 * devices the task sees (CUDA_VISIBLE_DEVICES order); TORUS_NIC is the NIC
 * (rail) of the task's column, set only with plugstack nics=. */
#define TORUS_ENV_LOCAL_GPU     "TORUS_LOCAL_GPU"
#define TORUS_ENV_GPUS_PER_NODE "TORUS_GPUS_PER_NODE"
#define TORUS_ENV_NIC           "TORUS_NIC"

/* Read by torus's programs, set by users: the folders (colon-separated)
 * searched before $(pkglibdir) for a loadable backend module
 * (trainer/backends/registry.c; the cuda backend's torus_cuda.so). */
#define TORUS_ENV_BACKEND_PATH "TORUS_BACKEND_PATH"

/* The one version this tree writes and understands. */
#define TORUS_ENV_VERSION_VALUE "1"

#endif
