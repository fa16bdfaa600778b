/* zip.h — reading zip archives held in memory (torch.save files, NumPy .npz):
 * the central directory walked with every offset, count and length checked
 * against the file; stored entries used in place, deflated ones inflated on
 * request (zlib) with their CRC checked. */
#ifndef ATTNVIZ_ZIP_H
#define ATTNVIZ_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct {
    const uint8_t *name;
    size_t name_len;
    const uint8_t *data;   /* into the file */
    uint64_t size;         /* bytes at data (compressed size) */
    uint32_t crc;
    uint16_t method;       /* 0 stored, 8 deflated */
    uint64_t size_out;     /* uncompressed size */
} ZEntry;

typedef struct {
    ZEntry *ent; /* sorted by name for lookups */
    size_t n;
} Zip;

/* Reading deflated entries is allowed only with this flag (torch.save never writes them). */
#define ZIP_DEFLATE 1u

int zip_read(Zip *z, const uint8_t *buf, size_t len, unsigned allow, const char *path, AvErr *e);
/* The entry named prefix + rest, or NULL. */
const ZEntry *zip_find(const Zip *z, const char *prefix, size_t plen, const char *rest, size_t rlen);
/* The entry's bytes: in place when stored (*owned 0), else inflated into a
 * buffer to free (*owned 1); at most max_size bytes. */
int zip_extract(const ZEntry *ent, size_t max_size, uint8_t **out, int *owned, const char *path, AvErr *e);
/* The first n bytes of an entry (all of it when shorter) into out, *got of them: only what they
 * need is inflated (a header read before deciding whether the rest is wanted). */
int zip_head(const ZEntry *ent, uint8_t *out, size_t n, size_t *got, const char *path, AvErr *e);
void zip_free(Zip *z);

/* Error text shows at most 80 bytes of a name from the file. */
#define NAMEF "%.*s"
#define NAMEA(p, n) (int)((n) > 80 ? 80 : (n)), (const char *)(p)

#endif
