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
 * can end the wait.
 * --in CALL: what every rank calls in the loop, so that the others wait
 * inside it for the rank at fault: allreduce (default, --algo), max
 * (tcomm_max_double), sum (tcomm_sum_double), bcast (tcomm_bcast_bytes,
 * root 0; the rank at fault must not be 0), barrier, shared
 * (tcomm_shared_alloc at iteration 3, all-reduces otherwise).
 * finalize: max in the loop; the rank at fault stops or dies just before
 * tcomm_finalize, which the others must not hang in.
 * long-barrier, long-timeout: at iteration 3 a wait with a 12 s deadline
 * (tcomm_barrier_timeout; tcomm_set_timeout around a max), max otherwise.
 * --slow R S: rank R is busy S seconds before iteration 3's call (rank 0
 * writing a checkpoint while the others wait).
 * --startup-hang R S: rank R sleeps S seconds after tcomm_init, before
 * tcomm_startup_done (a start-up step that hangs outside any collective);
 * its start-up watchdog must end it.
 * --no-shm R: rank R (PMIX_RANK) gets a shared-memory backing directory
 * that does not exist (OMPI_MCA_osc_sm_backing_directory, set before MPI
 * starts), so its tcomm_shared_alloc fails and every rank must fail with
 * it, naming it, instead of waiting in a collective it skipped.
 * --longer R: at iteration 3 rank R all-reduces 4096 floats more than the
 * others (a caller bug): the rank that receives its longer message must
 * name R as the sender of a mismatch, not as a lost rank. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "trainer/comm/tcomm.h"

/* One call of --in's kind at iteration it. */
static tcomm_rc _call(tcomm_t *c, const char *in, const char *algo, float *x,
                      size_t n, int it)
{
    double v[4] = {1, 2, 3, 4};
    tcomm_result r;
    if (!strcmp(in, "max"))
        return tcomm_max_double(c, v);
    if (!strcmp(in, "sum"))
        return tcomm_sum_double(c, v, 4);
    if (!strcmp(in, "bcast"))
        return tcomm_bcast_bytes(c, x, n * 4, 0);
    if (!strcmp(in, "barrier"))
        return tcomm_barrier(c);
    /* A checkpoint-like wait at iteration 3 with a 12 s deadline, however
     * short the timeout: a barrier with its own, or the timeout raised
     * around a collective and put back. */
    if (!strcmp(in, "long-barrier") && it == 3)
        return tcomm_barrier_timeout(c, 12);
    if (!strcmp(in, "long-timeout") && it == 3) {
        double t = tcomm_set_timeout(c, 12);
        tcomm_rc rc = tcomm_max_double(c, v);
        tcomm_set_timeout(c, t);
        return rc;
    }
    if (!strncmp(in, "long-", 5) || !strcmp(in, "finalize"))
        return tcomm_max_double(c, v);
    if (!strcmp(in, "shared") && it == 3) {
        void *p;
        tcomm_rc rc = tcomm_shared_alloc(c, n * 4, &p);
        if (!rc)
            fprintf(stderr, "comm_fault_check: shared block allocated\n");
        return rc;
    }
    return tcomm_allreduce(c, x, n, tcomm_algo_parse(algo), TCOMM_WIRE_FP32, 0,
                           &r);
}

int main(int argc, char **argv)
{
    tcomm_options o = {0};
    int die = -1, sig = SIGKILL, hang = -1, hang_s = 0, slow = -1, slow_s = 0;
    int longer = -1;
    const char *algo = "ring", *in_call = "allreduce";
    size_t n = 1 << 18;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--die"))
            die = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--stall")) {
            die = atoi(argv[i + 1]);
            sig = SIGSTOP;
        } else if (!strcmp(argv[i], "--algo"))
            algo = argv[i + 1];
        else if (!strcmp(argv[i], "--slow") && i + 2 < argc) {
            slow = atoi(argv[i + 1]);
            slow_s = atoi(argv[i + 2]);
            i++;
        } else if (!strcmp(argv[i], "--startup-hang") && i + 2 < argc) {
            hang = atoi(argv[i + 1]);
            hang_s = atoi(argv[i + 2]);
            i++;
        } else if (!strcmp(argv[i], "--in"))
            in_call = argv[i + 1];
        else if (!strcmp(argv[i], "--longer"))
            longer = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--no-shm")) {
            const char *me = getenv("PMIX_RANK");
            if (me && atoi(me) == atoi(argv[i + 1]))
                setenv("OMPI_MCA_osc_sm_backing_directory",
                       "/nonexistent/torus-comm-fault", 1);
        } else if (!strcmp(argv[i], "--timeout"))
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
        fprintf(stderr, "comm_fault_check: %s\n", torus_error_msg());
        return 1;
    }
    tcomm_info in;
    tcomm_info_get(c, &in);
    if (in.rank == hang) {
        fprintf(stderr, "rank %d: start-up hangs for %d s\n", in.rank, hang_s);
        sleep((unsigned)hang_s);
    }
    tcomm_startup_done(c);
    float *x = calloc(n + 4096, 4);
    for (int it = 0; it < 1000; it++) {
        if (in.rank == die && it == 3 && strcmp(in_call, "finalize")) {
            fprintf(stderr, "rank %d: %s now\n", in.rank,
                    sig == SIGKILL ? "dying" : "hanging");
            fflush(stderr);
            kill(getpid(), sig);
        }
        if (in.rank == slow && it == 3) {
            fprintf(stderr, "rank %d: busy for %d s (a checkpoint write)\n",
                    in.rank, slow_s);
            sleep((unsigned)slow_s);
        }
        size_t count = in.rank == longer && it == 3 ? n + 4096 : n;
        if (_call(c, in_call, algo, x, count, it)) {
            fprintf(stderr, "comm_fault_check: %s\n", torus_error_msg());
            tcomm_abort(c, 3, "giving up: a peer is lost");
        }
    }
    int fin = !strcmp(in_call, "finalize");
    if (in.rank == die && fin) {
        fprintf(stderr, "rank %d: %s before tcomm_finalize\n", in.rank,
                sig == SIGKILL ? "dying" : "hanging");
        fflush(stderr);
        kill(getpid(), sig);
    }
    tcomm_finalize(c);
    printf("rank %d: finished all iterations\n", in.rank);
    return 0;
}
