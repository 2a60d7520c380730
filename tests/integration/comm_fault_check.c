/* comm_fault_check.c: a rank that dies or hangs in the middle of the
 * collectives, run by comm_cluster.sh. Every rank all-reduces in a loop;
 * at iteration 3, rank --die R kills itself with SIGKILL, or rank --stall R
 * stops itself with SIGSTOP (a hung node), while the others are inside the
 * all-reduce waiting for it. The others must not hang: they exit non-zero,
 * and on a stall each names rank R (tcomm's lost-rank detection).
 * --count N floats per all-reduce [256K]; --grid RxC lays the ranks out
 * (a row in shared memory and a large count run torus2d in pipelined
 * pieces, whose network stage waits on a thread of its own). --late R S:
 * rank R (PMIX_RANK) sleeps S seconds before tcomm_init, so the others
 * wait for it inside MPI's start-up, where only tcomm's start-up watchdog
 * can end the wait. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/comm/tcomm.h"

int main(int argc, char **argv)
{
    tcomm_options o = {0};
    int die = -1, sig = SIGKILL;
    const char *algo = "ring";
    size_t n = 1 << 18;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--die"))
            die = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--stall")) {
            die = atoi(argv[i + 1]);
            sig = SIGSTOP;
        } else if (!strcmp(argv[i], "--algo"))
            algo = argv[i + 1];
        else if (!strcmp(argv[i], "--timeout"))
            o.timeout_s = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--late") && i + 2 < argc) {
            const char *me = getenv("PMIX_RANK");
            if (me && atoi(me) == atoi(argv[i + 1])) {
                fprintf(stderr, "rank %s: starting late\n", me);
                sleep((unsigned)atoi(argv[i + 2]));
            }
            i++;
        } else if (!strcmp(argv[i], "--count"))
            n = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--grid") &&
                 sscanf(argv[i + 1], "%dx%d", &o.grid_rows, &o.grid_cols) !=
                     2) {
            fprintf(stderr, "comm_fault_check: --grid '%s' is not RxC\n",
                    argv[i + 1]);
            return 2;
        }
    }
    tcomm_t *c;
    if (tcomm_init(&o, &c)) {
        fprintf(stderr, "comm_fault_check: %s\n", tcomm_error());
        return 1;
    }
    tcomm_info in;
    tcomm_info_get(c, &in);
    float *x = calloc(n, 4);
    for (int it = 0; it < 1000; it++) {
        if (in.rank == die && it == 3) {
            fprintf(stderr, "rank %d: %s now\n", in.rank,
                    sig == SIGKILL ? "dying" : "hanging");
            fflush(stderr);
            kill(getpid(), sig);
        }
        tcomm_result r;
        if (tcomm_allreduce(c, x, n, tcomm_algo_parse(algo), TCOMM_WIRE_FP32, 0,
                            &r)) {
            fprintf(stderr, "comm_fault_check: %s\n", tcomm_error());
            tcomm_abort(c, 3, "giving up: a peer is lost");
        }
    }
    printf("rank %d: finished all iterations\n", in.rank);
    tcomm_finalize(c);
    return 0;
}
