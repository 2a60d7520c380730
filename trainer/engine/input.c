/* input.c: the 8-bit input path (teng.h): u8 NHWC images with per-image
 * flips, normalised into the data input tensor. A backend with its own
 * path (input_stage/input_use: a GPU copies on a copy stream and runs the
 * maths in a kernel) gets the calls; otherwise the engine stages the bytes
 * in host buffers of its own and normalises them on the host with the
 * same per-element maths (data/read/tdata_norm.h), then uploads the
 * result like teng_net_set_input. Both give the loader's float batch bit
 * for bit, so a run may switch paths without changing a result. */
#include <stdlib.h>
#include <string.h>

#include "data/read/tdata_norm.h"
#include "trainer/engine/internal.h"

int teng_backend_has_input_u8(const teng_backend *bk)
{
    return bk->ops->input_stage && bk->ops->input_use;
}

void *teng_backend_host_alloc(teng_backend *bk, size_t bytes)
{
    if (bk->ops->host_alloc)
        return bk->ops->host_alloc(bk, bytes);
    return malloc(bytes ? bytes : 1);
}

void teng_backend_host_free(teng_backend *bk, void *p)
{
    if (bk->ops->host_free)
        bk->ops->host_free(bk, p);
    else
        free(p);
}

/* The input's bytes per image, after checking the net and n. */
static int _check(const teng_net *net, int slot, int n, size_t *img)
{
    if (!net->compiled)
        return TORUS_FAIL(TENG_ESTATE, "8-bit input: the net is not compiled");
    if (slot < 0 || slot > 1)
        return TORUS_FAIL(TENG_EINVAL, "8-bit input: slot %d is not 0 or 1",
                          slot);
    teng_shape s = net->t[net->input].shape;
    if (n != net->batch)
        return TORUS_FAIL(TENG_EINVAL,
                          "8-bit input: %d images for a batch of %d", n,
                          net->batch);
    if (s.c < 1 || s.c > 3)
        return TORUS_FAIL(TENG_EINVAL,
                          "8-bit input: %d channels (1 to 3 can be normalised)",
                          s.c);
    *img = (size_t)s.c * s.h * s.w;
    return TENG_OK;
}

/* Grows *buf to n bytes (a batch-size change or the first call). */
static int _room(void **buf, size_t *cap, size_t n)
{
    if (n <= *cap)
        return TENG_OK;
    void *p = realloc(*buf, n);
    if (!p)
        return TORUS_FAIL(TENG_ENOMEM,
                          "8-bit input: out of memory for %zu "
                          "bytes",
                          n);
    *buf = p;
    *cap = n;
    return TENG_OK;
}

int teng_net_stage_input_u8(teng_net *net, int slot, const uint8_t *px,
                            const uint8_t *flips, int n)
{
    size_t img;
    int rc = _check(net, slot, n, &img);
    if (rc)
        return rc;
    teng_backend *bk = net->bk;
    if (teng_backend_has_input_u8(bk)) {
        rc = bk->ops->input_stage(bk, net, slot, px, flips, n);
        return rc ? torus_error_prefix(rc, "8-bit input on %s", bk->ops->name)
                  : TENG_OK;
    }
    size_t bytes = img * (size_t)n;
    if ((rc = _room((void **)&net->in_px[slot], &net->in_cap[slot],
                    bytes + (size_t)n)))
        return rc;
    memcpy(net->in_px[slot], px, bytes);
    memcpy(net->in_px[slot] + bytes, flips, (size_t)n);
    net->in_n[slot] = n;
    return TENG_OK;
}

/* The host fallback of use: one table per channel (as the loader builds
 * it), then every element of the canonical NCHW batch from its byte. */
static int _use_host(teng_net *net, int slot, const float *scale,
                     const float *bias)
{
    teng_shape s = net->t[net->input].shape;
    int n = net->in_n[slot];
    size_t img = (size_t)s.c * s.h * s.w, total = img * (size_t)n;
    int rc =
        _room((void **)&net->in_f32, &net->in_f32_cap, total * sizeof(float));
    if (rc)
        return rc;
    float lut[3][256];
    for (int c = 0; c < s.c; c++)
        for (unsigned v = 0; v < 256; v++)
            lut[c][v] = tdata_norm_px(v, scale[c], bias[c]);
    const uint8_t *px = net->in_px[slot], *flips = px + total;
    for (size_t i = 0; i < total; i++) {
        int ch;
        size_t at = tdata_norm_src(i, s.c, s.h, s.w, 0, flips, &ch);
        net->in_f32[i] = lut[ch][px[at]];
    }
    net->in_n[slot] = 0;
    return teng_net_set_input(net, net->in_f32);
}

int teng_net_use_input_u8(teng_net *net, int slot, const float scale[3],
                          const float bias[3])
{
    size_t img;
    int rc = _check(net, slot, net->batch, &img);
    if (rc)
        return rc;
    teng_backend *bk = net->bk;
    if (teng_backend_has_input_u8(bk)) {
        rc = bk->ops->input_use(bk, net, slot, scale, bias);
        return rc ? torus_error_prefix(rc, "8-bit input on %s", bk->ops->name)
                  : TENG_OK;
    }
    if (net->in_n[slot] != net->batch)
        return TORUS_FAIL(TENG_ESTATE,
                          "8-bit input: slot %d holds %d images, the batch is "
                          "%d",
                          slot, net->in_n[slot], net->batch);
    return _use_host(net, slot, scale, bias);
}
