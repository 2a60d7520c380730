/* test_comm_gpu.c: libtcomm's device-memory fusion (tcomm_gpu.h) on one
 * rank. Everywhere: a bad TCOMM_GPU is refused naming the variable, and
 * without a CUDA device create fails with CUDA's reason (no crash). On a
 * GPU (tests/gpu/run runs it there): both paths (nccl when built, staged)
 * over a grads arena laid out like the engine's (params in forward order
 * with alignment gaps, registered in backward order, several buckets),
 * for three steps (events reused): every gradient comes back rounded to
 * the fp16 wire exactly as the host rounds it, the gaps stay zero, and
 * the inf/nan count is that of the sums (a NaN, an inf, and a value that
 * overflows fp16); the bucket plan names every bucket (NCCL: the device
 * path) and the steps ask the cost model nothing. */
#include <check.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "config.h"
#include "trainer/comm/core/model.h"
#include "trainer/comm/core/wire_math.h"
#include "trainer/comm/tcomm_gpu.h"

static tcomm_t *_c;
static int _ndev;

static void _setup(void)
{
    unsetenv("SLURM_NTASKS");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("TCOMM_GPU");
    tcomm_options o = {0};
    ck_assert_msg(tcomm_init(&o, &_c) == TCOMM_OK, "%s", torus_error_msg());
    if (cudaGetDeviceCount(&_ndev) != cudaSuccess)
        _ndev = 0;
}

static void _teardown(void)
{
    tcomm_finalize(_c);
}

static const tcomm_gpu_options _o = {
    .bucket_bytes = 4096, .algo = TCOMM_ALGO_RING, .wire = TCOMM_WIRE_FP16};

START_TEST(test_env_refused)
{
    tcomm_gpu_t *g = NULL;
    setenv("TCOMM_GPU", "mpi", 1);
    ck_assert_int_eq(tcomm_gpu_create(_c, &_o, NULL, &g), TCOMM_ERR_ENV);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "TCOMM_GPU='mpi'"));
    ck_assert_ptr_null(g);
    unsetenv("TCOMM_GPU");
}
END_TEST

START_TEST(test_no_device)
{
    if (_ndev > 0)
        return; /* the device cases below run instead */
    printf("SKIP: no CUDA device: test_comm_gpu checks only its error paths "
           "here; tests/gpu/run runs the device cases\n");
    tcomm_gpu_t *g = NULL;
    ck_assert_int_eq(tcomm_gpu_create(_c, &_o, NULL, &g), TCOMM_ERR_TRANSPORT);
    ck_assert_ptr_nonnull(strstr(torus_error_msg(), "rank 0: cuda"));
    ck_assert_ptr_null(g);
}
END_TEST

/* Params in forward order, 64-float aligned, like the engine's arena. */
enum { NP = 5 };
static const size_t _n[NP] = {1000, 3, 2500, 17, 600};

static size_t _off(int p)
{
    size_t o = 0;
    for (int i = 0; i < p; i++)
        o += (_n[i] + 63) / 64 * 64;
    return o;
}

/* Step s's gradient value of param p, element i; three non-finite sums. */
static float _val(int s, int p, size_t i)
{
    if (p == 2 && i == 7)
        return s == 1 ? NAN : 1e5f; /* 1e5 overflows fp16: inf */
    if (p == 0 && i == 999)
        return -INFINITY;
    return (float)((double)(i + 1) * (p + 1) * (s + 1) * 1.00001e-3);
}

static void _run_path(const char *path)
{
    setenv("TCOMM_GPU", path, 1);
    cudaStream_t st;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), 0);
    size_t total = _off(NP);
    float *d, *h = malloc(total * 4), *back = malloc(total * 4);
    ck_assert_int_eq(cudaMalloc((void **)&d, total * 4), 0);
    ck_assert_int_eq(cudaMemset(d, 0, total * 4), 0);
    tcomm_gpu_t *g;
    ck_assert_msg(tcomm_gpu_create(_c, &_o, st, &g) == TCOMM_OK, "%s",
                  torus_error_msg());
    ck_assert_str_eq(tcomm_gpu_path(g), path);
    for (int p = NP - 1; p >= 0; p--) {
        int ix;
        ck_assert_int_eq(tcomm_gpu_add(g, d + _off(p), _n[p], &ix), TCOMM_OK);
        ck_assert_int_eq(ix, NP - 1 - p);
    }
    ck_assert_msg(tcomm_gpu_seal(g) == TCOMM_OK, "%s", torus_error_msg());
    ck_assert_uint_gt(tcomm_gpu_bucket_count(g), 2);
    /* The bucket plan, resolved at seal: NCCL buckets on the device path,
     * staged ones on the host fusion's; the steps price nothing. */
    char plan[256], want[32];
    tcomm_gpu_plan_text(g, plan, sizeof plan);
    snprintf(want, sizeof want, "%zu buckets: ", tcomm_gpu_bucket_count(g));
    ck_assert_msg(strncmp(plan, want, strlen(want)) == 0, "%s", plan);
    ck_assert_msg((strstr(plan, " device") != NULL) == !strcmp(path, "nccl"),
                  "%s: %s", path, plan);
    unsigned long calls = tcomm_model_calls();
    for (int s = 0; s < 3; s++) {
        memset(h, 0, total * 4);
        for (int p = NP - 1; p >= 0; p--) { /* "backward", then ready */
            for (size_t i = 0; i < _n[p]; i++)
                h[_off(p) + i] = _val(s, p, i);
            ck_assert_int_eq(cudaMemcpyAsync(d + _off(p), h + _off(p),
                                             _n[p] * 4, cudaMemcpyHostToDevice,
                                             st),
                             0);
            ck_assert_int_eq(cudaStreamSynchronize(st), 0);
            ck_assert_int_eq(tcomm_gpu_ready(g, NP - 1 - p), TCOMM_OK);
        }
        tcomm_fusion_stats fs;
        ck_assert_msg(tcomm_gpu_finish(g, &fs) == TCOMM_OK, "%s",
                      torus_error_msg());
        ck_assert_uint_eq(fs.nonfinite, 2); /* -inf and (nan or 1e5) */
        ck_assert_int_eq(
            cudaMemcpyAsync(back, d, total * 4, cudaMemcpyDeviceToHost, st), 0);
        ck_assert_int_eq(cudaStreamSynchronize(st), 0);
        for (size_t i = 0; i < total; i++) {
            float want = tc_wm_unpack16(tc_wm_pack16(h[i], 1.0f, 0), 0);
            ck_assert_msg(!memcmp(&want, &back[i], 4) ||
                              (isnan(want) && isnan(back[i])),
                          "%s step %d element %zu: %a, want %a", path, s, i,
                          (double)back[i], (double)want);
        }
    }
    ck_assert_uint_eq(tcomm_model_calls(), calls);
    tcomm_gpu_destroy(g);
    cudaFree(d);
    cudaStreamDestroy(st);
    free(h);
    free(back);
    unsetenv("TCOMM_GPU");
}

START_TEST(test_device_paths)
{
    if (_ndev < 1)
        return; /* test_no_device said SKIP */
    _run_path("staged");
#ifdef TORUS_HAVE_NCCL
    _run_path("nccl");
#else
    printf("SKIP: built without NCCL: only the staged path ran\n");
#endif
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_gpu");
    TCase *t = tcase_create("gpu");
    tcase_add_unchecked_fixture(t, _setup, _teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_env_refused);
    tcase_add_test(t, test_no_device);
    tcase_add_test(t, test_device_paths);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
