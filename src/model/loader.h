/* loader.h — a checkpoint loaded into weights.h's structs (loader.c): the
 * files found and mapped, the config read, the family's load called; and what
 * the families' loads (arch_*.c) take their tensors with. The engine takes
 * the loaded Model and never loads. */
#ifndef ATTNVIZ_LOADER_H
#define ATTNVIZ_LOADER_H

#include <stdint.h>

#include "err.h"
#include "util.h"
#include "weights.h"

/* Loads config.json and the weights from dir (model.safetensors, a sharded
 * model.safetensors.index.json set, else pytorch_model.bin); checks every
 * tensor's shape and dtype against the config. */
int model_load(Model *m, const char *dir, AvErr *e);
/* model_load for a process that makes mode's passes: AV_MAP_RESIDENT (many:
 * serve, generation, long batches) lets the weights be copied into private
 * memory where util.h's av_hold_plan finds it worth it and small enough;
 * either way the files are mapped and checked first, nothing read ahead of
 * need until the model is accepted (Model.hold says what was chosen). */
int model_load_mode(Model *m, const char *dir, AvMapMode mode, AvErr *e);
/* The same, the weights mapped and checked but not yet held: model_hold
 * does what Model.hold says once the caller has accepted the run (so that a
 * run refused after the load reads none of the weights). Until then passes
 * work all the same, reading pages as they need them. */
int model_load_deferred(Model *m, const char *dir, AvMapMode mode, AvErr *e);
int model_hold(Model *m, AvErr *e);
int model_load_files(Model *m, const char *config_path, const char *weights_path, AvErr *e);
/* A llama.cpp .gguf file: hyper-parameters from its metadata, weights kept
 * in their (quantized) types. model_load takes a .gguf path, or a folder
 * holding one and no config.json, too. */
int model_load_gguf(Model *m, const char *path, AvErr *e);
/* Whether path is a .gguf file, or a folder holding one and no config.json. */
int model_is_gguf(const char *path);
void model_free(Model *m);

/* For the families' loaders (arch_*.c): views of the checkpoint's tensors,
 * looked up under name with the family's prefix variants, shape-checked
 * against what the config implies; -1 with one line naming file and tensor.
 * model_tensor gives a float copy or mapping (small tensors: norms, tables);
 * model_linear keeps the weight in its stored type (bias: 1 required, 0 none,
 * -1 if present). */
const float *model_tensor(Model *m, const char *name, int ndim, int64_t d0, int64_t d1, AvErr *e);
int model_has_tensor(const Model *m, const char *name);
int model_linear(Model *m, Linear *lin, const char *prefix, int64_t in, int64_t out, int bias, AvErr *e);
/* Rows [row0, row0 + rows) of prefix.weight (total x in), no bias: one part of
 * a fused projection (Phi-3's qkv_proj and gate_up_proj), kept in its type. */
int model_linear_part(Model *m, Linear *lin, const char *prefix, int64_t in, int64_t total, int64_t row0,
                      int64_t rows, AvErr *e);
/* The same for a weight named as it is (nn.MultiheadAttention's in_proj_weight). */
int model_linear_rows(Model *m, Linear *lin, const char *name, int64_t in, int64_t total, int64_t row0, int64_t rows,
                      AvErr *e);
/* Expert idx of prefix.weight, a stack of n (out, in) matrices (llama.cpp's
 * ffn_*_exps: one 3-D tensor per projection of a mixture of experts), kept in
 * its type. */
int model_linear_expert(Model *m, Linear *lin, const char *prefix, int64_t n, int64_t idx, int64_t in, int64_t out,
                        AvErr *e);
/* Expert idx of name, a stack of n matrices stored transposed, (in, total)
 * each (transformers' fused expert parameters: gpt-oss's gate_up_proj and
 * down_proj), taking columns col0, col0 + step, ... (out of them) as the rows
 * of an (out, in) copy in the stored type (F32, F16, BF16); its bias from
 * bias_name (n, total), the same columns. A checkpoint that holds name_blocks
 * and name_scales instead (the published gpt-oss: MXFP4, (n, total, in / 32,
 * 16) and (n, total, in / 32) bytes, each expert's (total, in) rows not
 * transposed) gives those rows repacked as ggml's MXFP4 blocks. */
int model_linear_expert_cols(Model *m, Linear *lin, const char *name, const char *bias_name, int64_t n, int64_t idx,
                             int64_t in, int64_t total, int64_t col0, int64_t step, int64_t out, AvErr *e);
/* A convolution's weight (out, channels, k, k) viewed as the linear map of a
 * patch's in = channels * k * k values, kept in its stored type. */
int model_linear_conv(Model *m, Linear *lin, const char *prefix, int64_t channels, int64_t k, int64_t out, int bias,
                      AvErr *e);
/* A scalar tensor (shape [] or [1]) as a float. */
int model_scalar(Model *m, const char *name, float *out, AvErr *e);
/* A tensor of n floats whatever its shape (e.g. [1, 1, hidden]), as model_tensor gives them. */
const float *model_tensor_flat(Model *m, const char *name, int64_t n, AvErr *e);
/* GPT-2's Conv1D(in -> parts * out) split into parts views of out columns each. */
int model_conv1d(Model *m, Linear *parts, int n_parts, const char *prefix, int64_t in, int64_t out, AvErr *e);
/* A norm's weight (and bias for LayerNorm) from prefix.weight / prefix.bias. */
int model_norm(Model *m, Norm *nm, const char *prefix, int64_t dim, AvErr *e);
/* m->s2s with both stacks' layers (the config's counts), zeroed, for a family's load to fill; model_free
 * frees it (s2s_weights_free). */
int s2s_weights_alloc(struct Model *m, AvErr *e);
void s2s_weights_free(S2sWeights *w);

#endif
