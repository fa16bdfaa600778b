/* zip.c — a bounds-checked zip central-directory walk (ZIP64 included):
 * every offset, count and length checked against the file before use. */
#include "zip.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define ZIP_MAX_ENTRIES 1000000u

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }


static int name_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

static int entry_cmp(const void *x, const void *y) {
    const ZEntry *a = x, *b = y;
    return name_cmp(a->name, a->name_len, b->name, b->name_len);
}

const ZEntry *zip_find(const Zip *z, const char *prefix, size_t plen, const char *rest, size_t rlen) {
    size_t klen = plen + rlen;
    char *key = malloc(klen ? klen : 1);
    if (!key) return NULL;
    memcpy(key, prefix, plen);
    memcpy(key + plen, rest, rlen);
    size_t lo = 0, hi = z->n;
    const ZEntry *hit = NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp((const uint8_t *)key, klen, z->ent[mid].name, z->ent[mid].name_len);
        if (c == 0) {
            hit = &z->ent[mid];
            break;
        }
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    free(key);
    return hit;
}

/* Error text shows at most 80 bytes of a name from the file. */
#define NAMEF "%.*s"
#define NAMEA(p, n) (int)((n) > 80 ? 80 : (n)), (const char *)(p)

int zip_read(Zip *z, const uint8_t *buf, size_t len, unsigned allow, const char *path, AvErr *e) {
    z->ent = NULL;
    z->n = 0;
    if (len < 4 || memcmp(buf, "PK\3\4", 4) != 0) return av_err(e, "%s: not a zip archive", path);
    if (len < 22) return av_err(e, "%s: zip archive truncated (%zu bytes)", path, len);

    /* End of central directory: the last record whose comment ends the file. */
    size_t eocd = SIZE_MAX, lo = len - 22 > 65535 ? len - 22 - 65535 : 0;
    for (size_t p = len - 22 + 1; p-- > lo;) {
        if (rd32(buf + p) == 0x06054b50u && p + 22 + rd16(buf + p + 20) == len) {
            eocd = p;
            break;
        }
    }
    if (eocd == SIZE_MAX)
        return av_err(e, "%s: no zip end-of-central-directory record (file truncated?)", path);
    const uint8_t *q = buf + eocd;
    uint64_t n = rd16(q + 10), cd_size = rd32(q + 12), cd_off = rd32(q + 16);
    size_t cd_limit = eocd; /* the central directory ends before the end records */
    if (eocd >= 20 && rd32(buf + eocd - 20) == 0x07064b50u) {
        const uint8_t *loc = buf + eocd - 20;
        uint64_t zoff = rd64(loc + 8);
        if (rd32(loc + 4) != 0 || rd32(loc + 16) > 1)
            return av_err(e, "%s: multi-disk zip archives are not supported", path);
        if (zoff > eocd - 20 || eocd - 20 - zoff < 56 || rd32(buf + zoff) != 0x06064b50u)
            return av_err(e, "%s: ZIP64 end-of-central-directory record is missing or out of bounds", path);
        const uint8_t *z64 = buf + zoff;
        if (rd32(z64 + 16) != 0 || rd32(z64 + 20) != 0)
            return av_err(e, "%s: multi-disk zip archives are not supported", path);
        n = rd64(z64 + 32);
        cd_size = rd64(z64 + 40);
        cd_off = rd64(z64 + 48);
        cd_limit = (size_t)zoff;
    } else {
        if (rd16(q + 4) != 0 || rd16(q + 6) != 0 || rd16(q + 8) != rd16(q + 10))
            return av_err(e, "%s: multi-disk zip archives are not supported", path);
        if (n == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu)
            return av_err(e, "%s: zip end record needs ZIP64 fields but has no ZIP64 locator", path);
    }
    if (cd_off > cd_limit || cd_size > cd_limit - cd_off)
        return av_err(e, "%s: zip central directory [%llu, +%llu) points past its end record at %zu (file truncated?)",
                      path, (unsigned long long)cd_off, (unsigned long long)cd_size, cd_limit);
    if (n > ZIP_MAX_ENTRIES || n > cd_size / 46)
        return av_err(e, "%s: zip central directory claims %llu entries in %llu bytes", path, (unsigned long long)n,
                      (unsigned long long)cd_size);
    z->ent = calloc(n ? (size_t)n : 1, sizeof *z->ent);
    if (!z->ent) return av_err(e, "%s: out of memory", path);

    const uint8_t *cd = buf + cd_off, *cd_end = cd + cd_size;
    for (uint64_t i = 0; i < n; i++) {
        if (cd_end - cd < 46 || rd32(cd) != 0x02014b50u) {
            av_err(e, "%s: zip central directory entry %llu is malformed", path, (unsigned long long)i);
            goto fail;
        }
        uint16_t gpflags = rd16(cd + 8), method = rd16(cd + 10);
        uint64_t csize = rd32(cd + 20), usize = rd32(cd + 24), lho = rd32(cd + 42), disk = rd16(cd + 34);
        size_t nlen = rd16(cd + 28), xlen = rd16(cd + 30), clen = rd16(cd + 32);
        if ((size_t)(cd_end - cd) - 46 < nlen + xlen + clen) {
            av_err(e, "%s: zip central directory entry %llu runs past the directory", path, (unsigned long long)i);
            goto fail;
        }
        const uint8_t *name = cd + 46;
        /* ZIP64 extra field: the 64-bit values of the saturated 32-bit ones, in this order. */
        for (const uint8_t *x = name + nlen, *xe = name + nlen + xlen; xe - x >= 4;) {
            uint16_t id = rd16(x), sz = rd16(x + 2);
            if ((size_t)(xe - x) - 4 < sz) {
                av_err(e, "%s: zip entry '" NAMEF "': extra field runs past its record", path, NAMEA(name, nlen));
                goto fail;
            }
            if (id == 0x0001) {
                const uint8_t *v = x + 4, *ve = v + sz;
                uint64_t *slots[3] = {&usize, &csize, &lho};
                for (int s = 0; s < 3; s++) {
                    if (*slots[s] != 0xffffffffu) continue;
                    if (ve - v < 8) {
                        av_err(e, "%s: zip entry '" NAMEF "': ZIP64 extra field too short", path, NAMEA(name, nlen));
                        goto fail;
                    }
                    *slots[s] = rd64(v);
                    v += 8;
                }
                if (disk == 0xffff && ve - v >= 4) disk = rd32(v);
            }
            x += 4 + sz;
        }
        if (usize == 0xffffffffu || csize == 0xffffffffu || lho == 0xffffffffu) {
            av_err(e, "%s: zip entry '" NAMEF "': 32-bit field saturated without a ZIP64 extra field", path,
                   NAMEA(name, nlen));
            goto fail;
        }
        if (disk != 0) {
            av_err(e, "%s: multi-disk zip archives are not supported", path);
            goto fail;
        }
        if (gpflags & 1) {
            av_err(e, "%s: zip entry '" NAMEF "' is encrypted", path, NAMEA(name, nlen));
            goto fail;
        }
        if (method != 0 && !(method == 8 && (allow & ZIP_DEFLATE))) {
            if (allow & ZIP_DEFLATE)
                av_err(e, "%s: zip entry '" NAMEF "' uses compression method %u; only stored and deflated entries are read",
                       path, NAMEA(name, nlen), method);
            else
                av_err(e, "%s: zip entry '" NAMEF "' is compressed (method %u); only stored entries are read, as torch.save writes them",
                       path, NAMEA(name, nlen), method);
            goto fail;
        }
        if (method == 0 && csize != usize) {
            av_err(e, "%s: zip entry '" NAMEF "' is stored but its sizes differ (%llu vs %llu)", path,
                   NAMEA(name, nlen), (unsigned long long)csize, (unsigned long long)usize);
            goto fail;
        }
        /* Local header: only its name and extra lengths are used (torch writes
         * its sizes in a data descriptor); the data must end before the directory. */
        if (lho > cd_off || cd_off - lho < 30 || rd32(buf + lho) != 0x04034b50u) {
            av_err(e, "%s: zip entry '" NAMEF "': local header at %llu is missing or out of bounds", path,
                   NAMEA(name, nlen), (unsigned long long)lho);
            goto fail;
        }
        const uint8_t *lh = buf + lho;
        uint64_t data_off = lho + 30 + (uint64_t)rd16(lh + 26) + rd16(lh + 28);
        if (rd16(lh + 8) != method || rd16(lh + 26) != nlen || data_off > cd_off ||
            memcmp(lh + 30, name, nlen) != 0) {
            av_err(e, "%s: zip entry '" NAMEF "': local header disagrees with the central directory", path,
                   NAMEA(name, nlen));
            goto fail;
        }
        if (csize > cd_off - data_off) {
            av_err(e, "%s: zip entry '" NAMEF "': %llu bytes at offset %llu run past the entries' area (file truncated?)",
                   path, NAMEA(name, nlen), (unsigned long long)csize, (unsigned long long)data_off);
            goto fail;
        }
        z->ent[z->n++] = (ZEntry){name, nlen, buf + data_off, csize, rd32(cd + 16), method, usize};
        cd += 46 + nlen + xlen + clen;
    }
    qsort(z->ent, z->n, sizeof *z->ent, entry_cmp);
    for (size_t i = 1; i < z->n; i++) {
        if (entry_cmp(&z->ent[i - 1], &z->ent[i]) == 0) {
            av_err(e, "%s: zip entry '" NAMEF "' appears twice", path, NAMEA(z->ent[i].name, z->ent[i].name_len));
            goto fail;
        }
    }
    return 0;
fail:
    free(z->ent);
    z->ent = NULL;
    z->n = 0;
    return -1;
}

