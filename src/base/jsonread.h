/* jsonread.h — the one way attnviz reads a JSON document it acts on (config.json,
 * tokenizer.json, safetensors headers, shard indexes, render metadata, stats and
 * heads files, heads.json, serve's request bodies, ...): cJSON's parse, then every
 * object's keys checked. A key given twice is refused: cJSON (and so attnviz)
 * would read the first, Python's json (and so transformers and the safetensors
 * library) the last, and the two would run different models. */
#ifndef ATTNVIZ_JSONREAD_H
#define ATTNVIZ_JSONREAD_H

#include <stddef.h>

#include "err.h"

struct cJSON;

/* Parses len bytes of buf into *out. 0: done. 1: not JSON (e untouched: the caller says so
 * in its own words). -1: a key appears twice in one object, e saying "NAME: key "K" appears
 * twice in OBJECT"; a string holds \u0000 (a NUL, which would end the C string early); or
 * out of memory. Each object's keys are sorted to compare them: n log n for an object of n keys. */
int av_json_parse(struct cJSON **out, const char *buf, size_t len, const char *name, AvErr *e);

#endif
