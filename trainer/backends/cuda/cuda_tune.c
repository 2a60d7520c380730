/* trainer/backends/cuda/cuda_tune.c: measured convolution algorithms and
 * the tune cache file (see cuda_tune.h). */
#include "trainer/backends/cuda/cuda_tune.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "trainer/engine/teng.h"

#define _MAGIC  "torus-conv-algos 1"
#define _NNUM   17 /* the numbers of an entry line */
#define _MAXDIM (1 << 20)

static uint32_t _fnv32(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

/* The GPU name as one word (spaces and controls to '_'). */
static void _word(const char *in, char *out, size_t n)
{
    size_t i = 0;
    for (; in[i] && i + 1 < n; i++)
        out[i] = (unsigned char)in[i] <= ' ' ? '_' : in[i];
    out[i] = 0;
}

int tcuda_tune_pick(const tcuda_tune_result *r, int n, size_t ws_max,
                    int deterministic, tcuda_algo_val *out)
{
    for (int i = 0; i < n; i++)
        if (r[i].ok && r[i].memory <= ws_max &&
            (!deterministic || r[i].deterministic)) {
            out->algo = r[i].algo;
            out->workspace = r[i].memory;
            out->math = r[i].math;
            return 0;
        }
    return -1;
}

int tcuda_tune_default_path(char *buf, size_t n)
{
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int len;
    if (x && *x == '/')
        len = snprintf(buf, n, "%s/torus/conv-algos", x);
    else if (h && *h)
        len = snprintf(buf, n, "%s/.cache/torus/conv-algos", h);
    else
        return -1;
    return len > 0 && (size_t)len < n ? 0 : -1;
}

/* The key's and value's numbers in file order. */
static void _nums(const tcuda_algo_key *k, const tcuda_algo_val *v, int det,
                  long f[_NNUM])
{
    long a[_NNUM] = {k->dir,   k->n,      k->c,  k->h,    k->w,   k->k,
                     k->kh,    k->kw,     k->sh, k->sw,   k->ph,  k->pw,
                     k->dtype, k->layout, det,   v->algo, v->math};
    memcpy(f, a, sizeof(a));
}

/* Why the numbers of an entry are not a valid one, or NULL. */
static const char *_bad_nums(const tcuda_tuner *t, const long f[_NNUM])
{
    if (f[0] < TCUDA_FWD || f[0] > TCUDA_BWD_FILTER)
        return "direction out of range";
    for (int i = 1; i <= 7; i++)
        if (f[i] < 1 || f[i] > _MAXDIM)
            return "shape out of range";
    for (int i = 8; i <= 11; i++)
        if (f[i] < (i < 10 ? 1 : 0) || f[i] > _MAXDIM)
            return "stride or padding out of range";
    if (f[12] < 0 || f[12] > 64 || f[13] < 0 || f[13] > 64 || f[14] < 0 ||
        f[14] > 1)
        return "data type, layout or mode out of range";
    if (f[15] < 0 || f[15] >= t->ops.nalgo[f[0]])
        return "algorithm id out of range for its direction";
    if (f[16] < 0 || f[16] >= t->ops.nmath)
        return "math type out of range";
    return NULL;
}

/* Parses one entry line (NUL-terminated, no newline) into key and val. */
static const char *_parse_entry(const tcuda_tuner *t, const char *line,
                                tcuda_algo_key *key, tcuda_algo_val *val,
                                int *det)
{
    const char *hash = strstr(line, " #");
    long f[_NNUM];
    char *end;
    if (strncmp(line, "E ", 2) || !hash)
        return "not an entry line";
    errno = 0;
    unsigned long sum = strtoul(hash + 2, &end, 16);
    if (errno || end != hash + 10 || *end ||
        sum != _fnv32(line, (size_t)(hash - line)))
        return "checksum does not match (damaged)";
    const char *p = line + 2;
    for (int i = 0; i < _NNUM; i++) {
        errno = 0;
        f[i] = strtol(p, &end, 10);
        if (errno || end == p || (*end != ' '))
            return "wrong number of fields";
        p = end;
    }
    if (p != hash)
        return "wrong number of fields";
    const char *why = _bad_nums(t, f);
    if (why)
        return why;
    *key = (tcuda_algo_key){(int)f[0],  (int)f[1], (int)f[2],  (int)f[3],
                            (int)f[4],  (int)f[5], (int)f[6],  (int)f[7],
                            (int)f[8],  (int)f[9], (int)f[10], (int)f[11],
                            (int)f[12], (int)f[13]};
    *det = (int)f[14];
    *val = (tcuda_algo_val){(int)f[15], 0, (int)f[16]};
    return NULL;
}

/* The whole file, NUL-terminated, after its size is checked; NULL when
 * it is missing (silent) or unusable (said). */
static char *_slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    struct stat st;
    char *buf = NULL;
    if (!fp) {
        if (errno != ENOENT)
            torus_warn("tune cache %s: %s: re-tuning", path, strerror(errno));
        return NULL;
    }
    if (fstat(fileno(fp), &st) || !S_ISREG(st.st_mode))
        torus_warn("tune cache %s: not a regular file: ignored", path);
    else if ((size_t)st.st_size > TCUDA_TUNE_MAX_BYTES)
        torus_warn("tune cache %s: %lld bytes, more than a tune cache "
                   "holds (%zu): ignored, re-tuning",
                   path, (long long)st.st_size, TCUDA_TUNE_MAX_BYTES);
    else if ((buf = malloc((size_t)st.st_size + 1))) {
        *len = fread(buf, 1, (size_t)st.st_size, fp);
        buf[*len] = 0;
        if (strlen(buf) != *len) {
            torus_warn("tune cache %s: binary data (a NUL byte): ignored, "
                       "re-tuning",
                       path);
            free(buf);
            buf = NULL;
        }
    }
    fclose(fp);
    return buf;
}

