/* bootstrap/init.c: start-up and shut-down of a tcomm_t. PMIx tells each rank
 * who it is (rank, job size, local rank and size, node id) under srun
 * --mpi=pmix and under OpenMPI's mpirun alike; MPI is then brought up for the
 * host-memory transport, the TORUS_* layout is checked across all ranks, and
 * the world/row/column/node/group communicators are split from it.
 * Outside any PMIx server the process is a single rank, unless something
 * says it was meant to be one of many, which is a launch error. The
 * start-up watchdog (watchdog.c) is armed before MPI starts and runs until
 * tcomm_startup_done, past tcomm_init through the caller's own start-up. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "trainer/comm/algo/algo.h"
#include "trainer/comm/bootstrap/bootstrap.h"
#include "trainer/comm/core/layout_env.h"

/* Read an integer PMIx value whatever width the server chose. */
static int _pmix_int(const pmix_proc_t *p, const char *key, long *out)
{
    pmix_value_t *v = NULL;
    if (PMIx_Get(p, key, NULL, 0, &v) != PMIX_SUCCESS || !v)
        return -1;
    int ok = 0;
    switch (v->type) {
    case PMIX_UINT32:
        *out = v->data.uint32;
        break;
    case PMIX_UINT16:
        *out = v->data.uint16;
        break;
    case PMIX_INT:
        *out = v->data.integer;
        break;
    case PMIX_UINT:
        *out = v->data.uint;
        break;
    case PMIX_PROC_RANK:
        *out = v->data.rank;
        break;
    case PMIX_UINT64:
        *out = (long)v->data.uint64;
        break;
    default:
        ok = -1;
    }
    PMIX_VALUE_RELEASE(v);
    return ok;
}

/* Why a singleton must not run: returns a message or NULL. */
static const char *_meant_distributed(const tcomm_options *o,
                                      const tcomm_env_layout *env, char *buf,
                                      size_t len)
{
    const char *nt = getenv("SLURM_NTASKS");
    const char *ow = getenv("OMPI_COMM_WORLD_SIZE");
    if (nt && atoi(nt) > 1)
        snprintf(buf, len, "SLURM_NTASKS=%s", nt);
    else if (ow && atoi(ow) > 1)
        snprintf(buf, len, "OMPI_COMM_WORLD_SIZE=%s", ow);
    else if (env->present && (long)env->rows * env->cols > 1)
        snprintf(buf, len, "TORUS_DIMS=%dx%d", env->rows, env->cols);
    else if (o && (long)o->grid_rows * o->grid_cols > 1)
        snprintf(buf, len, "--grid %dx%d", o->grid_rows, o->grid_cols);
    else
        return NULL;
    return buf;
}

static const char *_getenv(const char *n)
{
    return getenv(n);
}

static tcomm_rc _group(tcomm_t *c, tc_group *g, const char *name, int color,
                       int key)
{
    g->name = name;
    if (MPI_Comm_split(c->world.comm, color, key, &g->comm) != MPI_SUCCESS)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: MPI_Comm_split of the %s "
                          "communicator failed",
                          c->info.rank, name);
    if (g->comm == MPI_COMM_NULL) {
        g->rank = -1;
        g->size = 0;
        return TCOMM_OK;
    }
    MPI_Comm_rank(g->comm, &g->rank);
    MPI_Comm_size(g->comm, &g->size);
    g->world = malloc(sizeof(int) * (size_t)g->size);
    if (!g->world)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for the %s communicator",
                          name);
    MPI_Allgather(&c->info.rank, 1, MPI_INT, g->world, 1, MPI_INT, g->comm);
    return TCOMM_OK;
}

static void _group_self(tc_group *g, const char *name)
{
    static int zero = 0;
    g->comm = MPI_COMM_NULL;
    g->rank = 0;
    g->size = 1;
    g->name = name;
    g->world = &zero;
}

static void _group_free(tcomm_t *c, tc_group *g)
{
    if (c->mpi_up && g->comm != MPI_COMM_NULL)
        tc_shm_free(g);
    /* Members own a malloc'd world map; singletons point at a static. */
    if (!c->singleton && g->comm != MPI_COMM_NULL)
        free(g->world);
    g->world = NULL;
    if (c->mpi_up && g->comm != MPI_COMM_NULL && g->comm != MPI_COMM_WORLD)
        MPI_Comm_free(&g->comm);
}

