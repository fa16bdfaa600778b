"""The decoder peer: transformers' causal LM with eager attention and output_attentions=True on
PyPI's torch (tools/pyref.sh), timing the forward pass that returns every layer's attention.

usage: peer_decoder.py MODEL N_TOKENS [--repeat R]    MODEL: an HF folder or a .gguf file
       peer_decoder.py --make DIR                      writes SmolLM2-135M's shape (30 layers,
                                                       random weights, BF16) with transformers
       peer_decoder.py --make-qwen DIR LAYERS          writes Qwen2.5-0.5B's shape (896 wide, 14 query
                                                       heads over 2, 4,864 MLP, 151,936 words) with LAYERS
                                                       layers and 32,768 positions, random weights, BF16
Prints forward_ms=... (best of R) on stdout.
"""
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config  # noqa: E402


def make(out):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_attention_heads=9,
                      num_key_value_heads=3, num_hidden_layers=30, rope_theta=100000.0, rms_norm_eps=1e-5,
                      tie_word_embeddings=True, max_position_embeddings=8192)
    AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)


def make_qwen(out, layers):
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_attention_heads=14,
                      num_key_value_heads=2, num_hidden_layers=layers, rope_theta=1000000.0, rms_norm_eps=1e-6,
                      tie_word_embeddings=True, max_position_embeddings=32768, use_sliding_window=False)
    AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)


def main():
    if sys.argv[1] == "--make":
        make(sys.argv[2])
        return
    if sys.argv[1] == "--make-qwen":
        make_qwen(sys.argv[2], int(sys.argv[3]))
        return
    path, n = sys.argv[1], int(sys.argv[2])
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 1
    kw = dict(attn_implementation="eager", dtype=torch.float32)
    if path.endswith(".gguf"):
        d, f = os.path.split(os.path.abspath(path))
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, **kw).eval()
    else:
        model = AutoModelForCausalLM.from_pretrained(path, **kw).eval()
    ids = torch.tensor([[1000 % model.config.vocab_size + i % 97 for i in range(n)]])
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeat + 1):  # the first call warms up, as fwd_bench's cold call
            t0 = time.perf_counter()
            model.model(input_ids=ids, output_attentions=True)
            best = min(best, time.perf_counter() - t0) if _ else best
    print(f"forward_ms={best * 1e3:.1f}")


if __name__ == "__main__":
    main()
