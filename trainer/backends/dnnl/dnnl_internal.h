/* dnnl_internal.h: state shared by the oneDNN backend's source files.
 *
 * Per net the backend keeps one memory descriptor per tensor (the layout
 * the producing primitive chose, usually nChw16c) and per param (the
 * weights layout the convolution chose), and per layer up to four
 * primitives with their argument lists prebuilt at bind time, so a step is
 * nothing but dnnl_primitive_execute calls on arena memory.
 */
#ifndef TORUS_TRAINER_DNNL_INTERNAL_H
#define TORUS_TRAINER_DNNL_INTERNAL_H

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "trainer/engine/backend.h"

typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
} tdnnl_impl;

/* Primitive slots of a layer. conv/fc: FWD (also inference), BWD (data),
 * BWW (weights), and WRE/DWRE, reorders of the weights into the layout
 * the backward-data kernel wants and of the weight gradient out of the
 * layout the backward-weights kernel produced, when these differ from
 * the forward's (oneDNN's fast forward and backward-data kernels want
 * transposed blocked weights; given the forward's, backward-data falls
 * back to the reference kernel, 100x slower). bn: FWD (training), INF,
 * BWD. relu/pool: FWD, BWD. add: FWD (binary + ReLU post-op), BWD
 * (in-place ReLU backward). */
enum {
    TDNNL_FWD,
    TDNNL_INF,
    TDNNL_BWD,
    TDNNL_BWW,
    TDNNL_WRE,
    TDNNL_DWRE,
    TDNNL_NSLOT
};

#define TDNNL_MAXARGS 12

typedef struct {
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[TDNNL_MAXARGS];
} tdnnl_exec;

typedef struct {
    dnnl_primitive_desc_t pd[TDNNL_NSLOT];
    tdnnl_exec ex[TDNNL_NSLOT];
    dnnl_memory_t mem[4 * TDNNL_MAXARGS];
    int nmem;
    size_t ws_off[3]; /* bn: mean, var, relu mask; pool: indices */
} tdnnl_layer;

typedef struct {
    size_t wtemp_off;        /* in the scratch arena, after the scratchpad */
    size_t wtemp_bytes;      /* largest reordered weights of any layer */
    dnnl_memory_desc_t *tmd; /* per tensor */
    dnnl_memory_desc_t *pmd; /* per param */
    tdnnl_layer *l;          /* per layer */
    tdnnl_layer *sum;        /* per tensor: gradient fan-in sum (FWD) */
} tdnnl_net;

/* Records "what: status" (TORUS_FAIL, with the caller's file:line) and
 * returns TENG_EBACKEND when a dnnl call fails. */
#define TDNNL_CHECK(bk, call)                                         \
    do {                                                              \
        dnnl_status_t _st = (call);                                   \
        if (_st != dnnl_success)                                      \
            return _tdnnl_fail((bk), __FILE__, __LINE__, #call, _st); \
    } while (0)

int _tdnnl_fail(teng_backend *bk, const char *file, int line, const char *what,
                dnnl_status_t st);

static inline tdnnl_impl *_tdnnl(teng_backend *bk)
{
    return bk->impl;
}

/* Plain (canonical) descriptor for dims: x, ab or abcd. */
void _tdnnl_plain_md(dnnl_memory_desc_t *md, int ndims, const int *dims);

/* Layer lifecycle (dnnl_layers.c). */
int _tdnnl_plan(teng_backend *bk, teng_net *net, int batch);
int _tdnnl_bind(teng_backend *bk, teng_net *net);
void _tdnnl_release(teng_backend *bk, teng_net *net);
int _tdnnl_forward(teng_backend *bk, teng_net *net, int layer, int training);
int _tdnnl_backward(teng_backend *bk, teng_net *net, int layer);
int _tdnnl_grad_sum(teng_backend *bk, teng_net *net, int tensor);

/* Reorders n bytes between two layouts of the same logical tensor. */
int _tdnnl_reorder(teng_backend *bk, const dnnl_memory_desc_t *smd, void *src,
                   const dnnl_memory_desc_t *dmd, void *dst);

#endif
