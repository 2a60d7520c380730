/* transport/pmix.c: small out-of-band exchanges through PMIx (NCCL unique
 * ids, addresses, layout hashes): Put + Commit, a collecting Fence, Get.
 * A singleton has no server, so it keeps its own blobs in a tiny table and
 * reads them back, which is all a one-rank job can ask for. */
#include <stdlib.h>
#include <string.h>

#include "trainer/comm/transport/transport.h"

typedef struct tc_blob {
    struct tc_blob *next;
    char key[PMIX_MAX_KEYLEN + 1];
    size_t len;
    unsigned char data[];
} tc_blob;

static tc_blob *_store; /* singleton only; one tcomm per process */

void tc_store_free(tcomm_t *c)
{
    (void)c;
    while (_store) {
        tc_blob *n = _store->next;
        free(_store);
        _store = n;
    }
}

static tcomm_rc _check_key(const char *key)
{
    if (!key || !*key || strlen(key) > PMIX_MAX_KEYLEN)
        return TORUS_FAIL(TCOMM_ERR_ARG,
                          "PMIx key '%s' is empty or longer than %d",
                          key ? key : "", PMIX_MAX_KEYLEN);
    return TCOMM_OK;
}

tcomm_rc tcomm_pmix_put(tcomm_t *c, const char *key, const void *data,
                        size_t len)
{
    tcomm_rc rc = _check_key(key);
    if (rc)
        return rc;
    if (!c->pmix_up) {
        tc_blob *b = malloc(sizeof *b + len);
        if (!b)
            return TORUS_FAIL(TCOMM_ERR_NOMEM, "no memory for PMIx key %s",
                              key);
        strcpy(b->key, key);
        b->len = len;
        memcpy(b->data, data, len);
        b->next = _store;
        _store = b;
        return TCOMM_OK;
    }
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)data;
    v.data.bo.size = len;
    pmix_status_t st = PMIx_Put(PMIX_GLOBAL, key, &v);
    if (st == PMIX_SUCCESS)
        st = PMIx_Commit();
    if (st != PMIX_SUCCESS)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: PMIx_Put/Commit of %s: %s", c->info.rank,
                          key, PMIx_Error_string(st));
    return TCOMM_OK;
}

tcomm_rc tcomm_pmix_fence(tcomm_t *c)
{
    if (!c->pmix_up)
        return TCOMM_OK;
    pmix_info_t info;
    bool collect = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    pmix_status_t st = PMIx_Fence(NULL, 0, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (st != PMIX_SUCCESS)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT, "rank %d: PMIx_Fence: %s",
                          c->info.rank, PMIx_Error_string(st));
    return TCOMM_OK;
}

tcomm_rc tcomm_pmix_get(tcomm_t *c, int rank, const char *key, void *data,
                        size_t len)
{
    tcomm_rc rc = _check_key(key);
    if (rc)
        return rc;
    if (rank < 0 || rank >= c->info.size)
        return TORUS_FAIL(TCOMM_ERR_ARG, "PMIx get of %s from rank %d of %d",
                          key, rank, c->info.size);
    if (!c->pmix_up) {
        for (tc_blob *b = _store; b; b = b->next)
            if (strcmp(b->key, key) == 0) {
                if (b->len != len)
                    break;
                memcpy(data, b->data, len);
                return TCOMM_OK;
            }
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "no %zu-byte value for PMIx key %s", len, key);
    }
    pmix_proc_t p;
    pmix_value_t *v = NULL;
    PMIX_LOAD_PROCID(&p, c->me.nspace, (pmix_rank_t)rank);
    pmix_status_t st = PMIx_Get(&p, key, NULL, 0, &v);
    if (st != PMIX_SUCCESS || !v)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: PMIx_Get of %s from rank %d: %s",
                          c->info.rank, key, rank, PMIx_Error_string(st));
    int ok = v->type == PMIX_BYTE_OBJECT && v->data.bo.size == len;
    if (ok)
        memcpy(data, v->data.bo.bytes, len);
    size_t got = v->type == PMIX_BYTE_OBJECT ? v->data.bo.size : 0;
    PMIX_VALUE_RELEASE(v);
    if (!ok)
        return TORUS_FAIL(TCOMM_ERR_TRANSPORT,
                          "rank %d: PMIx key %s from rank %d has %zu "
                          "bytes, expected %zu",
                          c->info.rank, key, rank, got, len);
    return TCOMM_OK;
}
