"""Llama-style decoders (mixtures of experts and gpt-oss among them) against transformers itself: synthetic checkpoints made by transformers'
own config and model classes at published shapes (layers reduced), saved with save_pretrained
(F32, BF16, one sharded), run by attnviz's engine (build/fwd_dump) and by transformers with
attn_implementation="eager" and output_attentions=True on the same token ids.

usage: decoder_check.py FWD_DUMP WORKDIR [--only NAME[,NAME...]] [--long]
Prints one PASS/FAIL line per checkpoint with the max |diff| of attention and of q/k (q and k
as the eager attention function receives them: after q/k norm and rotary, before the scale;
captured by wrapping each modeling module's eager_attention_forward). Mixture-of-experts
checkpoints also compare each layer's routing: every token's top-k experts, in order, against the
top-k of the softmax of transformers' router logits (output_router_logits=True), and their weights (within the same bound).
Models with attention sinks (gpt-oss) also compare each row's sink share with 1 minus the sum of transformers' row.
Exit 1 on any FAIL.
"""
import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_eager import capture_qk  # noqa: E402

TOL = 1e-4
VOCAB = 512

# name -> (config class, published shape with layers reduced, dtype, extra)
SPECS = {
    # SmolLM2-135M: 576 wide, 9 heads over 3 kv heads, rope base 1e5, tied embeddings
    "smollm2-f32": ("LlamaConfig", dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9,
                                        num_key_value_heads=3, num_hidden_layers=2, rope_theta=100000.0,
                                        rms_norm_eps=1e-5, tie_word_embeddings=True,
                                        max_position_embeddings=8192), "float32", {}),
    "smollm2-bf16": ("LlamaConfig", dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9,
                                         num_key_value_heads=3, num_hidden_layers=2, rope_theta=100000.0,
                                         rms_norm_eps=1e-5, tie_word_embeddings=True,
                                         max_position_embeddings=8192), "bfloat16", {}),
    # Qwen2.5-0.5B: 896 wide, 14 heads over 2 kv heads, q/k/v biases; saved in shards
    "qwen2.5-sharded": ("Qwen2Config", dict(hidden_size=896, intermediate_size=4864, num_attention_heads=14,
                                            num_key_value_heads=2, num_hidden_layers=2, rope_theta=1000000.0,
                                            rms_norm_eps=1e-6, tie_word_embeddings=True,
                                            max_position_embeddings=32768), "float32", {"shard": "8MB"}),
    # Qwen3-0.6B: head_dim 128 given apart from hidden/heads, per-head q/k RMSNorm
    "qwen3": ("Qwen3Config", dict(hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
                                  num_key_value_heads=8, head_dim=128, num_hidden_layers=2,
                                  rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                                  max_position_embeddings=40960), "float32", {}),
    # Mistral-7B's head layout (head_dim 128, 4 query heads per kv head) at 1024 wide, with a
    # 48-token sliding window so inputs past it exercise the window
    "mistral": ("MistralConfig", dict(hidden_size=1024, intermediate_size=3584, num_attention_heads=8,
                                      num_key_value_heads=2, head_dim=128, num_hidden_layers=2,
                                      sliding_window=48, rope_theta=1000000.0, rms_norm_eps=1e-5,
                                      max_position_embeddings=32768), "float32", {}),
    # Gemma-2-2B: 2304 wide, head_dim 256, GeGLU, soft-capping 50, query_pre_attn_scalar 256,
    # sliding window on alternate layers (window cut to 40 to exercise it)
    "gemma2": ("Gemma2Config", dict(hidden_size=2304, intermediate_size=9216, num_attention_heads=8,
                                    num_key_value_heads=4, head_dim=256, num_hidden_layers=2,
                                    query_pre_attn_scalar=256, attn_logit_softcapping=50.0,
                                    final_logit_softcapping=30.0, sliding_window=40, rms_norm_eps=1e-6,
                                    max_position_embeddings=8192), "float32", {}),
    # Llama 3.x rotary scaling (factor 8, low 1, high 4) with a short original context so that
    # every band of frequencies (kept, smoothed, divided) occurs
    "llama3-rope": ("LlamaConfig", dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
                                        num_key_value_heads=2, num_hidden_layers=2, max_position_embeddings=4096,
                                        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                      "high_freq_factor": 4.0,
                                                      "original_max_position_embeddings": 64},
                                        rope_theta=500000.0), "float32", {}),
    "linear-rope": ("LlamaConfig", dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
                                        num_key_value_heads=4, num_hidden_layers=2, max_position_embeddings=4096,
                                        rope_scaling={"rope_type": "linear", "factor": 4.0}), "float32", {}),
    # dynamic NTK scaling: transformers raises the rotary base only past max_position_embeddings
    # (original_max_position_embeddings is not what it compares with), so inside it = default
    "dynamic-rope": ("LlamaConfig", dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
                                         num_key_value_heads=1, num_hidden_layers=2, max_position_embeddings=4096,
                                         rope_scaling={"rope_type": "dynamic", "factor": 2.0,
                                                       "original_max_position_embeddings": 64}),
                     "float32", {}),
    # Gemma-3-1B's shape (1152 wide, 4 heads over 1 kv head, head_dim 256) with six layers so that the
    # pattern's global layer (the sixth) occurs, and the 4B+ models' linear factor 8 on the global
    # layers' rotary (base 1M; the sliding ones 10k, unscaled); the window cut to 64
    "gemma3-f32": ("Gemma3TextConfig", dict(hidden_size=1152, intermediate_size=6912, num_attention_heads=4,
                                            num_key_value_heads=1, head_dim=256, num_hidden_layers=6,
                                            query_pre_attn_scalar=256, sliding_window=64, rope_theta=1000000.0,
                                            rope_local_base_freq=10000.0, rms_norm_eps=1e-6,
                                            rope_scaling={"rope_type": "linear", "factor": 8.0},
                                            max_position_embeddings=32768), "float32",
                   {"lengths": [1, 9, 70, 130, 600, 1024], "qk_norm_base": 0.5}),
    "gemma3-bf16": ("Gemma3TextConfig", dict(hidden_size=1152, intermediate_size=6912, num_attention_heads=4,
                                             num_key_value_heads=1, head_dim=256, num_hidden_layers=6,
                                             query_pre_attn_scalar=256, sliding_window=64, rope_theta=1000000.0,
                                             rope_local_base_freq=10000.0, rms_norm_eps=1e-6,
                                             rope_scaling={"rope_type": "linear", "factor": 8.0},
                                             max_position_embeddings=32768), "bfloat16",
                    {"lengths": [1, 9, 130, 1024], "qk_norm_base": 0.5}),
    # Phi-3-mini-128k's shape (3072 wide, 32 heads of 96, fused qkv/gate_up, LongRoPE with 48 short and
    # long factors) with the original context cut from 4096 to 256, so that inputs past it take the
    # long factors (and max/orig = 512 sets the attention factor)
    "phi3-f32": ("Phi3Config", dict(hidden_size=3072, intermediate_size=8192, num_attention_heads=32,
                                    num_key_value_heads=32, num_hidden_layers=2, rms_norm_eps=1e-5,
                                    max_position_embeddings=131072, original_max_position_embeddings=256,
                                    pad_token_id=0, bos_token_id=1, eos_token_id=2, rope_theta=10000.0,
                                    rope_scaling={"type": "longrope",
                                                  "short_factor": [1.0 + 0.01 * i for i in range(48)],
                                                  "long_factor": [1.0 + 1.2 * i for i in range(48)]}),
                 "float32", {"lengths": [1, 9, 130, 256, 257, 600, 1024], "qk_scale": 1.5}),
    # Phi-4-mini's shape: 24 heads of 128 over 8 kv heads, partial rotary 0.75 (96 dims, 48 factors),
    # tied embeddings; original context cut to 300
    "phi4mini-bf16": ("Phi3Config", dict(hidden_size=3072, intermediate_size=8192, num_attention_heads=24,
                                         num_key_value_heads=8, num_hidden_layers=2, rms_norm_eps=1e-5,
                                         partial_rotary_factor=0.75, tie_word_embeddings=True,
                                         max_position_embeddings=131072, original_max_position_embeddings=300,
                                         pad_token_id=0, bos_token_id=1, eos_token_id=2, rope_theta=10000.0,
                                         rope_scaling={"type": "longrope",
                                                       "short_factor": [1.0 + 0.02 * i for i in range(48)],
                                                       "long_factor": [1.0 + 0.9 * i for i in range(48)]}),
                      "bfloat16", {"lengths": [1, 9, 300, 301, 1024], "qk_scale": 1.5}),
    "phi4mini-f32": ("Phi3Config", dict(hidden_size=3072, intermediate_size=8192, num_attention_heads=24,
                                        num_key_value_heads=8, num_hidden_layers=2, rms_norm_eps=1e-5,
                                        partial_rotary_factor=0.75, tie_word_embeddings=True,
                                        max_position_embeddings=131072, original_max_position_embeddings=300,
                                        pad_token_id=0, bos_token_id=1, eos_token_id=2, rope_theta=10000.0,
                                        rope_scaling={"type": "longrope",
                                                      "short_factor": [1.0 + 0.02 * i for i in range(48)],
                                                      "long_factor": [1.0 + 0.9 * i for i in range(48)]}),
                     "float32", {"lengths": [1, 100, 301, 1024], "qk_scale": 1.5}),
    # Mixture-of-experts decoders (2 layers; a third, dense one for Qwen3-MoE's mlp_only_layers).
    # Mixtral-8x7B's layout (8 experts, top-2, renormalized; 4 query heads per kv head) at 256 wide
    "mixtral-f32": ("MixtralConfig", dict(hidden_size=256, intermediate_size=512, num_attention_heads=8,
                                          num_key_value_heads=2, num_hidden_layers=2, num_local_experts=8,
                                          num_experts_per_tok=2, rope_theta=1000000.0, rms_norm_eps=1e-5,
                                          max_position_embeddings=32768), "float32",
                    {"lengths": [1, 9, 130, 1024], "router_scale": 10.0}),
    "mixtral-bf16": ("MixtralConfig", dict(hidden_size=256, intermediate_size=512, num_attention_heads=8,
                                           num_key_value_heads=2, num_hidden_layers=2, num_local_experts=8,
                                           num_experts_per_tok=2, rope_theta=1000000.0, rms_norm_eps=1e-5,
                                           max_position_embeddings=32768), "bfloat16",
                     {"lengths": [1, 130, 600], "router_scale": 10.0}),
    # Qwen3-30B-A3B's head layout (head_dim 128 apart from hidden/heads, q/k norms), 8 experts, top-4
    # with norm_topk_prob, layer 1 dense (mlp_only_layers)
    "qwen3moe-f32": ("Qwen3MoeConfig", dict(hidden_size=256, intermediate_size=384, moe_intermediate_size=128,
                                            num_attention_heads=4, num_key_value_heads=2, head_dim=128,
                                            num_hidden_layers=3, num_experts=8, num_experts_per_tok=4,
                                            norm_topk_prob=True, mlp_only_layers=[1], rope_theta=1000000.0,
                                            rms_norm_eps=1e-6, max_position_embeddings=40960), "float32",
                     {"lengths": [1, 9, 130, 1024], "router_scale": 10.0, "qk_norm_base": 2.0}),
    # OLMoE-1B-7B's layout: q/k RMSNorm over the whole projection, top-k not renormalized
    "olmoe-bf16": ("OlmoeConfig", dict(hidden_size=256, intermediate_size=128, num_attention_heads=8,
                                       num_key_value_heads=8, num_hidden_layers=2, num_experts=8,
                                       num_experts_per_tok=2, norm_topk_prob=False, rms_norm_eps=1e-5,
                                       max_position_embeddings=4096, pad_token_id=1, bos_token_id=None,
                                       eos_token_id=2), "bfloat16",
                   {"lengths": [1, 9, 130, 600], "router_scale": 10.0, "qk_norm_base": 3.0}),
    # gpt-oss-20b's attention layout (head_dim 64 apart from hidden/heads, 8 query heads per kv head, biases,
    # a sink per head, sliding and full layers alternating) at 256 wide, 4 layers, a 16-token window so that it
    # matters; its YaRN (x32 over 4,096, not truncated) in F32, a truncated YaRN over 256 in BF16; 8 experts, top-4
    "gptoss-f32": ("GptOssConfig", dict(hidden_size=256, intermediate_size=128, num_attention_heads=8,
                                        num_key_value_heads=1, head_dim=64, num_hidden_layers=4, num_local_experts=8,
                                        num_experts_per_tok=4, sliding_window=16, rms_norm_eps=1e-5,
                                        max_position_embeddings=131072,
                                        rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
                                                         "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                                                         "original_max_position_embeddings": 4096}), "float32",
                   {"lengths": [1, 9, 130, 600], "router_scale": 10.0, "qk_scale": 3.0}),
    "gptoss-bf16": ("GptOssConfig", dict(hidden_size=256, intermediate_size=128, num_attention_heads=8,
                                         num_key_value_heads=2, head_dim=64, num_hidden_layers=4, num_local_experts=8,
                                         num_experts_per_tok=4, sliding_window=16, rms_norm_eps=1e-5,
                                         max_position_embeddings=2048,
                                         rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0,
                                                          "original_max_position_embeddings": 256}), "bfloat16",
                    {"lengths": [1, 17, 300], "router_scale": 10.0, "qk_scale": 3.0}),
}


