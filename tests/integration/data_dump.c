/* data_dump.c: test helper that reads a packed dataset back through
 * libtdata, checking every sample's CRC32C on the way, for the round-trip
 * tests:
 *   data_dump INDEX raw OUT      all samples sorted by source name,
 *                                concatenated into OUT; labels one byte
 *                                each into OUT.labels
 *   data_dump INDEX ids OUT      the same in global sample id order
 *                                (what a loader's batch ids index)
 *   data_dump INDEX files DIR    each sample written to DIR/<source name>;
 *                                "name label" lines to DIR.labels
 *   data_dump INDEX tree DIR     each sample written to DIR/<its class name
 *                                in the index>/<source name after its first
 *                                '/'>: the class folders and files of a
 *                                packed class tree, names as read back
 *   data_dump INDEX addr ID      "SHARD_PATH OFFSET": the file and byte
 *                                offset of the middle of sample ID (for
 *                                the corruption tests)
 * Exit 0 if every CRC matched, 1 otherwise, 2 on errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/read/read.h"

typedef struct {
    char *name;
    uint64_t id;
} _ent;

static int _cmp(const void *a, const void *b)
{
    return strcmp(((const _ent *)a)->name, ((const _ent *)b)->name);
}

static void _mkparents(char *p)
{
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[2], "raw") && strcmp(argv[2], "files") &&
                      strcmp(argv[2], "tree") && strcmp(argv[2], "addr") &&
                      strcmp(argv[2], "ids"))) {
        fprintf(stderr,
                "usage: data_dump INDEX raw|ids|files|tree|addr OUT|ID\n");
        return 2;
    }
    tdata_dataset *ds;
    if (tdata_dataset_open(argv[1], &ds)) {
        fprintf(stderr, "data_dump: %s\n", torus_error_msg());
        return 2;
    }
    if (!strcmp(argv[2], "addr")) {
        int s;
        uint64_t idx, id = strtoull(argv[3], NULL, 10);
        tdata_dataset_locate(ds, id, &s, &idx);
        tdata_shard *sh = tdata_dataset_shard(ds, s);
        uint64_t lo = (sh->offsets[idx] + sh->offsets[idx + 1]) / 2;
        printf("%s %llu\n", sh->path,
               (unsigned long long)(sh->chunk_addr[lo / sh->chunk_bytes] +
                                    lo % sh->chunk_bytes));
        tdata_dataset_close(ds);
        return 0;
    }
    const tdata_dataset_info *in = tdata_dataset_get_info(ds);
    _ent *e = calloc(in->num_images, sizeof *e);
    uint64_t k = 0;
    for (int s = 0; s < in->num_shards; s++) {
        tdata_shard *sh = tdata_dataset_shard(ds, s);
        char **names = tdata_shard_names(sh);
        if (!names) {
            fprintf(stderr, "data_dump: %s\n", torus_error_msg());
            return 2;
        }
        for (uint64_t i = 0; i < sh->n; i++, k++) {
            e[k].name = names[i];
            e[k].id = k;
        }
        free(names);
    }
    int by_id = !strcmp(argv[2], "ids");
    if (!by_id)
        qsort(e, in->num_images, sizeof *e, _cmp);
    int raw = by_id || !strcmp(argv[2], "raw");
    char lp[4096];
    snprintf(lp, sizeof lp, "%s.labels", argv[3]);
    FILE *out = raw ? fopen(argv[3], "wb") : NULL;
    FILE *lab = fopen(lp, raw ? "wb" : "w");
    if ((raw && !out) || !lab) {
        fprintf(stderr, "data_dump: %s: %s\n", argv[3], strerror(errno));
        return 2;
    }
    uint8_t *buf = NULL;
    size_t cap = 0, len;
    uint64_t bad = 0;
    for (uint64_t i = 0; i < in->num_images; i++) {
        int32_t label;
        uint32_t crc;
        if (tdata_dataset_read(ds, e[i].id, &buf, &cap, &len, &label, &crc)) {
            fprintf(stderr, "data_dump: %s\n", torus_error_msg());
            return 2;
        }
        if (tdata_crc32c(0, buf, len) != crc) {
            fprintf(stderr, "data_dump: CRC mismatch: %s\n", e[i].name);
            bad++;
        }
        if (raw) {
            fwrite(buf, 1, len, out);
            fputc(label, lab);
        } else {
            char p[8192];
            const char *base = strchr(e[i].name, '/');
            if (!strcmp(argv[2], "tree"))
                snprintf(p, sizeof p, "%s/%s/%s", argv[3],
                         tdata_dataset_class_name(ds, label),
                         base ? base + 1 : e[i].name);
            else
                snprintf(p, sizeof p, "%s/%s", argv[3], e[i].name);
            _mkparents(p);
            FILE *f = fopen(p, "wb");
            if (!f) {
                fprintf(stderr, "data_dump: %s: %s\n", p, strerror(errno));
                return 2;
            }
            fwrite(buf, 1, len, f);
            fclose(f);
            fprintf(lab, "%s %s\n", e[i].name,
                    tdata_dataset_class_name(ds, label));
        }
        free(e[i].name);
    }
    if (out)
        fclose(out);
    fclose(lab);
    free(buf);
    free(e);
    tdata_dataset_close(ds);
    return bad ? 1 : 0;
}