/* OpenMPI 4.1.4's TCP transport can crash inside MPI_Init: its event loop
 * calls a NULL handler (SIGSEGV at address 0, seen about once in 20
 * 4-rank starts across two emulated nodes on a loaded 2-core host, with
 * gdb's backtrace in mca_btl_tcp under ompi_mpi_init). No torus code runs
 * then, and OpenMPI's own report is one libc frame. So while MPI_Init
 * runs, this rank's SIGSEGV handler says plainly where it died, then dies
 * of the same signal (a core dump, if enabled, is unchanged). OpenMPI is
 * asked not to take SIGSEGV over during init (opal_signal without 11),
 * unless the user set opal_signal. Only async-signal-safe calls in the
 * handler: the message is formatted before. */
static char _segv_msg[200];
static size_t _segv_len;

static void _on_segv_in_init(int sig)
{
    ssize_t n = write(STDERR_FILENO, _segv_msg, _segv_len);
    (void)n;
    signal(sig, SIG_DFL);
    raise(sig);
}

static int _mpi_init_guarded(tcomm_t *c, int *provided)
{
    _segv_len = (size_t)snprintf(
        _segv_msg, sizeof _segv_msg,
        "tcomm: rank %d: OpenMPI crashed inside MPI_Init (SIGSEGV in its "
        "own start-up; no torus code ran): resubmitting usually works\n",
        c->info.rank);
    struct sigaction sa = {.sa_handler = _on_segv_in_init}, old;
    sigemptyset(&sa.sa_mask);
    int ours = !getenv("OMPI_MCA_opal_signal");
    if (ours)
        setenv("OMPI_MCA_opal_signal", "6,7,8", 1);
    sigaction(SIGSEGV, &sa, &old);
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided);
    sigaction(SIGSEGV, &old, NULL);
    if (ours)
        unsetenv("OMPI_MCA_opal_signal");
    return rc;
}

static tcomm_rc _mpi_up(tcomm_t *c)
{
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        /* MULTIPLE: the fusion thread reduces while the caller may still
         * issue its own small collectives. */
        if (_mpi_init_guarded(c, &provided) != MPI_SUCCESS)
            return TORUS_FAIL(TCOMM_ERR_TRANSPORT, "MPI_Init_thread failed");
        c->mpi_up = 2;
    } else {
        MPI_Query_thread(&provided);
        c->mpi_up = 1;
    }
    c->thread_multiple = provided >= MPI_THREAD_MULTIPLE;
    if (provided < MPI_THREAD_SERIALIZED)
        return TORUS_FAIL(
            TCOMM_ERR_TRANSPORT,
            "MPI provides thread level %d; tcomm's "
            "communication thread needs at least MPI_THREAD_SERIALIZED",
            provided);
    int r, s;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    if (r != c->info.rank || s != c->info.size)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "MPI says rank %d of %d but PMIx says %d "
                          "of %d: mixed launchers?",
                          r, s, c->info.rank, c->info.size);
    return TCOMM_OK;
}

/* The group sizes of the exchanged layout: this rank's group's, whether
 * every group has the same size. */
static void _group_sizes(tcomm_t *c, const tcomm_place *all,
                         const tcomm_place *me)
{
    int gsize = 0, uniform = 1, first = -1;
    int *cnt = calloc((size_t)me->ngroups, sizeof(int));
    for (int i = 0; cnt && i < c->info.size; i++)
        cnt[all[i].group]++;
    for (int g = 0; cnt && g < me->ngroups; g++) {
        if (first < 0)
            first = cnt[g];
        uniform &= cnt[g] == first;
    }
    gsize = cnt ? cnt[me->group] : 0;
    free(cnt);
    c->info.group_size = gsize;
    c->info.groups_uniform = uniform;
}

/* Say where the layout came from (tcomm_info.source), and warn on rank 0
 * about a TORUS_* layout this build cannot read. */
