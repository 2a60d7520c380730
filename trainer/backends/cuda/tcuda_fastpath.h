/* trainer/backends/cuda/tcuda_fastpath.h: what the cuda backend's fast
 * paths actually did (prefix tcuda_fastpath_), counted by the backend
 * where each call is issued, read by torus-train through the module
 * (tcuda_module.fastpath) and printed once at the end of a run as one
 * line that the device check (tests/gpu/run-gpu) parses:
 *
 *   fastpath: graph_capture=N graph_replay=N bn_ex=N bn_fallback=N
 *             conv_tuned=N conv_cached=N conv_heuristic=N
 *
 * (one line, single spaces.) Plain C with no CUDA type, so that the
 * program that formats it links no CUDA library.
 *
 * graph_capture: step graphs recorded and instantiated (cuda_graph.c);
 * graph_replay: their launches. bn_ex: BatchNorm calls issued through
 * cuDNN's Ex API (forward and backward, training; a replayed graph runs
 * its recorded calls again without counting them). bn_fallback: BN calls
 * issued through the legacy call because cuDNN declined the Ex call that
 * the plan chose (at plan or at run time); BNs planned on the legacy path
 * (FP32 mode, TCUDA_BN_EX=0) are not fallbacks. conv_tuned, conv_cached,
 * conv_heuristic: convolution algorithms chosen by measuring, from the
 * tune cache, and from cuDNN's heuristics (cuda_layers.c). */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_FASTPATH_H
#define TORUS_TRAINER_BACKENDS_CUDA_FASTPATH_H

#include <stddef.h>

typedef struct tcuda_fastpath {
    unsigned long graph_capture, graph_replay;
    unsigned long bn_ex, bn_fallback;
    unsigned long conv_tuned, conv_cached, conv_heuristic;
} tcuda_fastpath;

/* The line above (no newline) into buf of n bytes; the length it needs,
 * as snprintf. */
int tcuda_fastpath_format(const tcuda_fastpath *c, char *buf, size_t n);

#endif