/* The next line of *p (NUL-terminated in place), or NULL at the end. */
static char *_line(char **p)
{
    char *s = *p, *nl;
    if (!s || !*s)
        return NULL;
    nl = strchr(s, '\n');
    if (nl) {
        *nl = 0;
        *p = nl + 1;
    } else
        *p = s + strlen(s);
    return s;
}

/* The header's device against ours: NULL when it matches, else why. */
static const char *_bad_header(const tcuda_tuner *t, const char *dev,
                               const char *cnt, long *entries, char *why,
                               size_t n)
{
    char gpu[64], mine[64];
    int sms = 0;
    long cudnn = 0;
    char *end;
    _word(t->dev.gpu, mine, sizeof mine);
    if (!dev ||
        sscanf(dev, "device %63s sms=%d cudnn=%ld", gpu, &sms, &cudnn) != 3 ||
        !cnt || strncmp(cnt, "entries ", 8))
        return "no device or entries line (damaged)";
    if (strcmp(gpu, mine) || sms != t->dev.sms) {
        snprintf(why, n, "tuned on %s with %d SMs, this is %s with %d SMs", gpu,
                 sms, mine, t->dev.sms);
        return why;
    }
    if (cudnn != t->dev.cudnn) {
        snprintf(why, n, "tuned with cuDNN %ld, this is cuDNN %ld (stale)",
                 cudnn, t->dev.cudnn);
        return why;
    }
    errno = 0;
    *entries = strtol(cnt + 8, &end, 10);
    if (errno || *end || *entries < 0 || *entries > TCUDA_TUNE_MAX_ENTRIES) {
        snprintf(why, n, "an entries count of '%.20s' (at most %d)", cnt + 8,
                 TCUDA_TUNE_MAX_ENTRIES);
        return why;
    }
    return NULL;
}

/* The entry lines after the header into t->file; the number accepted. */
static int _load_entries(tcuda_tuner *t, const char *path, char *p, long want)
{
    int lineno = 3, good = 0, bad = 0;
    long seen = 0;
    char *s;
    while ((s = _line(&p))) {
        tcuda_algo_key key;
        tcuda_algo_val val, old;
        int det;
        const char *why = _parse_entry(t, s, &key, &val, &det);
        lineno++;
        seen++;
        if (!why && tcuda_algo_get(&t->file, &key, &old))
            why = "a second entry for the same shape";
        if (why) {
            if (!bad++)
                torus_warn("tune cache %s: line %d: %s: dropped, re-tuned",
                           path, lineno, why);
            continue;
        }
        if (det != t->deterministic)
            continue; /* the other mode's entry: kept out of this run */
        if (tcuda_algo_put(&t->file, &key, &val))
            return good;
        good++;
    }
    if (bad > 1)
        torus_warn("tune cache %s: %d bad entries dropped", path, bad);
    if (seen != want)
        torus_warn("tune cache %s: %ld entry lines where the header says "
                   "%ld (truncated or damaged)",
                   path, seen, want);
    return good;
}

int tcuda_tune_load_text(tcuda_tuner *t, const char *name, char *buf)
{
    long entries = 0;
    char why[192], *p = buf;
    const char *magic = _line(&p), *dev = _line(&p), *cnt = _line(&p);
    const char *bad = NULL;
    tcuda_algo_free(&t->file);
    if (!magic || strcmp(magic, _MAGIC))
        bad = "not a torus tune cache of this version";
    else
        bad = _bad_header(t, dev, cnt, &entries, why, sizeof why);
    if (bad) {
        torus_warn("tune cache %s: %s: ignored, re-tuning", name, bad);
        return 0;
    }
    return _load_entries(t, name, p, entries);
}

int tcuda_tune_load(tcuda_tuner *t, const char *path)
{
    size_t len = 0;
    tcuda_algo_free(&t->file);
    char *buf = _slurp(path, &len);
    if (!buf)
        return 0;
    int n = tcuda_tune_load_text(t, path, buf);
    free(buf);
    return n;
}