static void _layout_source(tcomm_t *c, const tcomm_env_layout *env, int src,
                           const char *note)
{
    const char *how = (src & TCOMM_SRC_OPTIONS) ? "--grid"
                      : (src & TCOMM_SRC_ENV)   ? env->source
                      : env->source[0]
                          ? "one row per node, TORUS_VERSION unknown"
                          : "one row per node";
    if (!env->present && env->source[0] && c->info.rank == 0)
        torus_warn("%s: this build knows TORUS_VERSION=1 only, so the torus "
                   "layout is ignored",
                   env->source);
    snprintf(c->source, sizeof c->source, "%s%s%s", how,
             (src & TCOMM_SRC_GROUP_OPT) ? " + --group-size" : "",
             note[0] ? " (fallback 1xP)" : "");
    if (note[0] && c->verbose && c->info.rank == 0)
        torus_note("%s", note);
}

/* Take this rank's place from the checked layout of every rank. */
static void _layout_apply(tcomm_t *c, const tcomm_place *all)
{
    const tcomm_place *me = &all[c->info.rank];
    /* The contract orders a group by node index, then local rank. */
    c->group_key = me->node_index >= 0 ? me->node_index * 65536 + me->local_rank
                                       : c->info.rank;
    c->info.rows = me->rows;
    c->info.cols = me->cols;
    c->info.row = me->row;
    c->info.col = me->col;
    c->info.group = me->group;
    c->info.ngroups = me->ngroups;
    _group_sizes(c, all, me);
}

/* Every rank's place, from env, options or its node, exchanged and checked
 * across the job. */
static tcomm_rc _layout(tcomm_t *c, const tcomm_options *opt,
                        const tcomm_env_layout *env)
{
    tcomm_place me, *all;
    int src = 0;
    tcomm_rc rc = tcomm_layout_place(env, opt, c->info.rank, c->info.size,
                                     c->info.node_id, c->info.local_rank,
                                     c->info.local_size, &me, &src);
    if (rc)
        return rc;
    all = calloc((size_t)c->info.size, sizeof *all);
    if (!all)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %d ranks",
                          c->info.size);
    if (c->singleton)
        all[0] = me;
    else
        MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me,
                      MPI_BYTE, MPI_COMM_WORLD);
    char note[160];
    rc = tcomm_layout_finish(all, c->info.size, src, note, sizeof note);
    if (!rc) {
        _layout_apply(c, all);
        _layout_source(c, env, src, note);
    }
    free(all);
    return rc;
}

void tc_host_share(const tc_host *all, int size, int rank, int *ranks,
                   int *cpus)
{
    cpu_set_t any;
    CPU_ZERO(&any);
    *ranks = 0;
    for (int r = 0; r < size; r++)
        if (!memcmp(all[r].kernel, all[rank].kernel, sizeof all[r].kernel)) {
            CPU_OR(&any, &any, &all[r].cpus);
            (*ranks)++;
        }
    *cpus = CPU_COUNT(&any);
}

/* This rank's tc_host: the kernel's boot id (where it cannot be read,
 * "node N" stands in: one kernel per node), and its CPU affinity (Slurm's
 * binding, a cgroup's cpuset). */
static void _host(const tcomm_t *c, tc_host *h)
{
    memset(h, 0, sizeof *h);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(h->kernel, sizeof h->kernel, f))
            h->kernel[0] = '\0';
        fclose(f);
    }
    h->kernel[strcspn(h->kernel, "\n")] = '\0';
    if (!h->kernel[0])
        snprintf(h->kernel, sizeof h->kernel, "node %d", c->info.node_id);
    if (sched_getaffinity(0, sizeof h->cpus, &h->cpus))
        CPU_ZERO(&h->cpus);
}

/* How a wait polls (transport/mpi.c). Spinning keeps a step's latency at
 * the transport's where every rank has a CPU of its own. Where more ranks
 * share a kernel than there are CPUs for them (an oversubscribed host, or
 * an emulated cluster whose nodes are network namespaces of one machine),
 * a spinning rank takes the CPU from the ranks doing the work, so waits
 * nap from the first poll (OpenMPI yields when oversubscribed for the same
 * reason): on the 4-node emulated cluster (8 ranks, 2 CPUs) that took 64
 * MiB hier from 1.107 to 1.040 s and torus2d from 1.017 to 0.984 s,
 * medians of 4 alternated rounds (docs/comm.md). TCOMM_POLL_SLEEP wins.
 * Collective. */
