/* torchbin.h — safe reader for PyTorch `pytorch_model.bin` checkpoints (the zip
 * format torch.save writes since 1.6), filling the same StFile as st_open.
 *
 * Nothing in the file is executed: the zip's central directory is walked with
 * every offset checked, only stored (uncompressed) entries are accepted, and
 * data.pkl is interpreted by a small pickle machine that knows only the opcodes
 * and globals a state-dict pickle uses (collections.OrderedDict,
 * torch._utils._rebuild_tensor_v2 / _rebuild_parameter[_with_state] and the
 * torch.*Storage types); anything else is refused naming the opcode or global
 * and its byte offset in data.pkl.
 *
 * Result: every tensor reachable through dicts from the top-level dict, named
 * by its key; tensors inside nested dicts (a checkpoint {"state_dict": {...}})
 * get '.'-joined names ("state_dict.bert.embeddings..."), integer keys are
 * written in decimal, and non-tensor values (ints, strings, lists, ...) are
 * skipped. Tensors sharing a storage (tied weights, offset views) point into the
 * same bytes. F32/F16/BF16 load as such; other dtypes load as ST_OTHER with a
 * safetensors-style dtype_name ("I64", "F64", "BOOL", ...). Tensors must be
 * contiguous and little-endian. */
#ifndef ATTNVIZ_TORCHBIN_H
#define ATTNVIZ_TORCHBIN_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "safetensors.h"

/* Maps path read-only (util.h's av_map_file) and parses it; on success f is used and
 * freed exactly like an st_open'ed file (st_find, st_to_f32, st_close).
 * tb_open_mode holds the file as mode says (util.h's AvMapMode). */
int tb_open(StFile *f, const char *path, AvErr *e);
int tb_open_mode(StFile *f, const char *path, AvMapMode mode, AvErr *e);

/* Parses an in-memory file image (fuzzing, tests). buf must outlive f; f->map
 * and f->path are left untouched (NULL for a zeroed StFile), so st_close frees
 * only the tensor table. */
int tb_parse(StFile *f, const uint8_t *buf, size_t len, const char *path, AvErr *e);

#endif