def build(name, workdir):
    cls_name, shape, dtype, extra = SPECS[name]
    out = os.path.join(workdir, name)
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    torch.manual_seed(sum(map(ord, name)))
    cfg = getattr(transformers, cls_name)(vocab_size=VOCAB, **shape)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float().eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                # norms: weights around 1 (Gemma stores w of 1 + w, so around 0), biases small
                base = 0.0 if (cls_name in ("Gemma2Config", "Gemma3TextConfig") or "bias" in pname) else 1.0
                if "q_norm" in pname or "k_norm" in pname:
                    # Qwen3 normalizes q and k per head: peakiness comes from these weights. Gemma 3
                    # scales by 1 + w: 0.5 gives scores of a few units over 6 layers (at 4, the
                    # synthetic model is chaotic: float32 transformers is 3e-2 from float64)
                    base = extra.get("qk_norm_base", 4.0)
                p.copy_(base + 0.1 * torch.randn_like(p))
            elif pname.endswith("sinks"):
                # gpt-oss's sink logits: spread over a few units, so that some heads' sinks take most of a
                # row and others little
                p.copy_(2.0 * torch.randn_like(p))
            elif pname.endswith("experts.gate_up_proj"):
                # gpt-oss's experts: gate and up of a few units, so that the clamp at swiglu_limit (7) bites
                p.mul_(12.0)
            elif pname.endswith("_bias"):
                p.copy_(0.1 * torch.randn_like(p))  # gpt-oss's expert biases (2-D: one row per expert)
            elif (pname.endswith("gate.weight") and "experts" not in pname) or pname.endswith("router.weight"):
                # a MoE router: initializer_range's 0.02 leaves logits near 0 and the experts' probabilities
                # near ties; scaled, each token's choice is clear (the check compares choices exactly)
                p.mul_(extra.get("router_scale", 1.0))
            elif "q_proj" in pname or "k_proj" in pname:
                # 1.5 for Phi-3's 3072-wide shapes (mean row max about 0.6): at 6 the rows are one-hot
                # and float32 transformers is itself 2e-3 from float64; at 3 (row max 0.9) it was
                # 1.3e-4 to 4e-4 away, past the bound, so the check tested the model, not attnviz
                p.mul_(extra.get("qk_scale", 6.0))  # peaky attention: scores spread over several units
            elif "qkv_proj" in pname:
                # Phi-3's fused q, k, v: only the q and k rows, as the unfused families (scaling v
                # too grew the second layer's input and made the model chaotic: float32
                # transformers itself drifted 1.5-4x past the bound from run to run)
                qk_rows = (cfg.num_attention_heads + cfg.num_key_value_heads) * (
                    getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
                p[:qk_rows].mul_(extra.get("qk_scale", 6.0))
    kw = {"safe_serialization": True}
    if "shard" in extra:
        kw["max_shard_size"] = extra["shard"]
    model.to(getattr(torch, dtype)).save_pretrained(out, **kw)
    return out


def reference(model_dir, ids, dtype, router=False):
    """attention (L, H, n, n), q (L, H, n, dh), k (L, KV, n, dh) from transformers' eager path in dtype;
    router: also each sparse layer's router logits (n, E), as a list."""
    # experts: transformers' eager loop over them (its default, grouped_mm, takes no float64)
    extra = {"experts_implementation": "eager"} if router else {}
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager", dtype=dtype, **extra).eval()
    kw = {"output_router_logits": True} if router else {}
    with capture_qk(model) as (qs, ks), torch.no_grad():
        out = model.model(torch.tensor([ids]), output_attentions=True, **kw)
    attn = torch.stack([a[0] for a in out.attentions]).numpy()
    res = (attn, torch.stack(qs).numpy(), torch.stack(ks).numpy())
    if router:
        res += ([r.reshape(len(ids), -1).double().numpy() for r in out.router_logits],)
    return res


def compare_routing(prefix, model_dir, n, L, K, logits):
    """attnviz's routing (prefix.experts / .experts_w) against the top-k of softmax(transformers' router
    logits), sparse layers in order. Returns (tokens x layers compared, differing, weight max |diff|,
    differing where transformers' k-th and next probabilities are apart by more than 1e-5)."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    ids = np.fromfile(prefix + ".experts", dtype=np.int32).reshape(L, n, K)
    ws = np.fromfile(prefix + ".experts_w", dtype=np.float32).reshape(L, n, K)
    # gpt-oss: a softmax over the k chosen logits, which is the renormalized top-k of the full softmax
    renorm = cfg["model_type"] in ("mixtral", "gpt_oss") or cfg.get("norm_topk_prob", False)
    sparse = [l for l in range(L) if ids[l, 0, 0] >= 0]
    if len(sparse) != len(logits):
        return None
    total = differ = clear = 0
    wmax = 0.0
    for l, lg in zip(sparse, logits):
        p = np.exp(lg - lg.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        order = np.argsort(-p, axis=1, kind="stable")
        top = order[:, :K]
        w = np.take_along_axis(p, top, axis=1)
        if renorm:
            w = w / w.sum(axis=1, keepdims=True)
        bad = (top != ids[l]).any(axis=1)
        total += n
        differ += int(bad.sum())
        if bad.any():
            srt = -np.sort(-p, axis=1)
            gaps = np.min(srt[:, :K] - srt[:, 1:K + 1], axis=1)
            clear += int((bad & (gaps > 1e-5)).sum())
        ok = ~bad
        if ok.any():
            wmax = max(wmax, float(np.abs(w[ok] - ws[l][ok]).max()))
    return total, differ, wmax, clear


def check(fwd, model_dir, name, lengths, rng):
    """The bound holds against transformers in float64 (a float32 run's own rounding is of the order
    of the bound at these lengths); the float32 run's difference is printed beside it."""
    worst_a = worst_qk = worst_a32 = worst_s = 0.0
    share = None
    routed = [0, 0, 0.0, 0]  # token-layers compared, differing, weight max |diff|, differing without a near tie
    for n in lengths:
        ids = [int(x) for x in rng.integers(0, VOCAB, size=n)]
        if n >= 32:  # a repeated stretch, as real text has
            ids[n // 2:n // 2 + 16] = ids[:16]
        prefix = os.path.join(os.path.dirname(model_dir), name + ".out")
        r = subprocess.run([fwd, model_dir, prefix] + [str(i) for i in ids], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL decoder {name}: attnviz failed on {n} tokens: {r.stderr.strip()}")
            return False
        meta = json.loads(r.stdout)
        L, H, KV, dh = meta["layers"], meta["heads"], meta["kv_heads"], meta["head_dim"]
        a = np.fromfile(prefix + ".attn", dtype=np.float32).reshape(L, H, n, n)
        q = np.fromfile(prefix + ".q", dtype=np.float32).reshape(L, H, n, dh)
        k = np.fromfile(prefix + ".k", dtype=np.float32).reshape(L, H, n, dh)
        moe_k = meta.get("experts_k", 0)
        if moe_k:
            ra, rq, rk, logits = reference(model_dir, ids, torch.float64, router=True)
            r = compare_routing(prefix, model_dir, n, L, moe_k, logits)
            if r is None:
                print(f"FAIL decoder {name}: attnviz's sparse layers are not transformers' ({len(logits)})")
                return False
            routed = [routed[0] + r[0], routed[1] + r[1], max(routed[2], r[2]), routed[3] + r[3]]
        else:
            ra, rq, rk = reference(model_dir, ids, torch.float64)
        da32 = float(np.abs(reference(model_dir, ids, torch.float32)[0] - a).max())
        if ra.shape != a.shape:
            print(f"FAIL decoder {name}: attention shape {a.shape}, transformers {ra.shape}")
            return False
        group = H // KV
        rk_per_head = np.repeat(rk, group, axis=1)  # query head h reads kv head h // group
        da = float(np.abs(ra - a).max())
        if meta.get("sinks"):
            # a sink's share of each row: what transformers' row (the sink column dropped) leaves of 1
            sk = np.fromfile(prefix + ".sinks", dtype=np.float32).reshape(L, H, n)
            ds = float(np.abs((1.0 - ra.sum(axis=-1)) - sk).max())
            worst_s = max(worst_s, ds)
            share = float((1.0 - ra.sum(axis=-1)).mean())
        dq = float(max(np.abs(rq - q).max(), np.abs(rk_per_head - k).max()))
        worst_a, worst_qk, worst_a32 = max(worst_a, da), max(worst_qk, dq), max(worst_a32, da32)
        peak = float(ra.max(axis=-1).mean())
        print(f"  {name} n={n}: attention {da:.2e} (float32 transformers {da32:.2e}), q/k {dq:.2e} "
              f"(mean row max {peak:.2f})" + (f", sinks {ds:.2e} (mean share {share:.2f})" if share is not None else ""))
    ok = worst_a <= TOL and worst_s <= TOL
    if share is not None:
        print(f"  {name} sinks: each row's sink share max |diff| {worst_s:.2e} from float64 transformers (tol {TOL:g})")
    if routed[0]:
        # identical choices; a difference is excused only at a near tie (1e-5) of transformers' probabilities
        ok &= routed[3] == 0 and routed[2] <= TOL
        print(f"  {name} routing: {routed[0] - routed[1]}/{routed[0]} token-layers choose transformers' experts "
              f"in its order ({routed[1] - routed[3]} at near ties), weights max |diff| {routed[2]:.2e} (tol {TOL:g})")
    print(f"{'PASS' if ok else 'FAIL'} decoder {name} ({meta['dtype']}, {L} layers, {H} heads / {KV} kv, "
          f"head_dim {dh}): attention max |diff| {worst_a:.2e} from float64 transformers (tol {TOL:g}; float32: "
          f"{worst_a32:.2e}), q/k {worst_qk:.2e}, "
          f"lengths {','.join(map(str, lengths))}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fwd_dump")
    ap.add_argument("workdir")
    ap.add_argument("--only")
    ap.add_argument("--long", action="store_true", help="inputs up to 2,048 tokens for every checkpoint")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(2)
    rng = np.random.default_rng(7)
    ok = True
    for name in SPECS:
        if args.only and name not in args.only.split(","):
            continue
        t0 = time.time()
        d = build(name, args.workdir)
        long = args.long or name == "smollm2-f32"
        lengths = [1, 7, 100, 600, 2048] if long else SPECS[name][3].get("lengths", [1, 9, 130])
        ok &= check(args.fwd_dump, d, name, lengths, rng)
        print(f"  {name}: {time.time() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
