/* train/ckpt_run.c: a run's checkpoints across its ranks: where it starts,
 * the same checkpoint on every rank, and each checkpoint it writes (see
 * ttrain_ckpt_run.h). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/torus_error.h"
#include "common/torus_report.h"
#include "trainer/train/ttrain_ckpt_beat.h"
#include "trainer/train/ttrain_ckpt_run.h"
#include "trainer/train/ttrain_error.h"
#include "trainer/train/ttrain_test_hooks.h"

/* The resolved configuration as text, stored in every checkpoint. */
static char *_plan_text(const ttrain_config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    ttrain_print_plan(cfg, f);
    fclose(f);
    return text;
}

int ttrain_ckpt_run_open(ttrain_ckpt_run *r)
{
    const ttrain_config *cfg = r->cfg;
    r->plan = _plan_text(cfg);
    ttrain_ckpt_new_run(r->meta.run);
    int rc = cfg->world > 1 ? tcomm_bcast_bytes(r->comm, r->meta.run,
                                                sizeof(r->meta.run), 0)
                            : 0;
    if (rc)
        return torus_error_prefix(rc, "checkpoint");
    rc = ttrain_ckpt_meta_fill(&r->meta, &cfg->model, &cfg->sched, cfg->world,
                               cfg->wire, topt_loss_scale_mode_name(r->ls_mode),
                               r->have_src ? cfg->data : "");
    if (rc)
        return torus_error_prefix(
            rc, "%s", rc == TTRAIN_CKPT_ECONFIG ? "checkpoint" : "--data");
    r->meta.bucket_kb = ttrain_exchange_bucket_kb(r->ex);
    return 0;
}

/* --bucket-kb auto on a resume: the size the checkpoint records, so that
 * the run goes on cutting its buckets, and so rounding its sums, as it
 * did (this start's own choice could differ: the links vary). Collective:
 * every rank loaded the same file. */
static int _resume_bucket_kb(ttrain_ckpt_run *r, const ttrain_ckpt_meta *got)
{
    int now = ttrain_exchange_bucket_kb(r->ex);
    if (r->cfg->bucket_kb >= 0 || got->bucket_kb < 1 || !now ||
        got->bucket_kb == now)
        return 0;
    int rc = ttrain_exchange_set_bucket_kb(r->ex, got->bucket_kb);
    if (rc)
        return rc;
    r->meta.bucket_kb = ttrain_exchange_bucket_kb(r->ex);
    if (r->rank == 0 && r->meta.bucket_kb == got->bucket_kb)
        torus_note("--bucket-kb auto: %d KiB, %zu buckets, as the "
                   "checkpoint records (a resumed run keeps the size it "
                   "trained with; this start had kept %d KiB)",
                   got->bucket_kb, ttrain_exchange_buckets(r->ex), now);
    else if (r->rank == 0)
        torus_note("--bucket-kb auto: %d KiB, the device's buckets; the "
                   "checkpoint records %d KiB, and the sums may round "
                   "differently from before",
                   now, got->bucket_kb);
    return 0;
}

/* A dynamic loss scale goes on from the checkpoint's when that was dynamic
 * too; its values are checked against this run's bounds (a file is
 * hostile). Any other pairing starts afresh (ttrain_ckpt_check's note). */
static int _restore_loss_scale(ttrain_ckpt_run *r, const ttrain_ckpt_meta *got)
{
    const topt_loss_scale_state *s = &r->at.ls;
    long clean = s->clean;
    if (r->ls_mode != TOPT_LOSS_SCALE_DYNAMIC ||
        strcmp(got->loss_scale, "dynamic"))
        return 0;
    /* A shorter growth interval than the checkpoint's: the scale grows
     * at this run's next clean step. */
    if (clean >= r->ls_cfg->interval)
        clean = r->ls_cfg->interval - 1;
    int rc = topt_loss_scale_restore(r->ls, r->ls_cfg, s->scale, clean,
                                     s->overflows);
    return rc ? torus_error_prefix(rc, "rank %d: %s", r->rank, r->path) : 0;
}

/* What rank 0 broadcasts: its loader's result and the file it chose. */
typedef struct {
    int32_t rc;
    char name[100];
} _pick;

