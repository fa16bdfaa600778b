"""What the TransformerLens reference checks (explain_check.py, lens_check.py) share: the model
in TransformerLens over transformers' own float64 eager model, and one attnviz run's JSON."""
import json
import os
import subprocess

import torch
import transformers


def bridge(path, center_writing_weights):
    """(TransformerLens's TransformerBridge in compatibility mode, the transformers model under it) for the
    checkpoint folder path: float64, eager attention, LayerNorm folded, value biases not folded."""
    from transformer_lens import TransformerBridge
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float64,
                                                           attn_implementation="eager").eval()
    b = TransformerBridge.boot_transformers(path, hf_model=hf, device="cpu", dtype=torch.float64)
    b.enable_compatibility_mode(disable_warnings=True, fold_ln=True, center_writing_weights=center_writing_weights,
                                center_unembed=False, fold_value_biases=False)
    return b, hf


def run(attnviz, path, text, kernel, extra):
    """attnviz's JSON document (--precision 9) of text on path under ATTNVIZ_KERNEL=kernel, extra options added."""
    env = dict(os.environ, ATTNVIZ_KERNEL=kernel)
    cmd = [attnviz, "--quiet", "--model", path, "--precision", "9", "--json", "-"] + extra + [text]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)
