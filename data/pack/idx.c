/* pack/idx.c: reads IDX files (MNIST, Fashion-MNIST), gzipped or not.
 * gzread() reads plain files as well, so one path serves both. Images
 * (magic 0x00000803, N x H x W uint8) and labels (0x00000801, N uint8)
 * become a dense packing source with classes "0".."9". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/torus_error.h"
#include "data/pack/pack.h"

/* The whole (gunzipped) file, reading at most `limit` + 1 bytes so that a
 * small gzip bomb cannot expand into all of memory: *over is set when the
 * file holds more than limit bytes. NULL on a read error. */
static uint8_t *_slurp(const char *path, uint64_t limit, size_t *len, int *over)
{
    *over = 0;
    int fd;
    if (tdata_open_regular(path, &fd, NULL)) {
        *over = -1; /* the message names the file and what it is */
        return NULL;
    }
    gzFile g = gzdopen(fd, "rb");
    if (!g) {
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        gzclose(g);
        return NULL;
    }
    for (;;) {
        if (n > limit) {
            *over = 1;
            break;
        }
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                gzclose(g);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
        int r = gzread(g, buf + n,
                       (unsigned)(cap - n > (1u << 30) ? (1u << 30) : cap - n));
        if (r < 0) {
            free(buf);
            gzclose(g);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    gzclose(g);
    *len = n;
    return buf;
}

static uint32_t _be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

/* The image file: magic 0x803, then n x h x w bytes. *im is malloc'd and
 * holds the pixels from offset 16. */
static int _load_images(const char *images, uint8_t **im, uint32_t dims[3])
{
    size_t ilen = 0;
    int over;
    *im = _slurp(images, tdata_max_idx_bytes(), &ilen, &over);
    if (!*im && over < 0)
        return TDATA_EIO;
    if (!*im)
        return TORUS_FAIL(TDATA_EIO, "%s: cannot read (or bad gzip)", images);
    if (over)
        return TORUS_FAIL(TDATA_EINVAL,
                          "%s: expands to more than %llu bytes "
                          "(TDATA_MAX_IDX_BYTES, --max-idx-bytes)",
                          images, (unsigned long long)tdata_max_idx_bytes());
    if (ilen < 16 || _be32(*im) != 0x803)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: not an IDX image file (magic "
                          "0x00000803)",
                          images);
    uint32_t n = _be32(*im + 4), h = _be32(*im + 8), w = _be32(*im + 12);
    uint64_t total = 0;
    if ((uint64_t)h * w > tdata_max_pixels())
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: images of %u x %u pixels exceed the limit of "
                          "%llu (--max-pixels)",
                          images, h, w, (unsigned long long)tdata_max_pixels());
    if (__builtin_mul_overflow((uint64_t)n, (uint64_t)h * w, &total) ||
        total + 16 != ilen || !h || !w || !n)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: header says %u x %u x %u but "
                          "the file holds %zu bytes",
                          images, n, h, w, ilen);
    memmove(*im, *im + 16, ilen - 16);
    dims[0] = n;
    dims[1] = h;
    dims[2] = w;
    return TDATA_OK;
}

/* The label file for n images: magic 0x801, n, then n label bytes. */
static int _load_labels(const char *labels, uint32_t n, uint8_t **lb)
{
    size_t llen = 0;
    int over;
    /* n labels of one byte, after an 8-byte header. */
    *lb = _slurp(labels, (uint64_t)n + 8, &llen, &over);
    if (!*lb && over < 0)
        return TDATA_EIO;
    if (!*lb)
        return TORUS_FAIL(TDATA_EIO, "%s: cannot read labels", labels);
    if (over || llen != (size_t)n + 8 || _be32(*lb) != 0x801 ||
        _be32(*lb + 4) != n)
        return TORUS_FAIL(TDATA_EFORMAT,
                          "%s: not an IDX label file for %u "
                          "images",
                          labels, n);
    return TDATA_OK;
}

/* Classes "0".."max label", one item per record named FILE#NNNNNNN.
 * Counts are set only once their arrays exist, so tdata_pack_src_free can
 * undo a half-filled source. */
static int _fill(tdata_pack_src *src, const char *images, uint32_t n,
                 uint64_t bytes, const uint8_t *lab)
{
    int maxl = 0;
    for (uint32_t i = 0; i < n; i++)
        if (lab[i] > maxl)
            maxl = lab[i];
    src->class_ids = calloc(maxl + 1, sizeof(char *));
    src->class_words = calloc(maxl + 1, sizeof(char *));
    src->items = calloc(n, sizeof *src->items);
    if (!src->class_ids || !src->class_words || !src->items)
        return TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for %u items", images,
                          n);
    src->num_classes = maxl + 1;
    src->n = src->cap = n;
    int ok = 1;
    for (int c = 0; c < src->num_classes; c++) {
        char b[16];
        snprintf(b, sizeof b, "%d", c);
        src->class_ids[c] = strdup(b);
        src->class_words[c] = strdup("");
        ok &= src->class_ids[c] && src->class_words[c];
    }
    const char *base = strrchr(images, '/');
    base = base ? base + 1 : images;
    for (uint32_t i = 0; i < n; i++) {
        char nm[512];
        snprintf(nm, sizeof nm, "%s#%07u", base, i);
        src->items[i].name = strdup(nm);
        ok &= src->items[i].name != NULL;
        src->items[i].label = lab[i];
        src->items[i].bytes = bytes;
        src->items[i].rec = i;
    }
    return ok ? TDATA_OK
              : TORUS_FAIL(TDATA_ENOMEM, "%s: no memory for item names",
                           images);
}

int tdata_idx_load(const char *images, const char *labels, tdata_pack_src *src)
{
    uint8_t *im = NULL, *lb = NULL;
    uint32_t dims[3] = {0, 0, 0};
    int rc = _load_images(images, &im, dims);
    if (rc == TDATA_OK)
        rc = _load_labels(labels, dims[0], &lb);
    if (rc) {
        free(im);
        free(lb);
        return rc;
    }
    src->idx_pixels = im;
    src->idx_h = (int)dims[1];
    src->idx_w = (int)dims[2];
    rc = _fill(src, images, dims[0], (uint64_t)dims[1] * dims[2], lb + 8);
    free(lb);
    return rc;
}
