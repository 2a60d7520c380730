/* trainer/backends/cuda/cuda_tune.h: measured convolution algorithms and
 * the tune cache file (prefix tcuda_tune_), plain C with no CUDA type, so
 * that make check tests it without a GPU (tests/unit/test_cuda_host.c)
 * with a stand-in for cuDNN.
 *
 * Contract: cuDNN is reached only through tcuda_tune_ops, a table of
 * three calls (measure a key's algorithms, cuDNN's heuristic choice, the
 * workspace an algorithm needs). tcuda_tune_resolve answers each key once
 * per tuner, from, in order: this run's answers; TCUDA_TUNE=0 (tune == 0):
 * the heuristics; an entry of the cache file whose algorithm cuDNN still
 * offers for the shape within the workspace limit (its workspace is
 * cuDNN's, never the file's); else a measurement, the fastest result
 * with status success within the limit (in deterministic mode, the
 * fastest deterministic one), its math type taken from the result; if
 * the measurement gives nothing usable, the heuristics (said once). It
 * counts each answer as tuned, cached or heuristic.
 *
 * The file is hostile input. Text, one entry per line, each with an
 * FNV-1a checksum of its text:
 *   torus-conv-algos 1
 *   device GPU_NAME sms=N cudnn=V
 *   entries N
 *   E dir n c h w k kh kw sh sw ph pw dtype layout det algo math #xxxxxxxx
 * It is read only up to TCUDA_TUNE_MAX_BYTES, after its size is checked;
 * a file of another format or version, of another GPU model or SM count,
 * or of another cuDNN version is said and ignored as a whole (every key
 * re-tuned); a bad entry (checksum, field count, a number out of range,
 * an algorithm id past the direction's count, a duplicate) is said with
 * its line number and dropped; an entries count over TCUDA_TUNE_MAX_ENTRIES
 * or other than the lines found is said (truncated). Nothing in the file
 * can make the tuner allocate more than the file's checked size allows.
 * tcuda_tune_save writes every entry of this mode known (the file's
 * other shapes included; the other mode's entries are not kept) to
 * FILE.tmp.PID and renames it over FILE; a failure to write is said
 * and the run goes on. Errors: TENG_ENOMEM after TORUS_FAIL; problems
 * with the file are warnings (torus_warn), never errors. */
#ifndef TORUS_TRAINER_BACKENDS_CUDA_TUNE_H
#define TORUS_TRAINER_BACKENDS_CUDA_TUNE_H

#include <stddef.h>

#include "trainer/backends/cuda/cuda_algo.h"

#define TCUDA_TUNE_MAX_BYTES   ((size_t)4 << 20)
#define TCUDA_TUNE_MAX_ENTRIES 65536

/* One measured algorithm (cudnnConvolution*AlgoPerf_t, without CUDA). */
typedef struct {
    int algo;
    int ok;            /* status CUDNN_STATUS_SUCCESS */
    int math;          /* cudnnMathType_t */
    int deterministic; /* CUDNN_DETERMINISTIC */
    size_t memory;     /* workspace bytes */
    float ms;
} tcuda_tune_result;

typedef struct tcuda_tune_ops {
    void *ctx;
    /* Measures key's algorithms: up to max results, fastest first; the
     * number, or -1 when cuDNN fails. */
    int (*find)(void *ctx, const tcuda_algo_key *key, tcuda_tune_result *r,
                int max);
    /* cuDNN's heuristic choice (algo, math, workspace): 0, or -1. */
    int (*heuristic)(void *ctx, const tcuda_algo_key *key, tcuda_algo_val *out);
    /* The workspace algo needs with math for key: 0, or -1 when cuDNN
     * does not offer it for the shape. */
    int (*workspace)(void *ctx, const tcuda_algo_key *key, int algo, int math,
                     size_t *bytes);
    /* Algorithm ids per direction (TCUDA_FWD..): the *_ALGO_COUNTs; math
     * types: ids below nmath. */
    int nalgo[3], nmath;
} tcuda_tune_ops;

/* What a cache file must match: the GPU model, its SM count, cuDNN's
 * version (cudnnGetVersion). */
typedef struct {
    char gpu[64];
    int sms;
    long cudnn;
} tcuda_tune_device;

typedef struct {
    tcuda_tune_ops ops;
    tcuda_tune_device dev;
    int tune;              /* 0: heuristics only (TCUDA_TUNE=0) */
    int deterministic;     /* only deterministic algorithms */
    size_t ws_max;         /* the workspace limit */
    char *path;            /* the cache file, or NULL: none */
    tcuda_algo_cache mem;  /* this run's answers */
    tcuda_algo_cache file; /* the file's valid entries */
    int dirty;             /* tuned something the file lacks */
    int said_fallback;
    unsigned long tuned, cached, heuristic;
} tcuda_tuner;

/* Sets t up and loads path (NULL: no file) if it exists. TENG_OK or
 * TENG_ENOMEM; the file's problems are warnings. */
int tcuda_tune_open(tcuda_tuner *t, const char *path,
                    const tcuda_tune_device *dev, const tcuda_tune_ops *ops,
                    int tune, int deterministic, size_t ws_max);
/* Loads a cache file into t->file (after dropping what it held): the
 * number of entries accepted, 0 when the file is missing or ignored. */
int tcuda_tune_load(tcuda_tuner *t, const char *path);
/* The same from text (NUL-terminated; changed in place), named name in
 * what is said: another rank's table (tcuda_tune_text). */
int tcuda_tune_load_text(tcuda_tuner *t, const char *name, char *text);
/* The file's text of t's entries into *text (malloc'ed, NUL-terminated,
 * *len bytes): TENG_OK or TENG_ENOMEM. */
int tcuda_tune_text(const tcuda_tuner *t, char **text, size_t *len);
/* key's algorithm into *out (see above). TENG_OK; TENG_EBACKEND after
 * TORUS_FAIL when neither the measurement nor the heuristics offer one. */
int tcuda_tune_resolve(tcuda_tuner *t, const tcuda_algo_key *key,
                       tcuda_algo_val *out);
/* Writes the file when something was tuned since: 0, or -1 (said). */
int tcuda_tune_save(tcuda_tuner *t);
void tcuda_tune_close(tcuda_tuner *t);
/* The fastest usable result of r[0..n) (see above) into *out: 0, or -1. */
int tcuda_tune_pick(const tcuda_tune_result *r, int n, size_t ws_max,
                    int deterministic, tcuda_algo_val *out);
/* The default file: $XDG_CACHE_HOME/torus/conv-algos, else
 * $HOME/.cache/torus/conv-algos; 0, or -1 when neither is set. */
int tcuda_tune_default_path(char *buf, size_t n);

#endif
