/* comm_nccl_check.c: the NCCL backend on device memory, run by
 * comm_nccl.sh where a GPU is lent. Every algorithm and wire, sizes that do
 * and do not divide by P: results match the double reference, ranks agree
 * bitwise, inf/nan is counted, and a reduction enqueued behind work on a
 * producer stream sees that work (event ordering, no device-wide sync).
 * Exits 77 with SKIP when there is no CUDA device. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/bench/testdata.h"
#include "trainer/comm/tcomm_nccl.h"

static double _hash(const float *x, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < n * 4; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return (double)(h >> 11);
}

int main(int argc, char **argv)
{
    tcomm_options o = {0};
    for (int i = 1; i + 1 < argc; i += 2)
        if (tcomm_options_set(&o, argv[i], argv[i + 1])) {
            fprintf(stderr, "comm_nccl_check: %s\n", torus_error_msg());
            return 2;
        }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    tcomm_t *c;
    tcomm_nccl_t *n;
    if (tcomm_init(&o, &c) || tcomm_nccl_init(c, -1, &n)) {
        fprintf(stderr, "comm_nccl_check: %s\n", torus_error_msg());
        return 1;
    }
    tcomm_startup_done(c);
    tcomm_info in;
    tcomm_info_get(c, &in);
    static const size_t sizes[] = {1, 5, 1000, 4099, 1 << 20};
    int fails = 0;
    size_t maxn = 1 << 20;
    float *h = malloc(maxn * 4), *d;
    cudaMalloc((void **)&d, maxn * 4);
    cudaStream_t compute;
    cudaStreamCreate(&compute);
    for (int a = TCOMM_ALGO_FLAT; a < TCOMM_ALGO_COUNT; a++)
        for (int w = TCOMM_WIRE_FP32; w < TCOMM_WIRE_COUNT; w++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                size_t cnt = sizes[k], bad = 0;
                bench_testdata_fill(h, cnt, in.rank, 31 + cnt);
                /* The copy is queued on the compute stream: the reduction must
                 * wait for it through the producer event. */
                cudaMemcpyAsync(d, h, cnt * 4, cudaMemcpyHostToDevice, compute);
                tcomm_rc rc = tcomm_nccl_allreduce(n, d, cnt, a, w,
                                                   TCOMM_AVERAGE, compute);
                if (rc == TCOMM_ERR_UNSUPPORTED)
                    continue;
                if (rc || tcomm_nccl_wait(n, compute, &bad)) {
                    fprintf(stderr, "rank %d: %s\n", in.rank,
                            torus_error_msg());
                    return 1;
                }
                cudaMemcpyAsync(h, d, cnt * 4, cudaMemcpyDeviceToHost, compute);
                cudaStreamSynchronize(compute);
                double wrong = (double)bench_testdata_wrong(
                    h, cnt, in.size, 31 + cnt, 1.0 / in.size, w, NULL);
                double hx = _hash(h, cnt), hmax = hx, hmin = -hx,
                       nb = (double)bad;
                /* Every rank makes every call; a failed one fails the
                 * case. */
                int crc = tcomm_sum_double(c, &wrong, 1);
                crc |= tcomm_max_double(c, &hmax);
                crc |= tcomm_max_double(c, &hmin);
                crc |= tcomm_sum_double(c, &nb, 1);
                int ok = !crc && wrong == 0 && hmax == -hmin && nb == 0;
                fails += !ok;
                if (in.rank == 0)
                    printf("nccl %-8s %-5s n=%-8zu wrong=%.0f agree=%s "
                           "nonfinite=%.0f %s\n",
                           tcomm_algo_name(a), tcomm_wire_name(w), cnt, wrong,
                           hmax == -hmin ? "yes" : "NO", nb,
                           ok ? "ok" : "FAIL");
            }
    /* fp16 overflow is reported: 1e6 is finite in fp32, not in fp16. */
    for (size_t i = 0; i < 64; i++)
        h[i] = i == 7 ? 1e6f * (float)in.size : 0.0f;
    cudaMemcpyAsync(d, h, 64 * 4, cudaMemcpyHostToDevice, compute);
    size_t bad = 0;
    if (tcomm_nccl_allreduce(n, d, 64, TCOMM_ALGO_RING, TCOMM_WIRE_FP16,
                             TCOMM_AVERAGE, compute) ||
        tcomm_nccl_wait(n, compute, &bad) || bad != 1) {
        fprintf(stderr, "rank %d: fp16 overflow not reported (%zu): %s\n",
                in.rank, bad, torus_error_msg());
        fails++;
    }
    if (in.rank == 0 && in.size == 1)
        printf("one process: every algorithm ran as NCCL collectives on "
               "1-rank communicators\n");
    if (in.rank == 0)
        printf("%s\n", fails ? "FAIL" : "PASS");
    cudaFree(d);
    free(h);
    tcomm_nccl_finalize(n);
    tcomm_finalize(c);
    return fails ? 1 : 0;
}
