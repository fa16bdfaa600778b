"""Writes the small committed decoder fixtures test_model.c checks without torch: one tiny
checkpoint per Llama-style family, made by transformers' own classes (save_pretrained), and its
golden.json from transformers' eager attention (same format as the encoder fixtures': per case
input_ids, token_type_ids, attention, queries, keys as the eager attention function receives them
(after q/k norm and rotary; keys repeated per query head), last_hidden; a mixture of experts also
"experts": {"ids", "weights"} (layers, n, k), each token's top-k of softmax(transformers' router
logits) in its order, -1 and 0 in a dense layer; a model with attention sinks (gpt-oss) "sinks"
(layers, heads, n), 1 minus each row of transformers' attention).

usage: make_decoder_goldens.py OUT_DIR [NAME...]   (tests/data; run with tools/pyref.sh's python)
NAMEs: only these fixtures (the others' committed bytes are left alone).
"""
import json
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_eager import capture_qk  # noqa: E402

SMALL = dict(vocab_size=40, hidden_size=16, intermediate_size=24, num_attention_heads=4, num_hidden_layers=2,
             max_position_embeddings=64)
FIXTURES = {
    "small-llama": ("LlamaConfig", dict(num_key_value_heads=2, head_dim=8, rope_theta=10000.0,
                                        tie_word_embeddings=True), "float32"),
    "small-qwen2": ("Qwen2Config", dict(num_key_value_heads=1, rope_theta=1000000.0), "bfloat16"),
    "small-qwen3": ("Qwen3Config", dict(num_key_value_heads=2, head_dim=8), "float32"),
    "small-mistral": ("MistralConfig", dict(num_key_value_heads=2, head_dim=4, sliding_window=5), "float32"),
    "small-gemma2": ("Gemma2Config", dict(num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=8,
                                          attn_logit_softcapping=3.0, sliding_window=4), "float32"),
    # Gemma 3: a sliding layer (local base 10k) then a global one (base 1M, linear factor 8), q/k norms
    "small-gemma3": ("Gemma3TextConfig", dict(num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=8,
                                              sliding_window=4, sliding_window_pattern=2, rope_theta=1000000.0,
                                              rope_local_base_freq=10000.0,
                                              rope_scaling={"rope_type": "linear", "factor": 8.0}), "float32"),
    # Phi-3: fused qkv/gate_up, LongRoPE with an original context of 8 (the 12-token case takes the
    # long factors), half the head's dims rotary
    "small-phi3": ("Phi3Config", dict(num_attention_heads=2, num_key_value_heads=1, partial_rotary_factor=0.5,
                                      original_max_position_embeddings=8, pad_token_id=0, bos_token_id=1,
                                      eos_token_id=2,
                                      rope_scaling={"type": "longrope", "short_factor": [1.0, 1.5],
                                                    "long_factor": [3.0, 7.5]}), "float32"),
    # Mixtures of experts: 4 experts, top-2. Mixtral renormalizes; Qwen3-MoE here too (norm_topk_prob),
    # with experts 12 wide and layer 1 dense (mlp_only_layers); OLMoE not, with its whole-projection q/k norm
    "small-mixtral": ("MixtralConfig", dict(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
                      "float32"),
    "small-qwen3moe": ("Qwen3MoeConfig", dict(num_key_value_heads=2, head_dim=8, num_experts=4, num_experts_per_tok=2,
                                              norm_topk_prob=True, moe_intermediate_size=12, mlp_only_layers=[1]),
                       "float32"),
    "small-olmoe": ("OlmoeConfig", dict(num_key_value_heads=4, num_experts=4, num_experts_per_tok=2,
                                        norm_topk_prob=False, pad_token_id=1, bos_token_id=None, eos_token_id=2),
                    "bfloat16"),
    # gpt-oss: a sink per head, biases, a sliding layer (window 4) then a full one, YaRN (x8 over 16
    # positions), 4 experts top-2 with the clamped SwiGLU at 1.5 (so that it bites at this width)
    "small-gptoss": ("GptOssConfig", dict(num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2,
                                          sliding_window=4, swiglu_limit=1.5,
                                          rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0,
                                                           "original_max_position_embeddings": 16, "truncate": False}),
                     "float32"),
}