/* Rank 0's pick, said at once when it failed; then every rank's copy. */
static int _agree(ttrain_ckpt_run *r, const char *what, _pick *pick,
                  ttrain_ckpt_meta *got, char *note, size_t notelen)
{
    const ttrain_config *cfg = r->cfg;
    if (r->rank == 0) {
        pick->rc = ttrain_ckpt_load_latest(
            cfg->ckpt_dir, &r->meta, cfg->eval_only, r->net, r->opt, &r->at,
            got, pick->name, sizeof(pick->name), note, notelen);
        if (pick->rc < 0)
            r->say(what, torus_error_msg());
    }
    int rc =
        cfg->world > 1 ? tcomm_bcast_bytes(r->comm, pick, sizeof(*pick), 0) : 0;
    if (rc)
        return torus_error_prefix(rc, "%s", what);
    if (pick->rc >= 0)
        return 0;
    if (r->rank == 0) { /* the loader's message is still this thread's */
        r->said = 1;
        return pick->rc;
    }
    rc = TORUS_FAIL(TTRAIN_ENOCKPT,
                    "rank %d: rank 0 found no checkpoint to use", r->rank);
    return torus_error_prefix(rc, "%s", what);
}

/* A checkpoint written mid-epoch under the per-rank slices (before the
 * global-block order) by M ranks: rank k had served positions
 * [k*L, k*L + step*G/M) of the epoch's permutation (L = floor(n/M)); this
 * run serves blocks [step*G, steps*G). Their overlap is served twice, and
 * as many samples not at all in that epoch: said with the counts. */
static void _old_order_note(const ttrain_ckpt_run *r,
                            const ttrain_ckpt_meta *got)
{
    const topt_schedule *s = &r->cfg->sched;
    int M = got->world;
    if (got->data_order || r->at.step == 0 || M < 2)
        return; /* one slice is the global-block order */
    uint64_t G = (uint64_t)topt_batch_at(s, r->at.epoch),
             n = (uint64_t)s->dataset_size, L = n / (uint64_t)M,
             done = (uint64_t)r->at.step * (G / (uint64_t)M),
             lo = (uint64_t)r->at.step * G,
             hi = (uint64_t)topt_steps_in_epoch(s, r->at.epoch) * G, twice = 0;
    for (int k = 0; k < M; k++) {
        uint64_t a = (uint64_t)k * L, b = a + done;
        a = a > lo ? a : lo;
        b = b < hi ? b : hi;
        twice += b > a ? b - a : 0;
    }
    torus_warn("the checkpoint was written by %d ranks serving each their "
               "own slice of the data (before the order that survives a "
               "change of ranks): the rest of epoch %d serves %" PRIu64
               " of its %" PRIu64 " samples a second time and leaves as many "
               "unseen; later epochs are exact",
               M, r->at.epoch, twice, hi);
}

int ttrain_ckpt_run_load(ttrain_ckpt_run *r)
{
    const ttrain_config *cfg = r->cfg;
    const char *what = cfg->eval_only ? "--eval-only" : "--resume";
    _pick pick = {0};
    char note[1024] = "";
    ttrain_ckpt_meta got;
    int rc = _agree(r, what, &pick, &got, note, sizeof(note));
    r->found = !rc && pick.rc == 0;
    if (rc || !r->found)
        return rc;
    pick.name[sizeof(pick.name) - 1] = '\0';
    /* One slash between folder and name, as tdata_ckpt_name joins them
     * ("run/" and "run" are one folder). */
    int len = (int)strlen(cfg->ckpt_dir);
    while (len > 1 && cfg->ckpt_dir[len - 1] == '/')
        len--;
    snprintf(r->path, sizeof(r->path), "%.*s/%s", len, cfg->ckpt_dir,
             pick.name);
    if (r->rank != 0 &&
        (rc = ttrain_ckpt_load(r->path, &r->meta, cfg->eval_only, r->net,
                               r->opt, &r->at, &got, note, sizeof(note)))) {
        rc = TORUS_FAIL(rc,
                        "rank %d cannot load %s, the checkpoint rank 0 chose: "
                        "%s (every rank must see the same --checkpoint-dir)",
                        r->rank, r->path, torus_error_msg());
        return torus_error_prefix(rc, "%s", what);
    }
    if (note[0] && r->rank == 0)
        torus_note("note: %s", note);
    if (!cfg->eval_only && r->have_src && r->rank == 0)
        _old_order_note(r, &got);
    memcpy(r->meta.run, got.run, sizeof(got.run)); /* the run goes on */
    r->from_world = got.world;
    if (!cfg->eval_only && !(rc = _restore_loss_scale(r, &got)) &&
        !(rc = _resume_bucket_kb(r, &got)))
        rc = ttrain_exchange_check_agreement(r->ex, r->net);
    return rc ? torus_error_prefix(rc, "%s", what) : 0;
}

/* After the ranks agreed on the checkpoint's averaged statistics, each
 * rank takes back its own, saved at the stop, when they fit this step and
 * number of ranks; otherwise it goes on from the average (a damaged file
 * is said). */