static tcomm_rc _waits(tcomm_t *c)
{
    tc_host me, *all = calloc((size_t)c->info.size, sizeof *all);
    if (!all)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for %d ranks",
                          c->info.size);
    _host(c, &me);
    all[0] = me;
    if (!c->singleton &&
        MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me,
                      MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) {
        free(all);
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: cannot gather the ranks' machines",
                          c->info.rank);
    }
    tc_host_share(all, c->info.size, c->singleton ? 0 : c->info.rank,
                  &c->info.host_ranks, &c->info.host_cpus);
    free(all);
    c->info.waits_nap = c->info.host_cpus > 0 &&
                        c->info.host_ranks > c->info.host_cpus &&
                        !getenv("TCOMM_POLL_SLEEP");
    if (c->info.waits_nap)
        c->poll_sleep = 0;
    return TCOMM_OK;
}

/* Open every TCP connection our algorithms use now, from this thread:
 * OpenMPI 4.1's TCP BTL can drop a connection that two threads set up at
 * once (the fusion thread and the caller), failing with "connect() ...
 * Operation now in progress". Ring neighbours of every communicator, the
 * group leader, and MPI's own all-reduce partners (small and large). */
static tcomm_rc _warm_up(tcomm_t *c)
{
    tc_group *gs[] = {&c->world, &c->row,     &c->col,
                      &c->group, &c->leaders, &c->peers};
    char a = 1, b = 0;
    tcomm_rc rc = TCOMM_OK;
    for (size_t i = 0; i < sizeof gs / sizeof gs[0] && !rc; i++) {
        tc_group *g = gs[i];
        if (g->comm == MPI_COMM_NULL || g->size < 2)
            continue;
        int next = (g->rank + 1) % g->size,
            prev = (g->rank + g->size - 1) % g->size;
        rc = tc_sendrecv(c, g, &a, 1, next, &b, 1, prev);
        if (!rc)
            rc = tc_sendrecv(c, g, &a, 1, prev, &b, 1, next);
    }
    for (int j = 1; j < c->group.size && !rc;
         j++) /* gather / scatter partners */
        if (c->group.rank == 0)
            rc = tc_recv(c, &c->group, &b, 1, j);
        else if (c->group.rank == j)
            rc = tc_send(c, &c->group, &a, 1, 0);
    float *x = calloc(1 << 16, sizeof(float));
    if (!rc && x)
        rc = tc_flat_allreduce(c, x, 1, TCOMM_WIRE_FP32);
    if (!rc && x)
        rc = tc_flat_allreduce(c, x, 1 << 16, TCOMM_WIRE_FP32);
    free(x);
    return rc;
}

/* A tcomm_t with every handle at its null value (OpenMPI's nulls are
 * objects, not 0) and the knobs read from opt and TCOMM_*; NULL: no
 * memory. */
