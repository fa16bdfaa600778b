"""gpt-oss in llama.cpp's gpt-oss GGUF files against transformers on the checkpoint the file was
written from (transformers reads no gpt-oss GGUF): a synthetic GptOssForCausalLM that transformers
writes (gpt-oss's own YaRN, sinks, biases, 8 experts top-4 whose gate/up reach past the clamp at 7,
an 8-token window on alternate layers), converted by llama.cpp's own convert_hf_to_gguf.py (F32), and
that file with the experts re-encoded as MXFP4 by the gguf package (the published gpt-oss GGUFs keep
their experts so) against the checkpoint with every expert matrix rounded through MXFP4. attnviz
(build/fwd_dump) and transformers' eager attention (float64) on the same ids: attention, each row's
sink share, and every token's experts in order (weights within the same bound). Then the
checkpoint in the published gpt-oss layout (experts as MXFP4 gate_up_proj_blocks/_scales and
down_proj_blocks/_scales, quantization_config mxfp4) against transformers loading that folder itself
(its own MXFP4 dequantization on the CPU). Last, the tokenizer: a checkpoint with gpt-oss's o200k
tokenizer.json (vocab 201,088), converted by the converter as it is (its pre-tokenizer recognized), run
by attnviz (the CLI, --batch) as a folder and as the GGUF file over lines of the tokenizer corpus
(tests/tokenizer/tokjson_corpus.jsonl, those without tabs or line breaks, and tokjson_gptoss.jsonl's
harmony-format lines): input ids against the Rust tokenizers library reading the tokenizer.json.
And Llama 3.1's rope scaling through the same converter: a Llama checkpoint with rope_parameters of type
llama3 (factor 8, low/high frequency factors 1/4, an original context of 32 so that 100 tokens reach past
it), converted (F32): the file carries the factors as the tensor rope_freqs.weight (no rope scaling
type), which attnviz divides each frequency by; its attention on every kernel path this CPU runs
(ATTNVIZ_KERNEL) against float64 transformers on the checkpoint, the paths equal bit for bit, and how far
the checkpoint read without its scaling lands (the factors matter at these lengths).

usage: gptoss_gguf_check.py FWD_DUMP WORKDIR LLAMA_CPP_DIR ATTNVIZ O200K_TOKENIZER_JSON
One PASS/FAIL line per file; exit 1 on any FAIL.
"""
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import gguf  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from gguf.quants import dequantize, quantize  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decoder_check import compare_routing  # noqa: E402

TOL = 1e-4
VOCAB = 512
LENGTHS = [1, 9, 40]
SHAPE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=64, num_attention_heads=8, num_key_value_heads=2,
             head_dim=16, num_hidden_layers=4, num_local_experts=8, num_experts_per_tok=4, sliding_window=8,
             rms_norm_eps=1e-5, max_position_embeddings=131072,
             rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0,
                              "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 4096})
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def build(work):
    out = os.path.join(work, "hf")
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    torch.manual_seed(1234)
    model = AutoModelForCausalLM.from_config(transformers.GptOssConfig(**SHAPE), attn_implementation="eager").float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and name.endswith("sinks"):
                p.copy_(2.0 * torch.randn_like(p))
            elif name.endswith("_bias") or (p.dim() == 1 and "bias" in name):
                p.copy_(0.1 * torch.randn_like(p))
            elif p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith("router.weight"):
                p.mul_(10.0)  # clear choices (the check compares them exactly)
            elif name.endswith("experts.gate_up_proj"):
                p.mul_(25.0)  # gate and up of several units at this width: the clamp at 7 bites
            elif "q_proj" in name or "k_proj" in name:
                p.mul_(3.0)
    model.save_pretrained(out, safe_serialization=True)
    # the converter needs a tokenizer: small-llama's (40 tokens; the converter pads the rest)
    with open(os.path.join(REPO, "tests/data/small-llama/tokenizer.json"), "rb") as f, \
            open(os.path.join(out, "tokenizer.json"), "wb") as g:
        g.write(f.read())
    return out


