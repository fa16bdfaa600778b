"""Live check: attnviz vs Hugging Face transformers (eager attention) on the trained
all-MiniLM-L6-v2. Tokens (ids) from AutoTokenizer (Rust tokenizers) must equal attnviz's
exactly; attention must agree to ATOL. Prints max |diff| for attention, hidden states,
queries, keys and the worst input, then PASS/FAIL lines.
  python hf_minilm_check.py MODEL_DIR INPUTS_TXT ATTNVIZ_JSONL"""
import json
import sys

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

ATOL_ATTN = 1e-5
model_dir, inputs_path, jsonl = sys.argv[1:4]
torch.set_num_threads(2)
tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModel.from_pretrained(model_dir, attn_implementation="eager", output_attentions=True,
                                  output_hidden_states=True, dtype=torch.float32).eval()
assert model.config._attn_implementation == "eager", model.config._attn_implementation
H = model.config.num_attention_heads
grab = {}
for i, layer in enumerate(model.encoder.layer):
    att = layer.attention.self
    att.query.register_forward_hook(lambda m, a, o, i=i: grab.__setitem__(("q", i), o))
    att.key.register_forward_hook(lambda m, a, o, i=i: grab.__setitem__(("k", i), o))

def heads(x):  # (1, n, H*d) -> (H, n, d)
    return x[0].reshape(x.shape[1], H, -1).permute(1, 0, 2).numpy()

texts = [l.rstrip("\n") for l in open(inputs_path, encoding="utf-8")]
ours = [json.loads(l) for l in open(jsonl, encoding="utf-8")]
worst = {k: (0.0, "") for k in ("attention", "hidden", "queries", "keys")}
mismatch = []
if len(ours) != len(texts):
    print(f"FAIL minilm_same_numbers_as_transformers: {len(ours)} attnviz outputs for {len(texts)} inputs")
    sys.exit(1)
for text, o in zip(texts, ours):
    a, _, b = text.partition("\t")
    enc = tok(a, b if "\t" in text else None, truncation=True, max_length=512, return_tensors="pt")
    ids = enc["input_ids"][0].tolist()
    if ids != o["input_ids"] or enc["token_type_ids"][0].tolist() != o["token_type_ids"]:
        mismatch.append(text[:60])
        continue
    with torch.no_grad():
        out = model(**enc)
    ref_att = np.stack([x[0].numpy() for x in out.attentions])
    ref_hid = np.stack([x[0].numpy() for x in out.hidden_states])
    ref_q = np.stack([heads(grab[("q", i)]) for i in range(len(out.attentions))])
    ref_k = np.stack([heads(grab[("k", i)]) for i in range(len(out.attentions))])
    for name, ref, got in (("attention", ref_att, o["attention"]), ("hidden", ref_hid, o["hidden_states"]),
                           ("queries", ref_q, o["queries"]), ("keys", ref_k, o["keys"])):
        d = float(np.max(np.abs(ref - np.asarray(got, dtype=np.float32))))
        if d > worst[name][0]:
            worst[name] = (d, f"{len(ids)} tokens: {text[:50]!r}")
for name, (d, w) in worst.items():
    print(f"minilm max |diff| {name}: {d:.3g}  (worst: {w})")
print(f"minilm inputs: {len(texts)}, token mismatches: {len(mismatch)} {mismatch[:5]}")
ok = True
if mismatch:
    print(f"FAIL minilm_tokens_equal_rust_tokenizers: {len(mismatch)} of {len(texts)} differ, e.g. {mismatch[0]!r}")
    ok = False
else:
    print("PASS minilm_tokens_equal_rust_tokenizers")
if worst["attention"][0] > ATOL_ATTN:
    print(f"FAIL minilm_attention_matches_transformers: max |diff| {worst['attention'][0]:.3g} > {ATOL_ATTN}")
    ok = False
else:
    print("PASS minilm_attention_matches_transformers")
sys.exit(0 if ok else 1)