static tcomm_t *_new(const tcomm_options *opt)
{
    tcomm_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->op_fp16 = c->op_bf16 = MPI_OP_NULL;
    c->blame = MPI_COMM_NULL;
    c->lost = -2; /* not searched yet */
    pthread_mutex_init(&c->blame_mu, NULL);
    tc_group *gs[] = {&c->world, &c->row,     &c->col,   &c->node,
                      &c->group, &c->leaders, &c->peers, &c->shmdom};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++)
        gs[i]->comm = MPI_COMM_NULL;
    c->dt_half = MPI_DATATYPE_NULL;
    /* The caller's option (a tool's command line), else TCOMM_TIMEOUT,
     * else 30 s: the command line wins over the environment. */
    const char *t = getenv("TCOMM_TIMEOUT");
    c->timeout_s = opt && opt->timeout_s > 0 ? opt->timeout_s
                   : t && atof(t) > 0        ? atof(t)
                                             : 30.0;
    c->verbose = opt ? opt->verbose : 0;
    c->use_shm =
        !(getenv("TCOMM_SHM") && strcmp(getenv("TCOMM_SHM"), "0") == 0);
    c->poll_yield = getenv("TCOMM_POLL_YIELD")
                        ? strtoul(getenv("TCOMM_POLL_YIELD"), NULL, 10)
                        : 256;
    c->poll_sleep = getenv("TCOMM_POLL_SLEEP")
                        ? strtoul(getenv("TCOMM_POLL_SLEEP"), NULL, 10)
                        : 20000;
    /* Ring steps move in segments of this size (0: whole steps); 1 MiB is
     * ~8 ms on a 1 Gbit/s link, enough to hide the add of the previous one
     * (tests/bench/comm/netns.sh). */
    const char *sk = getenv("TCOMM_SEG_KB");
    c->seg_bytes = (sk ? strtoull(sk, NULL, 10) : 1024) << 10;
    /* torus2d and hier-rs with rows in shared memory, and hier, run large
     * messages in this many pieces, the node stages of one overlapping the
     * network stage of another (algo/pipeline.c); 1 turns it off. 32: on
     * the emulated 1 Gbit/s cluster (4 nodes x 2 ranks on 2 cores) 64 MiB
     * took 0.86-0.88 s against 0.88-0.90 s with 16 and 0.90-0.93 s with 8
     * (torus2d; hier 0.87-0.92 s against 0.99-1.06 s), 2026-12-03. Pieces
     * stay 2 MiB at least (torus_cost_pieces). */
    const char *pk = getenv("TCOMM_PIPELINE");
    c->pipeline = pk ? atoi(pk) : 32;
    if (c->pipeline < 1)
        c->pipeline = 1;
    if (c->pipeline > 64)
        c->pipeline = 64;
    return c;
}

/* Who this rank is, from PMIx; then MPI, under the start-up deadline w.
 * No PMIx server: a singleton, unless something says the job has several
 * ranks (TCOMM_ERR_LAUNCH; nothing was started). */
static tcomm_rc _pmix_up(tcomm_t *c, const tcomm_options *opt,
                         const tcomm_env_layout *env)
{
    int prc = PMIx_Init(&c->me, NULL, 0);
    if (prc != PMIX_SUCCESS) {
        char why[96];
        if (_meant_distributed(opt, env, why, sizeof why))
            return TORUS_FAIL(TCOMM_ERR_LAUNCH,
                              "%s says this job has several ranks, "
                              "but no PMIx server answered (%s). Launch it "
                              "with 'srun --mpi=pmix ...' or 'mpirun -np N "
                              "...'",
                              why, PMIx_Error_string(prc));
        c->singleton = 1;
        c->info.size = 1;
        c->info.local_size = 1;
        c->info.nnodes = 1;
        return TCOMM_OK;
    }
    c->pmix_up = 1;
    pmix_proc_t wild;
    long v;
    PMIX_LOAD_PROCID(&wild, c->me.nspace, PMIX_RANK_WILDCARD);
    c->info.rank = (int)c->me.rank;
    if (_pmix_int(&wild, PMIX_JOB_SIZE, &v))
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT, "PMIx has no %s", PMIX_JOB_SIZE);
    c->info.size = (int)v;
    c->info.local_rank = _pmix_int(&c->me, PMIX_LOCAL_RANK, &v) ? 0 : (int)v;
    c->info.local_size = _pmix_int(&wild, PMIX_LOCAL_SIZE, &v) ? 1 : (int)v;
    c->info.node_id = _pmix_int(&c->me, PMIX_NODEID, &v) ? 0 : (int)v;
    /* From here on every rank waits for all the others inside MPI, and
     * then for the caller's own start-up: the deadline runs until
     * tcomm_startup_done. */
    c->startup = calloc(1, sizeof *c->startup);
    if (c->startup)
        tc_watchdog_arm(c->startup, c);
    return _mpi_up(c);
}

/* The world group: MPI's world, or this rank alone. */
static void _world(tcomm_t *c)
{
    if (c->singleton) {
        _group_self(&c->world, "world");
        return;
    }
    c->world.comm = MPI_COMM_WORLD;
    c->world.rank = c->info.rank;
    c->world.size = c->info.size;
    c->world.name = "world";
    c->world.world = malloc(sizeof(int) * (size_t)c->info.size);
    for (int i = 0; c->world.world && i < c->info.size; i++)
        c->world.world[i] = i;
}