int ttrain_ckpt_run_restore(ttrain_ckpt_run *r)
{
    const ttrain_config *cfg = r->cfg;
    int rc = r->src->seek(r->src, r->at.samples);
    if (rc)
        return torus_error_prefix(rc, "--resume");
    teng_net_set_dropout_step(r->net, r->at.dropout_step);
    /* After a shrink no rank will ever read the files of ranks past the
     * new world (the note said the ranks go on from the average); one
     * process keeps no file at all. */
    for (int k = cfg->world > 1 ? cfg->world : 0;
         r->rank == 0 && k < r->from_world; k++)
        ttrain_bn_stash_remove(cfg->ckpt_dir, r->meta.run, k);
    if (cfg->world > 1 && r->from_world == cfg->world &&
        ttrain_bn_stash_load(&r->bn, r->net, cfg->ckpt_dir, r->meta.run,
                             r->rank, cfg->world, r->at.global_step) < 0)
        torus_warn("rank %d: %s; it goes on from the ranks' average BN "
                   "statistics",
                   r->rank, torus_error_msg());
    return 0;
}

void ttrain_ckpt_run_clean(const ttrain_ckpt_run *r)
{
    int stale = r->found && r->rank == 0
                    ? ttrain_ckpt_clean(r->cfg->ckpt_dir, r->meta.run)
                    : 0;
    if (stale)
        torus_note("removed %d unfinished checkpoint file(s) of run %s", stale,
                   r->meta.run);
}

/* Rank 0's write (ttrain_ckpt_beat_write's callback): a failure is said
 * before the others hear of it and end the job. */
static int _save(void *arg)
{
    ttrain_ckpt_run *r = arg;
    const ttrain_config *cfg = r->cfg;
    ttrain_test_sleep("ckpt", 0, r->at.global_step);
    int rc = ttrain_ckpt_save(cfg->ckpt_dir, cfg->keep, 0, &r->meta, r->net,
                              r->opt, &r->at, r->plan ? r->plan : "");
    if (rc && cfg->world > 1) {
        r->say("checkpoint", torus_error_msg());
        r->said = 1;
    }
    return rc;
}

/* Only rank 0 writes, while the others wait for it (ttrain_ckpt_beat.h). */
static int _write_or_wait(ttrain_ckpt_run *r)
{
    const ttrain_config *cfg = r->cfg;
    ttrain_ckpt_beat b = {.comm = r->comm,
                          .rank = r->rank,
                          .world = cfg->world,
                          .comm_timeout = cfg->comm_timeout,
                          .ckpt_timeout = cfg->ckpt_timeout,
                          .fail = r->fail};
    int rc = r->rank != 0 ? ttrain_ckpt_beat_wait(&b)
                          : ttrain_ckpt_beat_write(&b, _save, r);
    return rc && !r->said ? torus_error_prefix(rc, "checkpoint") : rc;
}

int ttrain_ckpt_run_write(ttrain_ckpt_run *r, int stopping, int last)
{
    const ttrain_config *cfg = r->cfg;
    int multi = cfg->world > 1, rc = 0;
    /* The file gets the ranks' average; this rank's own statistics are
     * taken first (and saved at a stop) and put back after. */
    if (multi && !(rc = ttrain_bn_stash_take(&r->bn, r->net)) && stopping)
        rc = ttrain_bn_stash_save(&r->bn, cfg->ckpt_dir, r->meta.run, r->rank,
                                  cfg->world, r->at.global_step);
    if (rc)
        return torus_error_prefix(rc, "checkpoint");
    if ((rc = ttrain_exchange_stats_average(r->ex, r->net)))
        return torus_error_prefix(rc, "BN statistics");
    if ((rc = ttrain_exchange_check_agreement(r->ex, r->net)))
        return torus_error_prefix(rc, "checkpoint");
    /* Only rank 0 writes; all ranks hold the same weights. */
    ttrain_trace_begin(r->trace,
                       r->rank == 0 ? "checkpoint write" : "checkpoint wait");
    rc = _write_or_wait(r);
    ttrain_trace_end(r->trace);
    if (rc || !multi || stopping)
        return rc;
    if (last) /* the run is complete: nothing left to resume */
        ttrain_bn_stash_remove(cfg->ckpt_dir, r->meta.run, r->rank);
    else if ((rc = ttrain_bn_stash_put(&r->bn, r->net)))
        return torus_error_prefix(rc, "checkpoint");
    return 0;
}

void ttrain_ckpt_run_close(ttrain_ckpt_run *r)
{
    free(r->plan);
    r->plan = NULL;
    ttrain_bn_stash_free(&r->bn);
}