void zip_free(Zip *z) {
    free(z->ent);
    z->ent = NULL;
    z->n = 0;
}

int zip_head(const ZEntry *ent, uint8_t *out, size_t n, size_t *got, const char *path, AvErr *e) {
    *got = 0;
    if (n > ent->size_out) n = (size_t)ent->size_out;
    if (ent->method == 0) {
        if (n > ent->size) n = (size_t)ent->size;
        memcpy(out, ent->data, n);
        *got = n;
        return 0;
    }
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    int rc = inflateInit2(&zs, -MAX_WBITS);
    size_t done = 0;
    uint64_t used_in = 0;
    while (rc == Z_OK && done < n) {
        const uint64_t left_in = ent->size - used_in;
        zs.next_in = (Bytef *)(ent->data + used_in);
        zs.avail_in = left_in > (1u << 30) ? (1u << 30) : (uInt)left_in;
        zs.next_out = out + done;
        zs.avail_out = (uInt)(n - done); /* a header: far below zlib's 32-bit counts */
        const uInt in0 = zs.avail_in, out0 = zs.avail_out;
        rc = inflate(&zs, Z_NO_FLUSH);
        used_in += in0 - zs.avail_in;
        done += out0 - zs.avail_out;
        if (rc == Z_OK && in0 == zs.avail_in && out0 == zs.avail_out) rc = Z_DATA_ERROR; /* no progress */
    }
    inflateEnd(&zs);
    if (done < n)
        return av_err(e, "%s: zip entry '" NAMEF "' does not inflate to its %llu bytes (file corrupt?)", path,
                      NAMEA(ent->name, ent->name_len), (unsigned long long)ent->size_out);
    *got = n;
    return 0;
}