static void _self_groups(tcomm_t *c)
{
    _group_self(&c->row, "row");
    _group_self(&c->col, "column");
    _group_self(&c->node, "node");
    _group_self(&c->group, "group");
    _group_self(&c->leaders, "leaders");
    _group_self(&c->peers, "group peers");
}

/* Split the row, column, node, group, leaders and peers communicators from
 * the layout, and the private world copy for lost-rank reports. */
static tcomm_rc _split_groups(tcomm_t *c)
{
    tcomm_info *i = &c->info;
    tcomm_rc rc;
    if ((rc = _group(c, &c->row, "row", i->row, i->col)) ||
        (rc = _group(c, &c->col, "column", i->col, i->row)) ||
        (rc = _group(c, &c->node, "node", i->node_id, i->rank)) ||
        (rc = _group(c, &c->group, "group", i->group, c->group_key)))
        return rc;
    i->group_rank = c->group.rank;
    /* Errors come back as codes (reported with the peer's rank), and a
     * private world copy carries lost-rank reports (transport/mpi.c). */
    tc_group *all[] = {&c->row, &c->col, &c->node, &c->group};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        MPI_Comm_set_errhandler(all[k]->comm, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &c->blame);
    MPI_Comm_set_errhandler(c->blame, MPI_ERRORS_RETURN);
    if ((rc = _group(c, &c->leaders, "group leaders",
                     i->group_rank == 0 ? 0 : MPI_UNDEFINED, i->group)) ||
        (rc = _group(c, &c->peers, "group peers", i->group_rank, i->group)))
        return rc;
    return TCOMM_OK;
}

/* The ranks that share this node's memory, for tcomm_shared_alloc: split
 * here, under the start-up deadline, because MPI_Comm_split_type blocks
 * and tcomm_shared_alloc may come at any time later. */
static tcomm_rc _shm_domain(tcomm_t *c)
{
    tc_group *g = &c->shmdom;
    g->name = "node's shared-memory";
    if (!c->use_shm)
        return TCOMM_OK;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                            MPI_INFO_NULL, &g->comm) != MPI_SUCCESS)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: cannot find the ranks that share "
                          "this node's memory",
                          c->info.rank);
    MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g->comm, &g->rank);
    MPI_Comm_size(g->comm, &g->size);
    g->world = malloc(sizeof(int) * (size_t)g->size);
    if (!g->world)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for the %s", g->name);
    MPI_Allgather(&c->info.rank, 1, MPI_INT, g->world, 1, MPI_INT, g->comm);
    return TCOMM_OK;
}

/* The communicators of a distributed run, the wire ops, node count and
 * shared memory, with every connection opened. */