def convert(hf, llama_cpp, path):
    """llama.cpp's convert_hf_to_gguf.py, its pre-tokenizer check told "gpt-4o" (gpt-oss's; the
    stand-in tokenizer is not gpt-oss's own, and fwd_dump reads no tokenizer)."""
    if os.path.exists(path):
        return
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import conversion.base as b; "
            "b.TextModel.get_vocab_base_pre = lambda self, tok: 'gpt-4o'; "
            "sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[2:]; import convert_hf_to_gguf as c; c.main()")
    r = subprocess.run([sys.executable, "-c", code, llama_cpp, hf, "--outfile", path + ".tmp", "--outtype", "f32"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("convert_hf_to_gguf.py failed: " + r.stderr.strip().splitlines()[-1])
    os.rename(path + ".tmp", path)


EXPS = ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")


def to_mxfp4(src, dst):
    """src's tensors copied, the experts' matrices re-encoded as MXFP4; returns {name: dequantized}."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst + ".tmp", "gpt-oss")
    for f in r.fields.values():
        if f.name == gguf.Keys.General.ARCHITECTURE or f.name.startswith("GGUF."):
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(f.name, f.contents(), vt, sub_type=f.types[-1])
        else:
            w.add_key_value(f.name, f.contents(), vt)
    rounded = {}
    for t in r.tensors:
        a = np.asarray(t.data)
        if t.name.endswith(EXPS):
            q = quantize(a.astype(np.float32), gguf.GGMLQuantizationType.MXFP4)
            rounded[t.name] = dequantize(q, gguf.GGMLQuantizationType.MXFP4).reshape(a.shape)
            w.add_tensor(t.name, q, raw_dtype=gguf.GGMLQuantizationType.MXFP4)
        else:
            w.add_tensor(t.name, a, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.rename(dst + ".tmp", dst)
    return rounded


def hf_mxfp4(hf, dst):
    """hf's folder with each expert matrix (out, in) in transformers' MXFP4 layout: blocks (E, out, in/32,
    16), byte j holding elements 2j (low nibble) and 2j + 1, and scales (E, out, in/32), the E8M0 exponents
    (the values quantized by gguf's MXFP4 quantizer; its layout re-ordered)."""
    if os.path.exists(os.path.join(dst, "config.json")):
        return dst
    import json
    import shutil
    from safetensors.torch import load_file, save_file
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    out = {}
    for k, v in load_file(os.path.join(hf, "model.safetensors")).items():
        if not (k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj")):
            out[k] = v
            continue
        w = v.numpy().transpose(0, 2, 1).astype(np.float32)  # (E, out, in)
        E, R, I = w.shape
        q = quantize(w, gguf.GGMLQuantizationType.MXFP4).reshape(E, R, I // 32, 17)
        codes = np.concatenate([q[..., 1:] & 0xF, q[..., 1:] >> 4], axis=-1)  # element k of each block
        out[k + "_blocks"] = torch.from_numpy((codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8))
        out[k + "_scales"] = torch.from_numpy(q[..., 0].astype(np.uint8))
    save_file(out, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(hf, "config.json")))
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"), indent=2)
    shutil.copy(os.path.join(hf, "tokenizer.json"), tmp)
    os.rename(tmp, dst)
    return dst


def reference(hf, ids, rounded=None):
    model = AutoModelForCausalLM.from_pretrained(hf, attn_implementation="eager", dtype=torch.float64,
                                                 experts_implementation="eager").eval()
    if rounded:
        # the experts as the MXFP4 file holds them: gate and up interleaved again, stored (in, out)
        with torch.no_grad():
            for l, layer in enumerate(model.model.layers):
                ex = layer.mlp.experts
                g = torch.from_numpy(rounded[f"blk.{l}.ffn_gate_exps.weight"]).double()  # (E, F, H)
                u = torch.from_numpy(rounded[f"blk.{l}.ffn_up_exps.weight"]).double()
                d = torch.from_numpy(rounded[f"blk.{l}.ffn_down_exps.weight"]).double()  # (E, H, F)
                ex.gate_up_proj[:, :, 0::2] = g.transpose(1, 2)
                ex.gate_up_proj[:, :, 1::2] = u.transpose(1, 2)
                ex.down_proj.copy_(d.transpose(1, 2))
    with torch.no_grad():
        out = model.model(torch.tensor([ids]), output_attentions=True, output_router_logits=True)
    attn = torch.stack([a[0] for a in out.attentions]).numpy()
    return attn, [r.reshape(len(ids), -1).double().numpy() for r in out.router_logits]


def check(fwd, path, hf, label, rng, rounded=None):
    worst_a = worst_s = 0.0
    routed = [0, 0, 0.0, 0]
    for n in LENGTHS:
        ids = [int(x) for x in rng.integers(0, VOCAB, size=n)]
        prefix = path + ".out"
        r = subprocess.run([fwd, path, prefix] + [str(i) for i in ids], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL gptoss_gguf {label}: attnviz failed on {n} tokens: {r.stderr.strip()}")
            return False
        L, H = SHAPE["num_hidden_layers"], SHAPE["num_attention_heads"]
        a = np.fromfile(prefix + ".attn", dtype=np.float32).reshape(L, H, n, n)
        s = np.fromfile(prefix + ".sinks", dtype=np.float32).reshape(L, H, n)
        ra, logits = reference(hf, ids, rounded)
        worst_a = max(worst_a, float(np.abs(ra - a).max()))
        worst_s = max(worst_s, float(np.abs((1.0 - ra.sum(-1)) - s).max()))
        c = compare_routing(prefix, hf, n, L, SHAPE["num_experts_per_tok"], logits)
        if c is None:
            print(f"FAIL gptoss_gguf {label}: attnviz's sparse layers are not transformers'")
            return False
        routed = [routed[0] + c[0], routed[1] + c[1], max(routed[2], c[2]), routed[3] + c[3]]
    ok = worst_a <= TOL and worst_s <= TOL and routed[3] == 0 and routed[2] <= TOL
    print(f"{'PASS' if ok else 'FAIL'} gptoss_gguf {label}: attention max |diff| {worst_a:.2e}, sink shares "
          f"{worst_s:.2e} from float64 transformers (tol {TOL:g}); {routed[0] - routed[1]}/{routed[0]} token-layers "
          f"choose its experts in its order ({routed[1] - routed[3]} at near ties), weights {routed[2]:.2e}; "
          f"lengths {','.join(map(str, LENGTHS))}")
    return ok


def tokenizer_check(attnviz, work, llama_cpp, tok_json):
    """The o200k tokenizer through a folder and through llama.cpp's GGUF of it, against the Rust library."""
    import json
    import shutil
    from tokenizers import Tokenizer
    hf = os.path.join(work, "hf-o200k")
    if not os.path.exists(os.path.join(hf, "config.json")):
        torch.manual_seed(7)
        cfg = transformers.GptOssConfig(vocab_size=201088, hidden_size=32, intermediate_size=32, num_attention_heads=4,
                                        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, num_local_experts=4,
                                        num_experts_per_tok=2, sliding_window=8, max_position_embeddings=4096,
                                        bos_token_id=199998, eos_token_id=200002, pad_token_id=199999)
        AutoModelForCausalLM.from_config(cfg).save_pretrained(hf + ".tmp", safe_serialization=True)
        shutil.copy(tok_json, os.path.join(hf + ".tmp", "tokenizer.json"))
        os.rename(hf + ".tmp", hf)
    path = os.path.join(work, "o200k-f32.gguf")
    if not os.path.exists(path):
        r = subprocess.run([sys.executable, os.path.join(llama_cpp, "convert_hf_to_gguf.py"), hf, "--outfile", path + ".tmp",
                            "--outtype", "f32"], capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL gptoss_gguf tokenizer: convert_hf_to_gguf.py failed: " + r.stderr.strip().splitlines()[-1])
            return False
        os.rename(path + ".tmp", path)
    texts = []
    for name in ("tokjson_corpus.jsonl", "tokjson_gptoss.jsonl"):
        for line in open(os.path.join(REPO, "tests/tokenizer", name), encoding="utf-8"):
            t = json.loads(line)
            if t.strip() and not any(c in t for c in "\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
                texts.append(t)
    batch = os.path.join(work, "o200k.txt")
    with open(batch, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in texts))
    ref = Tokenizer.from_file(tok_json)
    want = [ref.encode(t).ids for t in texts]
    ok = True
    for label, model in (("folder", hf), ("GGUF (llama.cpp's converter)", path)):
        r = subprocess.run([attnviz, "--model", model, "--quiet", "--layers", "0", "--heads", "0", "--batch", batch],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL gptoss_gguf tokenizer {label}: attnviz failed: {r.stderr.strip()[-300:]}")
            ok = False
            continue
        got = [json.loads(x)["input_ids"] for x in r.stdout.splitlines() if x.strip()]
        same = sum(g == w for g, w in zip(got, want))
        good = same == len(want) == len(got)
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} gptoss_gguf tokenizer {label}: {same}/{len(want)} lines' ids identical to the "
              f"Rust tokenizers library (o200k, harmony-format lines included)")
    return ok


LLAMA3 = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, num_hidden_layers=2, rms_norm_eps=1e-5, max_position_embeddings=256,
              tie_word_embeddings=False,
              rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 32})
LLAMA3_LENGTHS = [1, 9, 100]


def kernels(fwd, probe):
    """The products' kernels this CPU runs (fwd_dump refuses the others with status 2)."""
    have = []
    for k in ("avx512", "avx2", "neon", "scalar"):
        r = subprocess.run([fwd, probe, probe + ".probe", "1"], capture_output=True, text=True,
                           env=dict(os.environ, ATTNVIZ_KERNEL=k))
        if r.returncode == 0:
            have.append(k)
    return have


def llama3_check(fwd, work, llama_cpp, rng):
    hf = os.path.join(work, "hf-llama3")
    if not os.path.exists(os.path.join(hf, "config.json")):
        torch.manual_seed(99)
        model = AutoModelForCausalLM.from_config(transformers.LlamaConfig(**LLAMA3), attn_implementation="eager")
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() == 1:
                    p.copy_(1.0 + 0.1 * torch.randn_like(p))
                elif "q_proj" in name or "k_proj" in name:
                    p.normal_(0, 0.4)  # sharp attention, so that the rotation's angles show
        model.float().save_pretrained(hf + ".tmp", safe_serialization=True)
        with open(os.path.join(REPO, "tests/data/small-llama/tokenizer.json"), "rb") as f, \
                open(os.path.join(hf + ".tmp", "tokenizer.json"), "wb") as g:
            g.write(f.read())
        os.rename(hf + ".tmp", hf)
    path = os.path.join(work, "llama3-f32.gguf")
    if not os.path.exists(path):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import conversion.base as b; "
                "b.TextModel.get_vocab_base_pre = lambda self, tok: 'llama-bpe'; "
                "sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[2:]; import convert_hf_to_gguf as c; c.main()")
        r = subprocess.run([sys.executable, "-c", code, llama_cpp, hf, "--outfile", path + ".tmp", "--outtype", "f32"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL llama3_rope: convert_hf_to_gguf.py failed: " + r.stderr.strip().splitlines()[-1])
            return False
        os.rename(path + ".tmp", path)
    g = gguf.GGUFReader(path)
    freqs = [t for t in g.tensors if t.name == "rope_freqs.weight"]
    if len(freqs) != 1 or any(f.name.endswith("rope.scaling.type") for f in g.fields.values()):
        print("FAIL llama3_rope: the converter wrote no rope_freqs.weight (or a rope scaling type as well)")
        return False
    factors = np.asarray(freqs[0].data)
    paths = kernels(fwd, path)
    worst = {k: 0.0 for k in paths}
    unscaled = 0.0
    same = True
    L, H = LLAMA3["num_hidden_layers"], LLAMA3["num_attention_heads"]
    for n in LLAMA3_LENGTHS:
        ids = [int(x) for x in rng.integers(0, VOCAB, size=n)]
        ref = None
        first = None
        for k in paths:
            prefix = os.path.join(work, "llama3-" + k)
            r = subprocess.run([fwd, path, prefix] + [str(i) for i in ids], capture_output=True, text=True,
                               env=dict(os.environ, ATTNVIZ_KERNEL=k))
            if r.returncode != 0:
                print(f"FAIL llama3_rope: attnviz ({k}) failed on {n} tokens: {r.stderr.strip()}")
                return False
            raw = open(prefix + ".attn", "rb").read()
            same &= first is None or raw == first
            first = first or raw
            a = np.frombuffer(raw, dtype=np.float32).reshape(L, H, n, n)
            if ref is None:
                ref = reference_llama(hf, ids)
            worst[k] = max(worst[k], float(np.abs(ref - a).max()))
        unscaled = max(unscaled, float(np.abs(reference_llama(hf, ids, scaled=False) - ref).max()))
    ok = bool(paths) and all(v <= TOL for v in worst.values()) and same and unscaled > 100 * TOL
    figures = ", ".join(f"{k} {v:.2e}" for k, v in worst.items())
    print(f"{'PASS' if ok else 'FAIL'} llama3_rope: Llama with rope scaling llama3 through llama.cpp's converter "
          f"(rope_freqs.weight, {len(factors)} factors from {factors.min():g} to {factors.max():g}): attention max "
          f"|diff| from float64 transformers {figures} (tol {TOL:g}); the paths {'equal' if same else 'DIFFER'} bit "
          f"for bit; the checkpoint read without its scaling differs by {unscaled:.2e} (must exceed {100 * TOL:g}); "
          f"lengths {','.join(map(str, LLAMA3_LENGTHS))}")
    return ok


def reference_llama(hf, ids, scaled=True):
    """Attention of the checkpoint in float64 (eager); scaled=False drops its llama3 rope scaling."""
    kw = {}
    if not scaled:
        cfg = transformers.AutoConfig.from_pretrained(hf)
        cfg.rope_parameters = {"rope_type": "default", "rope_theta": LLAMA3["rope_parameters"]["rope_theta"]}
        kw["config"] = cfg
    model = AutoModelForCausalLM.from_pretrained(hf, attn_implementation="eager", dtype=torch.float64, **kw).eval()
    with torch.no_grad():
        out = model.model(torch.tensor([ids]), output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).numpy()


def main():
    fwd, work, llama_cpp, attnviz, tok_json = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(2)
    hf = build(work)
    f32 = os.path.join(work, "gptoss-f32.gguf")
    convert(hf, llama_cpp, f32)
    mx = os.path.join(work, "gptoss-mxfp4.gguf")
    rounded = to_mxfp4(f32, mx)
    rng = np.random.default_rng(5)
    ok = check(fwd, f32, hf, "F32 (llama.cpp's converter)", rng)
    ok &= check(fwd, mx, hf, "MXFP4 experts (against the checkpoint rounded through MXFP4)", rng, rounded)
    hm = hf_mxfp4(hf, os.path.join(work, "hf-mxfp4"))
    ok &= check(fwd, hm, hm, "HF folder with MXFP4 experts (blocks/scales; transformers dequantizing it)", rng)
    ok &= tokenizer_check(attnviz, work, llama_cpp, tok_json)
    ok &= llama3_check(fwd, work, llama_cpp, rng)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
