/* trace.c: the step timeline as Chrome trace-event JSON (see
 * ttrain_trace.h for the contract). Events are formatted as they happen
 * into one buffer per rank under a mutex (the step thread and the
 * communication thread both write); the open spans of a thread live in
 * thread-local storage, as only that thread closes them. */
#include "trainer/train/ttrain_trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_json.h"
#include "common/torus_report.h"
#include "trainer/train/ttrain_error.h"

/* Chunks rank 0 gathers the other ranks' events in: a buffer allocated at
 * open, so that close has nothing left to allocate on any rank. */
#define _CHUNK ((size_t)1 << 20)
#define _DEPTH 16

struct ttrain_trace {
    FILE *f; /* rank 0: the file, open since ttrain_trace_open */
    char path[512];
    int rank, world;
    double t0; /* CLOCK_MONOTONIC seconds at the opening barrier */
    pthread_mutex_t mu;
    char *buf; /* this rank's events, one per line, each ending ",\n" */
    size_t len, cap;
    size_t events;
    int truncated; /* TTRAIN_TRACE_MAX_BYTES reached: no more events */
    char *chunk;   /* _CHUNK bytes for the gather */
};

/* The calling thread's open spans and backward layer group. */
typedef struct {
    const char *name;
    double t0;
} _span;

static __thread struct {
    const ttrain_trace *named; /* the trace this thread was named in */
    int tid, depth;
    _span open[_DEPTH];
    /* layer groups: the open one, where it began, where the last layer
     * ended, the span depth it nests in, and whether a stage was seen */
    char group[24];
    double group_t0, last_layer;
    int group_depth, staged;
} _me;

static double _clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Room for need bytes in t->buf (mu held), or t->truncated set. */
static void _room(ttrain_trace *t, size_t need)
{
    if (t->truncated || need <= t->cap)
        return;
    size_t cap = t->cap ? t->cap : (size_t)1 << 16;
    while (cap < need)
        cap *= 2;
    if (cap > TTRAIN_TRACE_MAX_BYTES)
        cap = TTRAIN_TRACE_MAX_BYTES;
    char *b = need <= cap ? realloc(t->buf, cap) : NULL;
    if (b) {
        t->buf = b;
        t->cap = cap;
        return;
    }
    t->truncated = 1;
    torus_warn("rank %d: --trace keeps at most %zu MiB of events (or no "
               "memory for more): the trace ends at %.3f s",
               t->rank, TTRAIN_TRACE_MAX_BYTES >> 20, _clock() - t->t0);
}

/* Appends event e (json-c's text: escaped, one line) and releases it;
 * an event json-c had no memory for ends the trace like a full buffer. */
static void _append(ttrain_trace *t, json_object *e)
{
    const char *s = e ? torus_json_text(e) : NULL;
    size_t n = s ? strlen(s) : TTRAIN_TRACE_MAX_BYTES;
    pthread_mutex_lock(&t->mu);
    _room(t, t->len + n + 2);
    if (!t->truncated) {
        memcpy(t->buf + t->len, s, n);
        memcpy(t->buf + t->len + n, ",\n", 2);
        t->len += n + 2;
        t->events++;
    }
    pthread_mutex_unlock(&t->mu);
    json_object_put(e);
}

/* An event's common members; cat may be NULL. */
static json_object *_event(const char *name, const char *cat, const char *ph,
                           int pid, int tid)
{
    json_object *e = json_object_new_object();
    if (!e)
        return NULL;
    torus_json_string(e, "name", name);
    if (cat)
        torus_json_string(e, "cat", cat);
    torus_json_string(e, "ph", ph);
    torus_json_int64(e, "pid", pid);
    torus_json_int64(e, "tid", tid);
    return e;
}

/* e["args"] = {key: s} (a string) or {key: v} (s NULL). */
static json_object *_with_arg(json_object *e, const char *key, const char *s,
                              long long v)
{
    json_object *a = json_object_new_object();
    if (!e || !a) {
        json_object_put(a);
        return e;
    }
    if (s)
        torus_json_string(a, key, s);
    else
        torus_json_int64(a, key, v);
    json_object_object_add(e, "args", a);
    return e;
}

/* The calling thread's id, and its "thread_name" event the first time
 * it records into t. */