static tcomm_rc _groups(tcomm_t *c)
{
    tcomm_rc rc = _split_groups(c);
    if (!rc)
        rc = tc_mpi_ops_create(c);
    if (rc)
        return rc;
    int nn = c->node.rank == 0, total = 0;
    MPI_Allreduce(&nn, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    c->info.nnodes = total;
    if ((rc = _shm_domain(c)))
        return rc;
    tc_shm_probe(c, &c->row);
    tc_shm_probe(c, &c->col);
    tc_shm_probe(c, &c->group);
    tc_shm_probe(c, &c->peers);
    /* A column's members run the same pieces only if every row (group)
     * takes the same path: with a row on one node and another across two,
     * the pipelined and the whole-message torus2d met in one column ring,
     * which stalled (or, over 3 + 1 ranks, failed on a truncated message). */
    int on[2] = {c->row.on_node, c->group.on_node};
    MPI_Allreduce(MPI_IN_PLACE, on, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    c->row.all_on_node = on[0];
    c->group.all_on_node = on[1];
    return _warm_up(c);
}

/* The cost model hybrid picks by: defaults for this layout, then the
 * TCOMM_COST overrides. */
static tcomm_rc _model(tcomm_t *c)
{
    c->info.source = c->source;
    tcomm_rc rc =
        tcomm_model_defaults_env(&c->model, c->info.size, c->info.local_size);
    if (rc)
        return rc;
    c->model.rows = c->info.rows;
    c->model.cols = c->info.cols;
    c->model.group_size = c->info.groups_uniform ? c->info.group_size : -1;
    c->model.shm = c->row.on_node;
    c->model.pipeline = c->thread_multiple ? c->pipeline : 1;
    return TCOMM_OK;
}

tcomm_rc tcomm_init(const tcomm_options *opt, tcomm_t **out)
{
    tcomm_env_layout env;
    *out = NULL;
    /* A bad TORUS_* value is a start-up error before anything else runs. */
    tcomm_rc rc = tcomm_layout_parse_env(_getenv, &env);
    if (rc)
        return rc;
    tcomm_t *c = _new(opt);
    if (!c)
        return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for tcomm");
    rc = _pmix_up(c, opt, &env);
    if (rc == TCOMM_ERR_LAUNCH) { /* nothing to shut down */
        free(c);
        return rc;
    }
    if (!rc) {
        _world(c);
        rc = _layout(c, opt, &env);
    }
    if (!rc && c->singleton)
        _self_groups(c);
    else if (!rc)
        rc = _groups(c);
    if (!rc)
        rc = _waits(c);
    if (!rc)
        rc = _model(c);
    if (c->startup) /* MPI is up: the caller's start-up is next */
        c->startup->phase = 1;
    if (rc) {
        tcomm_finalize(c);
        return rc;
    }
    *out = c;
    return TCOMM_OK;
}

void tcomm_startup_done(tcomm_t *c)
{
    if (!c || !c->startup)
        return;
    tc_watchdog_disarm(c->startup);
    free(c->startup);
    c->startup = NULL;
}

void tcomm_info_get(const tcomm_t *c, tcomm_info *info)
{
    *info = c->info;
}

int tcomm_peer_lost(const tcomm_t *c)
{
    return c && c->peer_lost;
}

/* Freeing the windows and MPI_Finalize block until every rank is there:
 * agree first, within the deadline, so that a rank lost at the very end
 * fails the job naming it instead of hanging it. */
static void _finish_agree(tcomm_t *c)
{
    if (!c->mpi_up || c->singleton || c->blame == MPI_COMM_NULL ||
        c->world.comm == MPI_COMM_NULL || c->info.size < 2)
        return;
    if (tc_agree(c, &c->world, 1, "reach tcomm_finalize", TCOMM_ERR_TIMEOUT))
        tcomm_abort(c, TC_EXIT_LOST, torus_error_msg());
}

void tcomm_finalize(tcomm_t *c)
{
    if (!c)
        return;
    tcomm_startup_done(c); /* a failed start-up: stop the watchdog */
    _finish_agree(c);
    tcomm_shared_free(c);
    tc_group *gs[] = {&c->row,     &c->col,   &c->node,   &c->group,
                      &c->leaders, &c->peers, &c->shmdom, &c->world};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++)
        _group_free(c, gs[i]);
    if (c->mpi_up) {
        tc_mpi_ops_free(c);
        if (c->blame != MPI_COMM_NULL)
            MPI_Comm_free(&c->blame);
    }
    tc_scratch *ss[] = {&c->scr, &c->scr_pipe};
    for (int i = 0; i < 2; i++) {
        tc_buf_free(&ss[i]->a);
        tc_buf_free(&ss[i]->b);
        tc_buf_free(&ss[i]->c);
    }
    tc_buf_free(&c->accum);
    tc_buf_free(&c->pack);
    tc_store_free(c);
    if (c->mpi_up == 2)
        MPI_Finalize();
    if (c->pmix_up)
        PMIx_Finalize(NULL, 0);
    pthread_mutex_destroy(&c->blame_mu);
    free(c);
}

void tcomm_abort(tcomm_t *c, int code, const char *msg)
{
    fprintf(stderr, "tcomm: rank %d: %s\n", c ? c->info.rank : 0, msg);
    fflush(stderr);
    /* The whole job ends (tc_end_job), not only this rank: under srun
     * without --kill-on-bad-exit a peer that is stopped would keep the
     * step alive. */
    if (c && !c->singleton) {
        struct timespec ts = {TC_LINGER_S, 0};
        nanosleep(&ts, NULL);
        tc_end_job(c, code, msg);
    }
    exit(code);
}
