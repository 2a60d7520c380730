/* ttrain_options.h: torus-train's configuration (prefix ttrain_): one struct
 * with every setting, filled from defaults, then an optional config file, then
 * the command line, and validated once with errors that name the option
 * (and the file and line it came from). */
#ifndef TORUS_TRAINER_TRAIN_OPTIONS_H
#define TORUS_TRAINER_TRAIN_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trainer/models/tmodel.h"
#include "trainer/optim/topt.h"

/* The largest --bucket-kb (1 GiB), also what a checkpoint may record. */
#define TTRAIN_BUCKET_KB_MAX 1048576

typedef struct {
    tmodel_spec model;
    topt_schedule sched;
    topt_config opt;
    char backend[16]; /* auto, dnnl */
    int threads;      /* compute threads per rank */
    char tune_cache[512]; /* cuda: the tune cache file ("": the default) */
    int world;        /* ranks (from the PMIx bootstrap) */
    char algo[16];    /* tcomm all-reduce algorithm for the gradients */
    int bucket_kb;    /* fusion bucket size (-1: auto, the default; 0:
                       * tcomm's default) */
    char wire[8];     /* gradient precision on the wire: fp16, bf16, fp32 */
    int synthetic;    /* synthetic data (benchmarks) */
    char data[512];   /* packed dataset (the data pipeline; later) */

    /* --loss-scale: auto, off, static:S, dynamic[:INIT[:INTERVAL]] */
    char loss_scale[40];
    /* --input: auto, float, u8 (training batches from --data) */
    char input[8];
    /* --decode-threads: the loader's decode threads (0: auto) */
    int decode_threads;

    uint64_t seed;
    long max_steps;      /* stop early (0: run all epochs) */
    double target_top1;  /* stop once test top-1 >= this, in % (0: off) */
    long eval_every;     /* steps between evaluations (0: per epoch) */
    int print_every;     /* steps between progress lines */
    char metrics[512];   /* JSON-lines metrics file ("" = none) */
    char trace[512];     /* Chrome trace-event timeline ("" = none) */
    char ckpt_dir[512];  /* checkpoints go here ("" = none) */
    long ckpt_every;     /* steps between checkpoints (0: at the end) */
    int keep;            /* newest checkpoints kept */
    int resume;          /* continue from the newest checkpoint */
    int eval_only;       /* evaluate the newest checkpoint, then exit */
    int max_nonfinite;   /* inf/nan gradient steps skipped before failing */
    double diverge_loss; /* stop when the loss stays above it (0: off) */
    int diverge_points;  /* ... at this many progress points in a row */
    double comm_timeout; /* s without progress before a peer is lost (0:
                          * TCOMM_TIMEOUT, else 30; resolved by validate) */
    const char *comm_timeout_from; /* where it came from, for the plan */
    double ckpt_timeout; /* s the ranks wait for rank 0's checkpoint */
    int dry_run;
    int verbose;
} ttrain_config;

/* Exit statuses of torus-train. */
enum {
    TTRAIN_EXIT_OK = 0,
    TTRAIN_EXIT_FAIL = 1,
    TTRAIN_EXIT_USAGE = 2,
    TTRAIN_EXIT_PREEMPTED = 3, /* checkpointed on SIGUSR1/SIGTERM: requeue */
    TTRAIN_EXIT_STARTUP = 4,   /* libtcomm's start-up did not finish */
    TTRAIN_EXIT_PEER_LOST = 5, /* a rank was lost (TCOMM_EXIT_LOST) */
};

/* What ttrain_config_parse found besides settings: the program prints
 * its help (ttrain_usage) or version and exits 0. */
enum { TTRAIN_PARSE_HELP = 10, TTRAIN_PARSE_VERSION = 11 };

/* Neither parse nor validate prints: a usage error returns
 * TTRAIN_EXIT_USAGE with one sentence naming the option (or FILE:LINE of
 * the config file) in torus_error_msg(), which torus-train prints as
 * "torus-train: MSG". */
void ttrain_config_defaults(ttrain_config *c);
/* Parses argv (a --config FILE is read first, so the command line wins).
 * Returns 0, TTRAIN_PARSE_HELP, TTRAIN_PARSE_VERSION or
 * TTRAIN_EXIT_USAGE. */
int ttrain_config_parse(ttrain_config *c, int argc, char **argv);
/* Cross-field checks; 0 or TTRAIN_EXIT_USAGE. */
int ttrain_config_validate(ttrain_config *c);
/* The output paths, on the file system, before any work: --checkpoint-dir
 * a directory (or one mkdir can create; under --eval-only only read), and
 * on rank 0, which writes them, --metrics and --trace no directory and
 * writable (or creatable). 0 or TTRAIN_EXIT_USAGE, the message naming the
 * option and the path. */
int ttrain_config_check_paths(const ttrain_config *c, int rank);
/* Writes the --help text to the stream the program gives. */
void ttrain_usage(FILE *f);
/* The resolved configuration and the per-epoch LR/batch schedule. */
void ttrain_print_plan(const ttrain_config *c, FILE *f);

#endif
