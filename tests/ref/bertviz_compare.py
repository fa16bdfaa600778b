"""attnviz against bertviz itself, on the same trained model and text.

usage: bertviz_compare.py ATTNVIZ MODEL_DIR TEXT[\tTEXT_B] ...
For each input:
- head view and model view: bertviz.head_view / model_view(html_action="return") on the attention of
  transformers' BertModel (eager), as bertviz's notebooks do; the numbers are read back out of the HTML
  bertviz returns (its `params` JSON) and compared, token for token, with attnviz's JSON;
- neuron view: bertviz.neuron_view.get_attention (the function behind neuron_view.show) with bertviz's own
  bundled BertModel/BertTokenizer (bertviz.transformers_neuron_view) loaded from a local copy of the
  checkpoint (it reads only pytorch_model.bin); its queries, keys and attention are compared with attnviz's
  --qk JSON, and its q·k/√d and softmax recomputed from them.
Prints the max |diff| per quantity; exits 1 on a token mismatch or an attention difference over 1e-5.
"""
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import BertModel  # noqa: E402

from bertviz import head_view, model_view  # noqa: E402
from bertviz.neuron_view import get_attention  # noqa: E402
from bertviz.transformers_neuron_view import BertModel as NvBertModel  # noqa: E402
from bertviz.transformers_neuron_view import BertTokenizer as NvBertTokenizer  # noqa: E402


def params_of(html):
    """The params object bertviz substitutes for PYTHON_PARAMS in its view script."""
    marker = "const params = "
    i = html.index(marker) + len(marker)
    return json.JSONDecoder().raw_decode(html[i:])[0]


def maxdiff(a, b):
    a, b = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    if a.shape != b.shape:
        raise SystemExit(f"shape {tuple(a.shape)} vs {tuple(b.shape)}")
    return (a - b).abs().max().item()


def main():
    attnviz, model_dir, texts = sys.argv[1], sys.argv[2], sys.argv[3:]
    torch.set_num_threads(2)
    model = BertModel.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32).eval()
    with tempfile.TemporaryDirectory() as tmp:
        # bertviz's neuron-view model reads config.json + pytorch_model.bin, and vocab.txt for its tokenizer
        for f in ("config.json", "vocab.txt"):
            with open(os.path.join(model_dir, f), "rb") as src, open(os.path.join(tmp, f), "wb") as dst:
                dst.write(src.read())
        torch.save(load_file(os.path.join(model_dir, "model.safetensors")), os.path.join(tmp, "pytorch_model.bin"))
        nv_model = NvBertModel.from_pretrained(tmp).eval()
        nv_tok = NvBertTokenizer.from_pretrained(tmp, do_lower_case=True)
    worst = {"head_view": 0.0, "model_view": 0.0, "neuron_attn": 0.0, "neuron_q": 0.0, "neuron_k": 0.0,
             "neuron_qk": 0.0, "neuron_softmax": 0.0}
    bad = []
    for text in texts:
        parts = text.split("\t")
        out = json.loads(subprocess.run([attnviz, "--model", model_dir, "--json", "-", "--qk", "--precision", "9",
                                         "--quiet"] + parts, check=True, capture_output=True).stdout)
        ours = out["attention"]
        toks = out["tokens"]
        b = out.get("sentence_b_start")
        ids = torch.tensor([out["input_ids"]])
        with torch.no_grad():
            r = model(input_ids=ids, token_type_ids=torch.tensor([out["token_type_ids"]]), output_attentions=True)
        # head view and model view, as bertviz's notebooks call them
        hv = params_of(head_view(r.attentions, toks, sentence_b_start=b, html_action="return").data)
        mv = params_of(model_view(r.attentions, toks, sentence_b_start=b, html_action="return").data)
        for name, p in (("head_view", hv), ("model_view", mv)):
            a = p["attention"][0]  # "All" (or the only) filter
            if a["left_text"] != toks or a["right_text"] != toks:
                bad.append(f"{name} tokens differ for {text!r}: {a['left_text']} vs {toks}")
            worst[name] = max(worst[name], maxdiff(a["attn"], ours))
        # neuron view: bertviz's own model and tokenizer
        nv = get_attention(nv_model, "bert", nv_tok, parts[0], parts[1] if len(parts) > 1 else None,
                           include_queries_and_keys=True)["all"]
        if nv["left_text"] != toks:
            bad.append(f"neuron_view tokens differ for {text!r}: {nv['left_text']} vs {toks}")
            continue
        worst["neuron_attn"] = max(worst["neuron_attn"], maxdiff(nv["attn"], ours))
        worst["neuron_q"] = max(worst["neuron_q"], maxdiff(nv["queries"], out["queries"]))
        worst["neuron_k"] = max(worst["neuron_k"], maxdiff(nv["keys"], out["keys"]))
        # the neuron view draws q×k and softmax(q·k/√d) from its queries and keys; recompute them from
        # bertviz's vectors and from ours
        qb, kb = torch.tensor(nv["queries"]), torch.tensor(nv["keys"])
        qo, ko = torch.tensor(out["queries"]), torch.tensor(out["keys"])
        d = qb.shape[-1]
        sb, so = qb @ kb.transpose(-1, -2) / d ** 0.5, qo @ ko.transpose(-1, -2) / d ** 0.5
        worst["neuron_qk"] = max(worst["neuron_qk"], (sb - so).abs().max().item())
        worst["neuron_softmax"] = max(worst["neuron_softmax"],
                                      (sb.softmax(-1) - so.softmax(-1)).abs().max().item())
    print(f"bertviz: {len(texts)} inputs: " + ", ".join(f"{k} max |diff| {v:.2e}" for k, v in worst.items()))
    for m in bad:
        print(m)
    if bad:
        raise SystemExit(1)
    if max(worst["head_view"], worst["model_view"], worst["neuron_attn"]) > 1e-5:
        raise SystemExit("attention differs from bertviz's by more than 1e-5")


if __name__ == "__main__":
    main()
