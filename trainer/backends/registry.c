/* registry.c: the compute backends, best first, and the lookup by name
 * behind --backend (see tbackends.h). The only file that names each
 * backend; the engine includes none of them.
 *
 * oneDNN is linked in. The cuda backends live in a loadable module,
 * torus_cuda.so (trainer/backends/cuda/tcuda.h), which this file dlopens
 * the first time a cuda name or "auto" is resolved, from the folders of
 * TORUS_BACKEND_PATH and then $(pkglibdir); so the program links no CUDA
 * library and runs on nodes without one. A module that is absent, does not
 * load (a library it needs is missing), is from another torus version, or
 * finds no driver or a wrong library version is remembered with one
 * sentence saying which, reported when a cuda backend is asked for by
 * name, and skipped by "auto". */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/torus_env.h"
#include "common/torus_error.h"
#include "config.h"
#include "trainer/backends/cuda/tcuda.h"
#include "trainer/backends/tbackends.h"
#include "trainer/engine/backend.h"
#ifdef TORUS_HAVE_DNNL
#include "trainer/backends/dnnl/tdnnl.h"
#endif

#ifndef TORUS_PKGLIBDIR
#define TORUS_PKGLIBDIR "/usr/local/lib/torus"
#endif

/* Linked in, best first; the module's backends come before them. */
static const teng_backend_desc *const _linked[] = {
#ifdef TORUS_HAVE_DNNL
    &tdnnl_backend_desc,
#endif
    NULL,
};

/* The names the module provides, so they are known before it is loaded. */
static const char *const _module_names[] = {"cuda", "gpu", "cuda-fp16", NULL};

static struct {
    int tried;
    void *handle;
    const tcuda_module *m; /* loaded and checked; NULL otherwise */
    char path[PATH_MAX];   /* the file loaded, "" when none */
    char why[1536];        /* why m is NULL */
} _mod;

static int _is_module_name(const char *name)
{
    for (const char *const *n = _module_names; *n; n++)
        if (!strcmp(*n, name))
            return 1;
    return 0;
}

/* dlopens the module at path and checks it. 0, or -1 with _mod.why. A
 * module that fails its check stays loaded: the CUDA runtime may have
 * started on the driver, and unloading it under the driver is not safe. */
static int _load(const char *path)
{
    snprintf(_mod.path, sizeof _mod.path, "%s", path);
    _mod.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!_mod.handle) {
        snprintf(
            _mod.why, sizeof _mod.why,
            "the cuda backend module %.400s does not load: %.600s (it needs "
            "the CUDA runtime, cuBLAS, cuDNN 9 and NCCL 2: put their "
            "folders on LD_LIBRARY_PATH)",
            path, dlerror());
        return -1;
    }
    const tcuda_module *m = dlsym(_mod.handle, TCUDA_MODULE_SYMBOL);
    if (!m || m->abi != TCUDA_MODULE_ABI || !m->version ||
        strcmp(m->version, PACKAGE_VERSION)) {
        snprintf(_mod.why, sizeof _mod.why,
                 "%.400s is not the cuda module of torus %s (module interface "
                 "%d): it is from torus %.40s, interface %d; install matching "
                 "torus and torus-cuda packages",
                 path, PACKAGE_VERSION, TCUDA_MODULE_ABI,
                 m && m->version ? m->version : "?", m ? m->abi : -1);
        return -1;
    }
    char why[1024];
    if (m->check(why, sizeof why)) {
        snprintf(_mod.why, sizeof _mod.why, "cuda backend (%.400s): %s", path,
                 why);
        return -1;
    }
    _mod.m = m;
    return 0;
}

/* The first folder of the list (colon-separated) that holds the module's
 * file, written into path; 0 when found. */
static int _find_file(const char *list, char *path, size_t n)
{
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ":");
        if (len && len < n - sizeof TCUDA_MODULE_FILE - 1) {
            snprintf(path, n, "%.*s/%s", (int)len, p, TCUDA_MODULE_FILE);
            if (!access(path, F_OK))
                return 0;
        }
        p += len + (p[len] == ':');
    }
    return -1;
}

void tbackends_use_module(const tcuda_module *m)
{
    char why[1024];
    _mod.tried = 1;
    snprintf(_mod.path, sizeof _mod.path, "(linked in)");
    if (m->check(why, sizeof why))
        snprintf(_mod.why, sizeof _mod.why, "cuda backend: %s", why);
    else
        _mod.m = m;
}

static const tcuda_module *_module(void)
{
    if (_mod.tried)
        return _mod.m;
    _mod.tried = 1;
    const char *env = getenv(TORUS_ENV_BACKEND_PATH);
    char path[PATH_MAX];
    if (!_find_file(env, path, sizeof path) ||
        !_find_file(TORUS_PKGLIBDIR, path, sizeof path)) {
        _load(path);
        return _mod.m;
    }
    snprintf(_mod.why, sizeof _mod.why,
             "the cuda backend is not installed: no " TCUDA_MODULE_FILE
             " in %s%.600s%s" TORUS_PKGLIBDIR
             " (install the torus-cuda package, or name its folder "
             "in " TORUS_ENV_BACKEND_PATH ")",
             env && *env ? TORUS_ENV_BACKEND_PATH "=" : "",
             env && *env ? env : "", env && *env ? " or " : "");
    return NULL;
}