int zip_extract(const ZEntry *ent, size_t max_size, uint8_t **out, int *owned, const char *path, AvErr *e) {
    *out = NULL;
    *owned = 0;
    if (ent->size_out > max_size)
        return av_err(e, "%s: zip entry '" NAMEF "' holds %llu bytes (limit %zu)", path, NAMEA(ent->name, ent->name_len),
                      (unsigned long long)ent->size_out, max_size);
    if (ent->method == 0) {
        if (ent->crc != 0 && crc32_z(0, ent->data, (size_t)ent->size) != ent->crc)
            return av_err(e, "%s: zip entry '" NAMEF "' fails its CRC check (file corrupt?)", path, NAMEA(ent->name, ent->name_len));
        *out = (uint8_t *)ent->data;
        return 0;
    }
    /* deflate expands at most 1032:1: a larger claim is a lie, not a reason to allocate */
    if (ent->size_out / 1032 > ent->size + 1)
        return av_err(e, "%s: zip entry '" NAMEF "' claims %llu bytes from %llu compressed (corrupt?)", path,
                      NAMEA(ent->name, ent->name_len), (unsigned long long)ent->size_out, (unsigned long long)ent->size);
    uint8_t *buf = malloc(ent->size_out ? (size_t)ent->size_out : 1);
    if (!buf) return av_err(e, "%s: out of memory inflating '" NAMEF "'", path, NAMEA(ent->name, ent->name_len));
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    int rc = inflateInit2(&zs, -MAX_WBITS); /* raw deflate, as zip stores it */
    uint64_t done = 0;
    if (rc == Z_OK) {
        /* zlib's counts are 32-bit: feed and drain in slices of at most 1 GB */
        uint64_t used_in = 0;
        do {
            uint64_t left_in = ent->size - used_in, room = ent->size_out - done;
            zs.next_in = (Bytef *)(ent->data + used_in);
            zs.avail_in = left_in > (1u << 30) ? (1u << 30) : (uInt)left_in;
            zs.next_out = buf + done;
            zs.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
            const uInt in0 = zs.avail_in, out0 = zs.avail_out;
            rc = inflate(&zs, Z_NO_FLUSH);
            used_in += in0 - zs.avail_in;
            done += out0 - zs.avail_out;
            if (rc == Z_OK && in0 == zs.avail_in && out0 == zs.avail_out) rc = Z_DATA_ERROR; /* no progress */
        } while (rc == Z_OK);
        inflateEnd(&zs);
    }
    if (rc != Z_STREAM_END || done != ent->size_out ||
        (ent->crc != 0 && crc32_z(0, buf, (size_t)ent->size_out) != ent->crc)) {
        free(buf);
        return av_err(e, "%s: zip entry '" NAMEF "' does not inflate to its %llu bytes (file corrupt?)", path,
                      NAMEA(ent->name, ent->name_len), (unsigned long long)ent->size_out);
    }
    *out = buf;
    *owned = 1;
    return 0;
}