int tcuda_tune_open(tcuda_tuner *t, const char *path,
                    const tcuda_tune_device *dev, const tcuda_tune_ops *ops,
                    int tune, int deterministic, size_t ws_max)
{
    memset(t, 0, sizeof(*t));
    t->ops = *ops;
    t->dev = *dev;
    t->tune = tune;
    t->deterministic = deterministic != 0;
    t->ws_max = ws_max;
    if (path && !(t->path = strdup(path)))
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    if (path && tune)
        tcuda_tune_load(t, path);
    return TENG_OK;
}

/* The file's entry for key, if cuDNN still offers its algorithm within
 * the limit (its workspace asked anew). */
static int _from_file(tcuda_tuner *t, const tcuda_algo_key *key,
                      tcuda_algo_val *out)
{
    tcuda_algo_val v;
    size_t ws = 0;
    if (!tcuda_algo_get(&t->file, key, &v))
        return 0;
    if (t->ops.workspace(t->ops.ctx, key, v.algo, v.math, &ws) ||
        ws > t->ws_max) {
        torus_warn("tune cache %s: algorithm %d is not offered for a "
                   "convolution of %dx%dx%dx%d within the workspace limit: "
                   "re-tuned",
                   t->path, v.algo, key->n, key->c, key->h, key->w);
        return 0;
    }
    v.workspace = ws;
    *out = v;
    return 1;
}

/* Measures key; 0 and *out, or -1. */
static int _measure(tcuda_tuner *t, const tcuda_algo_key *key,
                    tcuda_algo_val *out)
{
    tcuda_tune_result r[16];
    int n = t->ops.find(t->ops.ctx, key, r, 16);
    return n > 0 && !tcuda_tune_pick(r, n, t->ws_max, t->deterministic, out)
               ? 0
               : -1;
}

int tcuda_tune_resolve(tcuda_tuner *t, const tcuda_algo_key *key,
                       tcuda_algo_val *out)
{
    if (tcuda_algo_get(&t->mem, key, out))
        return TENG_OK;
    if (t->tune && _from_file(t, key, out))
        t->cached++;
    else if (t->tune && !_measure(t, key, out)) {
        t->tuned++;
        t->dirty = 1;
        if (tcuda_algo_put(&t->file, key, out))
            return TENG_ENOMEM;
    } else {
        if (t->tune && !t->said_fallback++)
            torus_warn("cuda: measuring a convolution of %dx%dx%dx%d gave "
                       "no usable algorithm: cuDNN's heuristics chose",
                       key->n, key->c, key->h, key->w);
        if (t->ops.heuristic(t->ops.ctx, key, out))
            return TORUS_FAIL(TENG_EBACKEND, "cuDNN offers no convolution "
                                             "algorithm for this shape");
        t->heuristic++;
    }
    return tcuda_algo_put(&t->mem, key, out);
}

/* Writes t->file's entries to fp. */
static void _write(const tcuda_tuner *t, FILE *fp)
{
    char gpu[64], line[256];
    _word(t->dev.gpu, gpu, sizeof gpu);
    fprintf(fp, "%s\ndevice %s sms=%d cudnn=%ld\nentries %zu\n", _MAGIC, gpu,
            t->dev.sms, t->dev.cudnn, t->file.n);
    for (size_t i = 0; i < t->file.cap; i++) {
        long f[_NNUM];
        int len = 1;
        if (!t->file.used[i])
            continue;
        _nums(&t->file.key[i], &t->file.val[i], t->deterministic, f);
        line[0] = 'E';
        for (int j = 0; j < _NNUM; j++)
            len +=
                snprintf(line + len, sizeof line - (size_t)len, " %ld", f[j]);
        fprintf(fp, "%s #%08x\n", line, _fnv32(line, (size_t)len));
    }
}

int tcuda_tune_text(const tcuda_tuner *t, char **text, size_t *len)
{
    FILE *fp = open_memstream(text, len);
    if (!fp)
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    _write(t, fp);
    if (fclose(fp))
        return TORUS_FAIL(TENG_ENOMEM, "out of memory");
    return TENG_OK;
}

/* mkdir of path's folder (one level: the cache folder's torus/). */
static void _mkdir_parent(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash || (size_t)(slash - path) >= sizeof dir || slash == path)
        return;
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = 0;
    mkdir(dir, 0755);
}

int tcuda_tune_save(tcuda_tuner *t)
{
    char tmp[PATH_MAX];
    if (!t->path || !t->dirty)
        return 0;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", t->path, (long)getpid()) >=
        (int)sizeof tmp)
        return -1;
    _mkdir_parent(t->path);
    FILE *fp = fopen(tmp, "w");
    if (!fp) {
        torus_warn("tune cache %s: cannot write: %s", tmp, strerror(errno));
        return -1;
    }
    _write(t, fp);
    if (fclose(fp) || rename(tmp, t->path)) {
        torus_warn("tune cache %s: cannot write: %s", t->path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    t->dirty = 0;
    return 0;
}

void tcuda_tune_close(tcuda_tuner *t)
{
    tcuda_algo_free(&t->mem);
    tcuda_algo_free(&t->file);
    free(t->path);
    memset(t, 0, sizeof(*t));
}