static int _tid(ttrain_trace *t, const char *role)
{
    if (_me.named == t)
        return _me.tid;
    _me.named = t;
    _me.tid = (int)syscall(SYS_gettid);
    _append(t, _with_arg(_event("thread_name", NULL, "M", t->rank, _me.tid),
                         "name", role, 0));
    return _me.tid;
}

/* A complete event [t0, t1] (seconds) on this thread; args (released
 * here) is its "args" object or NULL for {}. Names are the code's own or a
 * model's layer names, escaped by json-c. */
static void _complete(ttrain_trace *t, const char *cat, const char *name,
                      double t0, double t1, json_object *args)
{
    json_object *e = _event(name, cat, "X", t->rank, _tid(t, "step"));
    if (!args)
        args = json_object_new_object();
    if (!e || !args) {
        json_object_put(e);
        json_object_put(args);
        _append(t, NULL); /* no memory: the trace ends here */
        return;
    }
    torus_json_fixed(e, "ts", 1e6 * (t0 - t->t0), 3);
    torus_json_fixed(e, "dur", 1e6 * (t1 - t0), 3);
    json_object_object_add(e, "args", args);
    _append(t, e);
}

/* Process and thread names, so that a viewer shows "rank N (host)". */
static void _names(ttrain_trace *t)
{
    char host[64] = "?", name[96];
    gethostname(host, sizeof host - 1);
    snprintf(name, sizeof name, "rank %d (%s)", t->rank, host);
    _append(t, _with_arg(_event("process_name", NULL, "M", t->rank, 0),
                         "name", name, 0));
    _append(t, _with_arg(_event("process_sort_index", NULL, "M", t->rank, 0),
                         "sort_index", NULL, t->rank));
    _tid(t, "step");
}

/* Every rank learns whether any failed (ok: this rank's say). */
static int _agree(tcomm_t *comm, int world, int ok)
{
    double v = !ok;
    if (world > 1 && tcomm_max_double(comm, &v))
        return -1;
    return v == 0.0 ? 0 : 1;
}

