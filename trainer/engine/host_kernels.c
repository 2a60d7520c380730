/* host_kernels.c: f32 host kernels (see host_kernels.h). */
#include "trainer/engine/host_kernels.h"

#include "trainer/engine/elem_math.h"

double teng_host_xent(const float *logits, const int32_t *labels, int n, int k,
                      float s, float norm, float *dlogits)
{
    double total = 0.0;
    for (int i = 0; i < n; i++)
        total += teng_xent_row(logits + (size_t)i * k, k, labels[i], s, norm,
                               dlogits ? dlogits + (size_t)i * k : NULL);
    return total;
}

void teng_host_dropout_fwd(const float *x, float *y, uint8_t *mask, size_t n,
                           float p, uint64_t key)
{
    uint64_t cut = teng_dropout_cut(p);
    for (size_t i = 0; i < n; i++) {
        uint8_t keep = (uint8_t)teng_dropout_keep(key, i, cut);
        mask[i] = keep;
        y[i] = teng_dropout_elem(x[i], keep, p);
    }
}

void teng_host_dropout_bwd(const float *dy, float *dx, const uint8_t *mask,
                           size_t n, float p)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = teng_dropout_elem(dy[i], mask[i], p);
}

void teng_host_bn_running(float *rmean, float *rvar, const float *mean,
                          const float *var, int c, float m, size_t count)
{
    float unbias = count > 1 ? (float)count / (float)(count - 1) : 1.0f;
    for (int i = 0; i < c; i++) {
        rmean[i] = (1.0f - m) * rmean[i] + m * mean[i];
        rvar[i] = (1.0f - m) * rvar[i] + m * var[i] * unbias;
    }
}