/* Why "auto" resolves as it does, in words for the banner: the module's
 * sentence when it is unusable (not installed, does not load, no driver),
 * or whether the loaded module sees a device. */
static char _auto_why[1600];

static void _auto_reason(const tcuda_module *m)
{
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!m)
        snprintf(_auto_why, sizeof _auto_why, "%s", _mod.why);
    else if (!m->fp32->probe())
        snprintf(_auto_why, sizeof _auto_why,
                 "the cuda module loaded but no GPU is visible "
                 "(CUDA_VISIBLE_DEVICES=%.64s)",
                 cvd ? cvd : "(unset)");
    else
        snprintf(_auto_why, sizeof _auto_why, "%d GPU(s) visible",
                 m->device_count());
}

static int _named(const teng_backend_desc *d, const char *name)
{
    if (!strcmp(d->name, name))
        return 1;
    for (const char *const *a = d->aliases; a && *a; a++)
        if (!strcmp(*a, name))
            return 1;
    return 0;
}

/* The descriptor called name; "auto": the first that probes usable. A
 * cuda name whose module is unusable: NULL with _mod.why. */
static const teng_backend_desc *_find(const char *name)
{
    int any = !strcmp(name, "auto");
    if (any || _is_module_name(name)) {
        const tcuda_module *m = _module();
        if (any)
            _auto_reason(m);
        if (m && (any ? m->fp32->probe() : _named(m->fp32, name)))
            return m->fp32;
        if (m && !any && _named(m->fp16, name))
            return m->fp16;
        if (!any)
            return NULL;
    }
    for (int i = 0; _linked[i]; i++) {
        const teng_backend_desc *d = _linked[i];
        if (any ? !d->probe || d->probe() : _named(d, name))
            return d;
    }
    return NULL;
}

const char *tbackends_list(void)
{
    static char list[128];
    if (!list[0]) {
        for (int i = 0; _linked[i]; i++) {
            strncat(list, _linked[i]->name, sizeof(list) - strlen(list) - 1);
            strncat(list, ", ", sizeof(list) - strlen(list) - 1);
        }
        strncat(list, "cuda, cuda-fp16 (module " TCUDA_MODULE_FILE ")",
                sizeof(list) - strlen(list) - 1);
    }
    return list;
}

int tbackends_gpus(const char *name)
{
    const teng_backend_desc *d = _find(name);
    const tcuda_module *m = _mod.m;
    return m && d && (d == m->fp32 || d == m->fp16) ? m->device_count() : 0;
}

int tbackends_device_memory(const teng_backend *bk, size_t *used, size_t *total)
{
    return _mod.m ? _mod.m->device_memory(bk, used, total) : -1;
}

int tbackends_fastpath(const teng_backend *bk, tcuda_fastpath *out)
{
    return _mod.m ? _mod.m->fastpath(bk, out) : -1;
}

int tbackends_tune_export(const teng_backend *bk, char **text, size_t *len)
{
    return _mod.m ? _mod.m->tune_export(bk, text, len) : -1;
}

int tbackends_tune_import(teng_backend *bk, const char *text, size_t len)
{
    return _mod.m ? _mod.m->tune_import(bk, text, len) : -1;
}

int tbackends_known(const char *name)
{
    if (!strcmp(name, "auto") || _is_module_name(name))
        return 1;
    for (int i = 0; _linked[i]; i++)
        if (_named(_linked[i], name))
            return 1;
    return 0;
}

void *tbackends_module_symbol(const char *name)
{
    return _mod.m ? dlsym(_mod.handle ? _mod.handle : RTLD_DEFAULT, name)
                  : NULL;
}

const char *tbackends_module_versions(void)
{
    return _mod.m ? _mod.m->versions() : NULL;
}

const char *tbackends_module_error(void)
{
    return _mod.m ? "" : _mod.why;
}

const char *tbackends_module_path(void)
{
    return _mod.m ? _mod.path : NULL;
}

int tbackends_open(const char *name, const teng_backend_opts *opts,
                   teng_backend **out)
{
    teng_backend_opts defaults = {0};
    *out = NULL;
    const teng_backend_desc *d = _find(name);
    if (!d && _is_module_name(name))
        return TORUS_FAIL(TENG_EINVAL, "--backend %s: %s", name, _mod.why);
    if (!d)
        return TORUS_FAIL(TENG_EINVAL,
                          "backend '%s' is not built in (available: %s)", name,
                          tbackends_list());
    return d->create(opts ? opts : &defaults, out);
}

const char *tbackends_auto_why(void)
{
    if (!_mod.tried)
        _find("auto");
    return _auto_why;
}
