/* tests/gpu/gpu_count.c: whether this node has a GPU that the NVIDIA driver
 * can run, for run-gpu before it runs anything.
 *
 * Contract: loads the driver library (libcuda.so.1) by its soname, as the
 * CUDA runtime does, initialises it (cuInit) and counts its devices
 * (cuDeviceGetCount). Prints one line and exits:
 *   0  "N GPU(s): <driver file>"   N >= 1
 *   3  "no GPU: <why>"             no driver library, cuInit failed (the
 *                                  driver's error name and text), or no
 *                                  device counted
 *   2  usage.
 * A device file without a working driver (/dev/nvidia0 left by a driver
 * that is not loaded, a container without the device) is therefore "no
 * GPU", which /dev/nvidia* alone cannot tell. It links no CUDA library and
 * needs no CUDA header: the three driver calls are declared here with the
 * driver API's C types (CUresult is an int enum; CUdevice an int). */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

typedef int (*_init_fn)(unsigned flags);
typedef int (*_count_fn)(int *count);
typedef int (*_errstr_fn)(int err, const char **s);

/* The file the driver library was loaded from (dlinfo's link map: the
 * loaded object, not a guess from the search path). */
static const char *_file_of(void *h)
{
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm || !lm->l_name || !*lm->l_name)
        return "?";
    return lm->l_name;
}

/* "NAME: text" of a driver error, or its number when the driver cannot
 * name it. */
static void _errname(void *h, int err, char *buf, size_t n)
{
    _errstr_fn name = (_errstr_fn)(void (*)(void))dlsym(h, "cuGetErrorName");
    _errstr_fn text = (_errstr_fn)(void (*)(void))dlsym(h, "cuGetErrorString");
    const char *a = NULL, *b = NULL;
    if (name && name(err, &a))
        a = NULL;
    if (text && text(err, &b))
        b = NULL;
    snprintf(buf, n, "%s (%d)%s%s", a ? a : "CUDA driver error", err,
             b ? ": " : "", b ? b : "");
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "usage: gpu_count\n");
        return 2;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("no GPU: the NVIDIA driver library libcuda.so.1 cannot be "
               "loaded (%s)\n",
               dlerror());
        return 3;
    }
    _init_fn init = (_init_fn)(void (*)(void))dlsym(h, "cuInit");
    _count_fn count = (_count_fn)(void (*)(void))dlsym(h, "cuDeviceGetCount");
    if (!init || !count) {
        printf("no GPU: %s has no cuInit or cuDeviceGetCount\n", _file_of(h));
        return 3;
    }
    char why[256];
    int err = init(0), n = 0;
    if (err) {
        _errname(h, err, why, sizeof why);
        printf("no GPU: the NVIDIA driver (%s) cannot be initialised: "
               "cuInit: %s\n",
               _file_of(h), why);
        return 3;
    }
    if ((err = count(&n))) {
        _errname(h, err, why, sizeof why);
        printf("no GPU: cuDeviceGetCount: %s (driver %s)\n", why, _file_of(h));
        return 3;
    }
    if (n < 1) {
        printf("no GPU: the NVIDIA driver (%s) counts 0 devices\n",
               _file_of(h));
        return 3;
    }
    printf("%d GPU(s): %s\n", n, _file_of(h));
    return 0;
}