def routing(router_logits, sparse, n, k):
    """Each layer's top-k (ids, weights) from the sparse layers' router logits; -1 / 0 in dense ones."""
    ids, ws, it = [], [], iter(router_logits)
    for dense_or_sparse in sparse:
        if not dense_or_sparse:
            ids.append([[-1] * k] * n), ws.append([[0.0] * k] * n)
            continue
        p = torch.softmax(next(it).reshape(n, -1).double(), dim=-1)
        w, i = torch.topk(p, k, dim=-1)
        ws.append(w), ids.append(i.tolist())
    return ids, ws


def main(out_root, only):
    for name, (cls, extra, dtype) in FIXTURES.items():
        if only and name not in only:
            continue
        torch.manual_seed(sum(map(ord, name)))
        cfg = getattr(transformers, cls)(**dict(SMALL, **extra))
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float().eval()
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if p.dim() == 1:
                    base = 0.0 if cls in ("Gemma2Config", "Gemma3TextConfig") or "bias" in pname else 1.0
                    if "q_norm" in pname or "k_norm" in pname:
                        base = 3.0
                    p.copy_(base + 0.1 * torch.randn_like(p))
                elif (pname.endswith("gate.weight") and "experts" not in pname) or pname.endswith("router.weight"):
                    p.normal_(0, 1.0)  # a router: clear choices between the experts
                elif "q_proj" in pname or "k_proj" in pname or "qkv_proj" in pname:
                    p.normal_(0, 0.5)
                else:
                    p.normal_(0, 0.3)
        out = os.path.join(out_root, name)
        model.to(getattr(torch, dtype)).save_pretrained(out, safe_serialization=True)
        moe = hasattr(cfg, "num_experts_per_tok")
        extra_kw = {"experts_implementation": "eager"} if moe else {}
        ref = AutoModelForCausalLM.from_pretrained(out, attn_implementation="eager", dtype=torch.float32,
                                                   **extra_kw).eval()
        cases = []
        gen = torch.Generator().manual_seed(3)
        for n in (1, 12):
            ids = torch.randint(0, SMALL["vocab_size"], (n,), generator=gen).tolist()
            with capture_qk(ref) as (qs, ks), torch.no_grad():
                o = ref.model(torch.tensor([ids]), output_attentions=True, **({"output_router_logits": True} if moe else {}))
            group = cfg.num_attention_heads // cfg.num_key_value_heads
            r4 = lambda t: [[[[round(float(x), 7) for x in row] for row in m] for m in h] for h in t]  # noqa: E731
            cases.append({
                "input_ids": ids,
                "token_type_ids": [0] * n,
                "attention": r4(torch.stack([a[0] for a in o.attentions])),
                "queries": r4(torch.stack(qs)),
                "keys": r4(torch.stack([k.repeat_interleave(group, dim=0) for k in ks])),
                "last_hidden": [[round(float(x), 7) for x in row] for row in o.last_hidden_state[0]],
            })
            if moe:
                k = cfg.num_experts_per_tok
                sparse = [l not in (getattr(cfg, "mlp_only_layers", None) or []) for l in range(cfg.num_hidden_layers)]
                rid, rw = routing(o.router_logits, sparse, n, k)
                renorm = cls in ("MixtralConfig", "GptOssConfig") or getattr(cfg, "norm_topk_prob", False)
                rw = [[[round(float(x), 7) for x in (row / row.sum() if renorm and l_sparse else row)] for row in w]
                      if l_sparse else w for w, l_sparse in zip(rw, sparse)]
                cases[-1]["experts"] = {"ids": rid, "weights": rw}
            if cls == "GptOssConfig":
                att = torch.stack([a[0] for a in o.attentions]).double()
                cases[-1]["sinks"] = [[[round(float(x), 7) for x in h] for h in l] for l in (1.0 - att.sum(-1))]
        with open(os.path.join(out, "golden.json"), "w") as f:
            json.dump(cases, f)
        for extra_file in ("generation_config.json",):
            p = os.path.join(out, extra_file)
            if os.path.exists(p):
                os.remove(p)
        print(name, dtype, os.path.getsize(os.path.join(out, "model.safetensors")), "bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data", set(sys.argv[2:]))
