/* tests/gpu/fake_libcuda.c: a stand-in for the NVIDIA driver library
 * (libcuda.so.1) with the three calls gpu_count makes, so that
 * run_gpu_rules.sh can show, on a machine with no GPU, what run-gpu does
 * when the driver loads but does not work.
 *
 * Contract: cuInit returns FAKE_CUDA_INIT (an integer; unset: 0, success);
 * cuDeviceGetCount sets FAKE_CUDA_COUNT (unset: 0) and returns 0;
 * cuGetErrorName and cuGetErrorString name 100 as the real driver does
 * (CUDA_ERROR_NO_DEVICE) and return 1 (CUDA_ERROR_INVALID_VALUE) for any
 * other code. Test-only: never installed, never bundled. */
#include <stdlib.h>

static int _env(const char *name)
{
    const char *v = getenv(name);
    return v ? atoi(v) : 0;
}

int cuInit(unsigned flags);
int cuDeviceGetCount(int *count);
int cuGetErrorName(int err, const char **s);
int cuGetErrorString(int err, const char **s);

int cuInit(unsigned flags)
{
    (void)flags;
    return _env("FAKE_CUDA_INIT");
}

int cuDeviceGetCount(int *count)
{
    *count = _env("FAKE_CUDA_COUNT");
    return 0;
}

int cuGetErrorName(int err, const char **s)
{
    if (err != 100)
        return 1;
    *s = "CUDA_ERROR_NO_DEVICE";
    return 0;
}

int cuGetErrorString(int err, const char **s)
{
    if (err != 100)
        return 1;
    *s = "no CUDA-capable device is detected";
    return 0;
}
