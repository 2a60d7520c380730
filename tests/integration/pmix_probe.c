/*
 * pmix_probe.c: a tiny PMIx client that reports what the launcher told it.
 *
 * The cluster integration tests run it under `srun --mpi=pmix` and compare
 * what every rank saw (rank, job size, local rank, node id, hostname) with the
 * allocation, then prove that a Put/Commit/Fence/Get exchange between ranks on
 * different nodes works. One line per rank on stdout, key=value, so a shell
 * test can parse it; any failure goes to stderr with the rank and exits 1.
 */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROBE_KEY "torus.probe.host"

static pmix_proc_t _self;

#define PMIX_OK_OR_DIE(call)                                                \
    do {                                                                    \
        pmix_status_t _rc = (call);                                         \
        if (_rc != PMIX_SUCCESS) {                                          \
            fprintf(stderr, "pmix_probe: rank %u: %s failed: %s (%s:%d)\n", \
                    _self.rank, #call, PMIx_Error_string(_rc), __FILE__,    \
                    __LINE__);                                              \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

/* Fetch an integer attribute of `rank` (PMIX_RANK_WILDCARD for job-level). */
static unsigned long _get_uint(pmix_rank_t rank, const char *key)
{
    pmix_proc_t who;
    pmix_value_t *val = NULL;
    unsigned long out = 0;

    PMIX_PROC_CONSTRUCT(&who);
    PMIX_LOAD_PROCID(&who, _self.nspace, rank);
    PMIX_OK_OR_DIE(PMIx_Get(&who, key, NULL, 0, &val));
    switch (val->type) {
    case PMIX_UINT32:
        out = val->data.uint32;
        break;
    case PMIX_UINT16:
        out = val->data.uint16;
        break;
    case PMIX_INT:
        out = (unsigned long)val->data.integer;
        break;
    case PMIX_UINT64:
        out = val->data.uint64;
        break;
    case PMIX_PROC_RANK:
        out = val->data.rank;
        break;
    default:
        fprintf(stderr, "pmix_probe: rank %u: %s has unexpected type %d\n",
                _self.rank, key, (int)val->type);
        exit(1);
    }
    PMIX_VALUE_RELEASE(val);
    return out;
}

int main(void)
{
    char host[256] = {0};
    pmix_value_t put;
    pmix_value_t *got = NULL;
    pmix_proc_t peer, all;
    pmix_info_t collect;
    bool yes = true;

    if (getenv("PMIX_NAMESPACE") == NULL) {
        fprintf(stderr, "pmix_probe: not started by a PMIx server "
                        "(run it with srun --mpi=pmix or mpirun)\n");
        return 2;
    }
    PMIX_OK_OR_DIE(PMIx_Init(&_self, NULL, 0));
    gethostname(host, sizeof(host) - 1);

    unsigned long size = _get_uint(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
    unsigned long lrank = _get_uint(_self.rank, PMIX_LOCAL_RANK);
    unsigned long lsize = _get_uint(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE);
    unsigned long nodeid = _get_uint(_self.rank, PMIX_NODEID);

    /* Publish our hostname, fence with data collection, read the next rank's.
     */
    PMIX_VALUE_CONSTRUCT(&put);
    put.type = PMIX_STRING;
    put.data.string = host;
    PMIX_OK_OR_DIE(PMIx_Put(PMIX_GLOBAL, PROBE_KEY, &put));
    PMIX_OK_OR_DIE(PMIx_Commit());
    PMIX_PROC_CONSTRUCT(&all);
    PMIX_LOAD_PROCID(&all, _self.nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    PMIX_OK_OR_DIE(PMIx_Fence(&all, 1, &collect, 1));

    pmix_rank_t next = (pmix_rank_t)((_self.rank + 1) % size);
    PMIX_PROC_CONSTRUCT(&peer);
    PMIX_LOAD_PROCID(&peer, _self.nspace, next);
    PMIX_OK_OR_DIE(PMIx_Get(&peer, PROBE_KEY, NULL, 0, &got));
    if (got->type != PMIX_STRING) {
        fprintf(stderr, "pmix_probe: rank %u: peer value has type %d\n",
                _self.rank, (int)got->type);
        return 1;
    }
    printf("rank=%u size=%lu local_rank=%lu local_size=%lu nodeid=%lu "
           "host=%s peer=%u peer_host=%s\n",
           _self.rank, size, lrank, lsize, nodeid, host, next,
           got->data.string);
    fflush(stdout);
    PMIX_VALUE_RELEASE(got);
    PMIX_OK_OR_DIE(PMIx_Finalize(NULL, 0));
    return 0;
}
