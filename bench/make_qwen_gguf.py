"""The Qwen2.5-shaped bench checkpoint (bench/peer_decoder.py --make-qwen) as a GGUF file for llama.cpp's
llama-bench: the same weights in F16 (norms and biases F32), tensors named as llama.cpp's converter names
Qwen2's (no q/k row permutation for this architecture), the output projection left out (tied), and a
placeholder vocabulary of as many tokens as the embedding has rows (llama-bench feeds token ids; it never
tokenizes text). Run with the reference Python (tools/pyref.sh: gguf, safetensors).

usage: make_qwen_gguf.py CHECKPOINT_DIR OUT.gguf
"""
import json
import os
import sys

import gguf
import numpy as np
from safetensors.torch import load_file  # BF16 tensors: numpy has no bfloat16, torch widens them

BLOCK = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
         "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    parts = hf.split(".")  # model.layers.N.<module...>.weight|bias
    return f"blk.{parts[2]}.{BLOCK['.'.join(parts[3:-1])]}.{parts[-1]}"


def main():
    src, out = sys.argv[1], sys.argv[2]
    cfg = json.load(open(os.path.join(src, "config.json")))
    theta = cfg.get("rope_theta") or cfg["rope_parameters"]["rope_theta"]
    sd = {k: v.float().numpy() for k, v in load_file(os.path.join(src, "model.safetensors")).items()}
    w = gguf.GGUFWriter(out + ".tmp", "qwen2")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(float(theta))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    vocab = cfg["vocab_size"]
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"<t{i}>" for i in range(vocab)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([1] * vocab)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for k, a in sd.items():
        if k == "lm_head.weight":
            continue  # tied to the embedding
        w.add_tensor(name(k), a.astype(np.float32 if a.ndim == 1 else np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
