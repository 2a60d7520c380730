/* train/ckpt_meta.c: what checkpoints record of a run (ttrain_ckpt_meta,
 * see ttrain_checkpoint.h), as text that a resume compares: the model,
 * the global batch schedule, the ranks, the wire, the loss-scale mode and
 * the training data's identity. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "trainer/train/ttrain_checkpoint.h"

/* The model and the global batch schedule as checkpoints record them. */
static int _text(ttrain_ckpt_meta *m, const tmodel_spec *ms,
                 const topt_schedule *sched)
{
    char depth[32] = "", *text = NULL;
    size_t len = 0;
    if (ms->kind == TMODEL_CIFAR_RESNET)
        snprintf(depth, sizeof(depth), " depth %d", ms->depth);
    snprintf(m->model, sizeof(m->model), "%s%s, %dx%dx%d input, %d classes",
             tmodel_name(ms->kind), depth, ms->in_channels, ms->image_size,
             ms->image_size, ms->classes);
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return -1;
    for (int i = 0; i < sched->nstages; i++)
        fprintf(f, "%s%d:%d", i ? "," : "", sched->stage[i].epoch,
                sched->stage[i].global_batch);
    fprintf(f, " over %ld samples per epoch", sched->dataset_size);
    fclose(f);
    int rc = !text || len >= sizeof(m->batch) ? -1 : 0;
    if (!rc)
        memcpy(m->batch, text, len + 1);
    free(text);
    return rc;
}

int ttrain_ckpt_meta_fill(ttrain_ckpt_meta *m, const tmodel_spec *model,
                          const topt_schedule *sched, int world,
                          const char *wire, const char *loss_scale,
                          const char *data)
{
    char id[96], index[600];
    m->world = world;
    m->plan = sched; /* a resumed position must fit it */
    snprintf(m->wire, sizeof(m->wire), "%s", wire);
    snprintf(m->loss_scale, sizeof(m->loss_scale), "%s", loss_scale);
    if (_text(m, model, sched))
        return TORUS_FAIL(TTRAIN_CKPT_ECONFIG,
                          "the batch schedule is too long to record");
    if (!data[0]) {
        snprintf(m->data, sizeof(m->data), "synthetic data");
        snprintf(m->data_id, sizeof(m->data_id), "synthetic");
        return 0;
    }
    snprintf(m->data, sizeof(m->data), "%s", data);
    snprintf(index, sizeof(index), "%s/train-index.txt", data);
    int rc = ttrain_ckpt_file_id(index, (uint64_t)1 << 30, id, sizeof(id));
    if (rc)
        return rc;
    snprintf(m->data_id, sizeof(m->data_id), "%ld samples, train index %s",
             sched->dataset_size, id);
    return 0;
}