static void _free(ttrain_trace *t)
{
    if (t->f)
        fclose(t->f);
    free(t->buf);
    free(t->chunk);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

int ttrain_trace_open(const char *path, tcomm_t *comm, int rank, int world,
                      ttrain_trace **out)
{
    *out = NULL;
    ttrain_trace *t = calloc(1, sizeof *t);
    char *chunk = world > 1 ? malloc(_CHUNK) : NULL;
    int ok = t && (world == 1 || chunk);
    if (ok && rank == 0 && !(t->f = fopen(path, "w")))
        TORUS_FAIL(TTRAIN_EIO, "cannot create '%s': %s", path, strerror(errno));
    else if (!ok)
        TORUS_FAIL(TTRAIN_ENOMEM, "rank %d: out of memory", rank);
    ok = ok && (rank != 0 || t->f);
    int rc = _agree(comm, world, ok);
    if (rc || !ok) {
        if (ok) /* another rank failed */
            TORUS_FAIL(TTRAIN_ERANKS,
                       "rank %d: another rank could not open its trace", rank);
        if (t && t->f)
            fclose(t->f);
        free(t);
        free(chunk);
        return -1;
    }
    snprintf(t->path, sizeof t->path, "%s", path);
    t->rank = rank;
    t->world = world;
    t->chunk = chunk;
    pthread_mutex_init(&t->mu, NULL);
    /* The time origin: right after a barrier every rank passed. */
    if (world > 1 && tcomm_barrier(comm)) {
        _free(t);
        return -1;
    }
    t->t0 = _clock();
    _names(t);
    *out = t;
    return 0;
}

void ttrain_trace_begin(ttrain_trace *t, const char *name)
{
    if (!t)
        return;
    if (_me.depth < _DEPTH)
        _me.open[_me.depth] = (_span){name, _clock()};
    _me.depth++;
}

/* Closes the layer group open inside the span at depth d (at the end of
 * its last layer). */
static void _group_end(ttrain_trace *t, int d)
{
    if (!_me.group[0] || _me.group_depth != d)
        return;
    char name[40];
    snprintf(name, sizeof name, "backward %s", _me.group);
    _complete(t, "step", name, _me.group_t0, _me.last_layer, NULL);
    _me.group[0] = 0;
}

static void _end(ttrain_trace *t, json_object *args)
{
    if (_me.depth <= 0) {
        json_object_put(args);
        return;
    }
    _me.depth--;
    _group_end(t, _me.depth + 1);
    if (_me.depth < _DEPTH) {
        _span s = _me.open[_me.depth];
        _complete(t, "step", s.name, s.t0, _clock(), args);
    } else {
        json_object_put(args);
    }
}

void ttrain_trace_end(ttrain_trace *t)
{
    if (t)
        _end(t, NULL);
}

void ttrain_trace_end_step(ttrain_trace *t, long step, int epoch)
{
    if (!t)
        return;
    json_object *a = json_object_new_object();
    if (a) {
        torus_json_int64(a, "step", step);
        torus_json_int64(a, "epoch", epoch);
    }
    _end(t, a);
}

/* The group of a layer name: its ResNet stage ("layer3" of "layer3.1.conv2"),
 * else "head" until a stage was seen in this backward, "stem" after. */
static void _group_of(const char *name, char *g, size_t n)
{
    const char *dot = strchr(name, '.');
    if (dot) {
        size_t k = (size_t)(dot - name) < n - 1 ? (size_t)(dot - name) : n - 1;
        memcpy(g, name, k);
        g[k] = 0;
        _me.staged = 1;
    } else {
        snprintf(g, n, "%s", _me.staged ? "stem" : "head");
    }
}

void ttrain_trace_layer(ttrain_trace *t, teng_net *net, int layer)
{
    teng_layer_info l;
    if (!t || _me.depth < 1 || teng_net_layer_info(net, layer, &l))
        return;
    double now = _clock();
    if (!_me.group[0] || _me.group_depth != _me.depth) {
        /* the first layer of this backward: its group began with it */
        _me.staged = 0;
        _group_of(l.name ? l.name : "", _me.group, sizeof _me.group);
        _me.group_t0 = _me.open[_me.depth - 1].t0;
        _me.group_depth = _me.depth;
    } else {
        char g[sizeof _me.group];
        _group_of(l.name ? l.name : "", g, sizeof g);
        if (strcmp(g, _me.group)) { /* layer ran since the last one ended */
            _group_end(t, _me.depth);
            snprintf(_me.group, sizeof _me.group, "%s", g);
            _me.group_t0 = _me.last_layer;
            _me.group_depth = _me.depth;
        }
    }
    _me.last_layer = now;
}

void ttrain_trace_bucket(void *ctx, const tcomm_fusion_span *s)
{
    ttrain_trace *t = ctx;
    if (!t)
        return;
    _tid(t, "comm");
    char name[32];
    snprintf(name, sizeof name, "allreduce bucket %d", s->bucket);
    json_object *a = json_object_new_object();
    if (a) {
        torus_json_int64(a, "bucket", s->bucket);
        torus_json_int64(a, "tensors", s->ntensors);
        torus_json_string(a, "algo", tcomm_algo_name(s->algo));
        torus_json_int64(a, "bytes", (long long)(s->count * sizeof(float)));
        torus_json_string(a, "wire", tcomm_wire_name(s->wire));
        torus_json_int64(a, "wire_bytes",
                         (long long)(s->count * tcomm_wire_bytes(s->wire)));
        torus_json_int64(a, "in_place", s->in_place);
        torus_json_fixed(a, "predicted_us",
                         s->predict_s >= 0 ? s->predict_s * 1e6 : -1.0, 1);
    }
    _complete(t, "comm", name, s->t0, s->t1, a);
}

/* Rank 0 writes rank r's events, which rank r sends in _CHUNK pieces;
 * every other rank takes part in the broadcasts. Returns a tcomm code. */
static int _gather_rank(ttrain_trace *t, tcomm_t *comm, int r, size_t len,
                        int *ok)
{
    for (size_t off = 0; off < len; off += _CHUNK) {
        size_t n = len - off < _CHUNK ? len - off : _CHUNK;
        if (t->rank == r)
            memcpy(t->chunk, t->buf + off, n);
        if (tcomm_bcast_bytes(comm, t->chunk, n, r))
            return -1;
        if (t->rank == 0 && fwrite(t->chunk, 1, n, t->f) != n)
            *ok = 0;
    }
    return 0;
}

/* The file's head: json-c's text of the outer object with an empty
 * "traceEvents" array, open before that array's "]}" (the events are
 * streamed in from every rank's buffer, not held as one object). */
static int _head(FILE *f, int world)
{
    json_object *o = json_object_new_object(), *other = json_object_new_object();
    const char *s = NULL;
    if (o && other) {
        torus_json_string(o, "displayTimeUnit", "ms");
        torus_json_string(other, "tool", "torus-train");
        torus_json_int64(other, "ranks", world);
        json_object_object_add(o, "otherData", other);
        other = NULL;
        json_object_object_add(o, "traceEvents", json_object_new_array());
        s = torus_json_text(o);
    }
    size_t n = s ? strlen(s) : 0;
    int ok = n > 2 && fprintf(f, "%.*s\n", (int)(n - 2), s) > 0;
    json_object_put(other);
    json_object_put(o);
    return ok;
}

/* Rank 0's file: the head, every rank's events in rank order, and a
 * closing event that says how many there are and which ranks stopped
 * recording early; then the array and the object close. */
static int _write(ttrain_trace *t, tcomm_t *comm, const double *len,
                  const double *trunc, size_t events, int *ok)
{
    if (t->rank == 0 && !_head(t->f, t->world))
        *ok = 0;
    for (int r = 0; r < t->world; r++) {
        if (r == 0 && t->rank == 0 && fwrite(t->buf, 1, t->len, t->f) != t->len)
            *ok = 0;
        if (r > 0 && _gather_rank(t, comm, r, (size_t)len[r], ok))
            return -1;
    }
    if (t->rank != 0)
        return 0;
    for (int r = 0; r < t->world; r++) {
        json_object *e = trunc[r] != 0.0
                             ? _event("trace_truncated", NULL, "i", r, 0)
                             : NULL;
        if (!e)
            continue;
        torus_json_string(e, "s", "p");
        torus_json_int64(e, "ts", 0);
        _with_arg(e, "max_bytes", NULL, (long long)TTRAIN_TRACE_MAX_BYTES);
        const char *line = torus_json_text(e);
        if (!line || fprintf(t->f, "%s,\n", line) < 0)
            *ok = 0;
        json_object_put(e);
    }
    json_object *end =
        _with_arg(_event("trace_end", NULL, "M", 0, 0), "events", NULL,
                  (long long)events);
    const char *s = end ? torus_json_text(end) : NULL;
    if (!s || fprintf(t->f, "%s\n]}\n", s) < 0 || fflush(t->f) ||
        ferror(t->f))
        *ok = 0;
    json_object_put(end);
    return 0;
}

int ttrain_trace_close(ttrain_trace *t, tcomm_t *comm, size_t *events)
{
    if (!t)
        return 0;
    int world = comm ? t->world : 1, rc = 0, ok = 1;
    /* Every rank's length and truncation, then its events. */
    double *v = calloc(2 * (size_t)world, sizeof *v);
    if (!v) {
        ok = 0;
        TORUS_FAIL(TTRAIN_ENOMEM, "--trace: rank %d: out of memory", t->rank);
    }
    if (_agree(comm, world, ok)) {
        rc = TORUS_FAIL(TTRAIN_ERANKS,
                        "--trace: a rank could not gather its events");
    } else {
        v[t->rank] = (double)t->len;
        v[world + t->rank] = t->truncated;
        double n = (double)t->events;
        if (world > 1 && (tcomm_sum_double(comm, v, 2 * world) ||
                          tcomm_sum_double(comm, &n, 1)))
            rc = torus_error_prefix(-1, "--trace");
        else if (_write(t, comm, v, v + world, (size_t)n, &ok))
            rc = torus_error_prefix(-1, "--trace");
        if (events)
            *events = (size_t)n;
    }
    if (t->f && fclose(t->f))
        ok = 0;
    t->f = NULL;
    if (!rc && t->rank == 0 && !ok)
        TORUS_FAIL(TTRAIN_EIO, "--trace: cannot write '%s': %s", t->path,
                   strerror(errno));
    if (!rc && _agree(comm, world, ok))
        rc = ok ? TORUS_FAIL(TTRAIN_ERANKS,
                             "--trace: rank 0 could not write '%s'", t->path)
                : TTRAIN_EIO; /* rank 0 said why */
    free(v);
    _free(t);
    return rc;
}
