"""SmolVLM / Idefics3 against transformers itself: a synthetic Idefics3ForConditionalGeneration made by
transformers' own config and model classes at SmolVLM-256M-Instruct's published shape (the SigLIP tower 768 wide,
12 heads, 3072 MLP, 512-pixel tiles of 16-pixel patches; the pixel shuffle's scale factor 4: 64 image tokens a
tile; SmolLM2-135M's text model, 576 wide, 9 heads, 3 key/value heads, 1536 MLP, vocabulary 49,280) with 2 layers
in each tower, q and k scaled so that attention is peaky, saved with save_pretrained beside the
preprocessor_config.json SmolVLM ships (Idefics3ImageProcessor: LANCZOS, longest edge, 512-pixel tiles) and a small
byte-level BPE tokenizer holding Idefics3's picture tokens (<fake_token_around_image>, <image>, <global-img>,
<row_r_col_c>).

usage: smolvlm_check.py ATTNVIZ WORKDIR IMAGE...
  - preprocessing: attnviz's pixel_values (every tile, then the global view) against Idefics3ImageProcessorPil's
    on each IMAGE (sizes and aspect ratios that make 1 to 16 tiles), at the published longest edge (2048) and at
    1024: tile counts equal, worst difference in 8-bit steps after rescale (bound: one step);
  - the sequence's ids against Idefics3Processor's (the tiles' <row_r_col_c> runs, then <global-img>'s);
  - on every kernel path, for the published shape (the first IMAGE at 1,024: 2 x 2 tiles) and the committed fixture
    tests/data/small-idefics3: every layer's and head's attention of the decoder (over every tile's image tokens) and
    of the vision tower over the global view, and the connector's output for it, against transformers' eager float64 pass fed attnviz's own pixel
    values (bound 1e-4; the connector's relative to its largest).
One PASS/FAIL line each; exit 1 on any FAIL."""
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
from PIL import Image  # noqa: E402

TOL = 1e-4
PROMPT = "<|im_start|>User:<image>What is shown in this picture?<end_of_utterance>\nAssistant:"
VISION = dict(hidden_size=768, intermediate_size=3072, num_attention_heads=12, num_hidden_layers=2, image_size=512,
              patch_size=16)
TEXT = dict(vocab_size=49280, hidden_size=576, intermediate_size=1536, num_hidden_layers=2, num_attention_heads=9,
            num_key_value_heads=3, max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000,
            tie_word_embeddings=False)
PRE = {"image_processor_type": "Idefics3ImageProcessor", "do_convert_rgb": True, "do_image_splitting": True,
       "do_normalize": True, "do_pad": True, "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
       "image_std": [0.5, 0.5, 0.5], "max_image_size": {"longest_edge": 512}, "resample": 1,
       "rescale_factor": 0.00392156862745098, "size": {"longest_edge": 2048}}
# the chat template of SmolVLM-256M-Instruct's form: the picture's <image> where the message's image part is
CHAT = ("<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}{% if message['content'][0]['type'] == "
        "'image' %}{{':'}}{% else %}{{': '}}{% endif %}{% for line in message['content'] %}{% if line['type'] == 'text' %}"
        "{{line['text']}}{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
        "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}")
CHAT_MESSAGE = "What is shown in this picture?"
SPECIALS = (["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<fake_token_around_image>", "<image>", "<end_of_utterance>",
             "<global-img>"] + [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)])


def tokenizer(out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    tok.train_from_iterator(["User: What is shown in this picture?\nAssistant: A red disc on a grey ground.\n"] * 8, tr)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|im_start|>", "eos_token": "<end_of_utterance>",
                   "unk_token": "<|endoftext|>", "pad_token": "<|im_end|>"}, f)
    return tok.token_to_id("<image>")


def build(workdir):
    out = os.path.join(workdir, "smolvlm")
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    tmp = f"{out}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    image_id = tokenizer(tmp)
    torch.manual_seed(51)
    cfg = T.Idefics3Config(vision_config=T.Idefics3VisionConfig(**VISION).to_dict(), text_config=T.LlamaConfig(**TEXT).to_dict(),
                           scale_factor=4, image_token_id=image_id)
    model = T.Idefics3ForConditionalGeneration._from_config(cfg, attn_implementation="eager").float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "vision_model" in name and any(k in name for k in ("q_proj", "k_proj")):
                p.mul_(3.0)  # peaky attention in the tower
            elif "text_model" in name and any(k in name for k in ("q_proj", "k_proj")):
                p.mul_(6.0)
            elif "modality_projection" in name:
                p.mul_(4.0)  # image tokens as large as text embeddings
    model.save_pretrained(tmp)
    with open(os.path.join(tmp, "preprocessor_config.json"), "w") as f:
        json.dump(PRE, f)
    with open(os.path.join(tmp, "chat_template.json"), "w") as f:
        json.dump({"chat_template": CHAT}, f)
    with open(os.path.join(tmp, "processor_config.json"), "w") as f:
        json.dump({"image_seq_len": 64, "processor_class": "Idefics3Processor"}, f)
    os.replace(tmp, out)
    return out


def processor(model_dir, longest):
    pre = {k: v for k, v in PRE.items() if k != "image_processor_type"}
    pre["size"] = {"longest_edge": longest}
    tok = T.PreTrainedTokenizerFast(tokenizer_file=os.path.join(model_dir, "tokenizer.json"), bos_token="<|im_start|>",
                                    eos_token="<end_of_utterance>", unk_token="<|endoftext|>", pad_token="<|im_end|>")
    return T.Idefics3Processor(image_processor=T.Idefics3ImageProcessorPil(**pre), tokenizer=tok, image_seq_len=64,
                               chat_template=CHAT)


def run_attnviz(attnviz, model_dir, image, prefix, kernel, prompt=PROMPT):
    r = subprocess.run([attnviz, "--quiet", "--model", model_dir, "--image", image, prompt, "--json", prefix + ".json",
                        "--npy", prefix + ".npy"], env=dict(os.environ, ATTNVIZ_KERNEL=kernel), capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    got = {"meta": json.load(open(prefix + ".json")), "attn": np.load(prefix + ".npy")}
    for k in ("vision_attention", "image_embeds", "pixel_values"):
        got[k] = np.load(f"{prefix}.{k}.npy")
    return got, None


def kernels(attnviz):
    return [k for k in ("avx512", "avx2", "neon", "scalar")
            if subprocess.run([attnviz, "--quiet", "--tokens-only", "hi"], env=dict(os.environ, ATTNVIZ_KERNEL=k),
                              capture_output=True).returncode == 0]


def attention(attnviz, model_dir, image, prompt, workdir, label):
    fails, ref = 0, None
    for kernel in kernels(attnviz):
        got, err = run_attnviz(attnviz, model_dir, image, os.path.join(workdir, "att.out"), kernel, prompt)
        if got is None:
            print(f"FAIL smolvlm {label} attention ({kernel}): {err}")
            fails += 1
            continue
        ids = got["meta"]["input_ids"]
        if ref is None:
            model = T.Idefics3ForConditionalGeneration.from_pretrained(model_dir, attn_implementation="eager",
                                                                       dtype=torch.float64).eval()
            pv = torch.from_numpy(got["pixel_values"].astype(np.float64))
            pv = pv[None] if pv.ndim == 3 else pv
            with torch.no_grad():
                vout = model.model.vision_model(pixel_values=pv[-1:], output_attentions=True)
                feats = model.model.connector(vout.last_hidden_state)[0]
                out = model(input_ids=torch.tensor([ids]), pixel_values=pv[None], output_attentions=True)
            ref = {"vision_attention": torch.stack([a[0] for a in vout.attentions]).numpy(), "image_embeds": feats.numpy(),
                   "attn": torch.stack([a[0] for a in out.attentions]).numpy()}
        img = [i for i, t in enumerate(ids) if t == model.config.image_token_id]
        after = [i for i in range(len(ids)) if i > max(img)]
        errs = {"vision attention (global view)": float(np.abs(got["vision_attention"] - ref["vision_attention"]).max()),
                "connector": float(np.abs(got["image_embeds"] - ref["image_embeds"]).max() / np.abs(ref["image_embeds"]).max()),
                "decoder attention": float(np.abs(got["attn"] - ref["attn"]).max()),
                "text rows over image tokens": float(np.abs(got["attn"][:, :, after][:, :, :, img]
                                                            - ref["attn"][:, :, after][:, :, :, img]).max())}
        share = float(ref["attn"][:, :, after][:, :, :, img].sum(-1).mean())
        ok = all(v <= TOL for v in errs.values())
        print(f"{'PASS' if ok else 'FAIL'} smolvlm {label} attention ({kernel}, {len(ids)} tokens, {len(img)} image tokens, "
              f"{pv.shape[0]} tiles): " + ", ".join(f"{k} {v:.2e}" for k, v in errs.items())
              + f"; the text after the picture gives it {100 * share:.0f}% of its attention", flush=True)
        fails += not ok
    return fails


def main():
    attnviz, workdir, images = sys.argv[1], sys.argv[2], sys.argv[3:]
    fails = 0
    model_dir = build(workdir)
    # preprocessing at the published longest edge and at 1,024 (the folder's preprocessor_config.json rewritten)
    for longest in (2048, 1024):
        d = os.path.join(workdir, f"pre{longest}")
        if not os.path.exists(d):
            shutil.copytree(model_dir, d)
        with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
            json.dump(dict(PRE, size={"longest_edge": longest}), f)
        proc = processor(model_dir, longest)
        worst, lines = 0.0, []
        pics = images if longest == 1024 else [images[2], images[3]]  # 2,048: 17 and 9 tiles (each ~10 s of tower)
        for img in pics:
            im = Image.open(img)
            want = proc(images=[[im.convert("RGB")]], text=[PROMPT], return_tensors="np")
            ref = want["pixel_values"][0]
            got, err = run_attnviz(attnviz, d, img, os.path.join(workdir, "pre.out"), kernels(attnviz)[0])
            if got is None:
                print(f"FAIL smolvlm pixels {os.path.basename(img)} (longest edge {longest}): {err}")
                fails += 1
                continue
            px = got["pixel_values"]
            px = px[None] if px.ndim == 3 else px
            ids_ok = got["meta"]["input_ids"] == want["input_ids"][0].tolist()
            if px.shape != ref.shape or not ids_ok:
                print(f"FAIL smolvlm pixels {os.path.basename(img)} {im.size[0]}x{im.size[1]} (longest edge {longest}): "
                      f"attnviz {px.shape} vs {ref.shape}, ids {'equal' if ids_ok else 'differ'}")
                fails += 1
                continue
            step = float(np.abs(px - ref).max()) * 0.5 * 255  # normalized by std 0.5: one 8-bit step is 2/255
            worst = max(worst, step)
            lines.append(f"{im.size[0]}x{im.size[1]}: {px.shape[0]} tiles, {len(want['input_ids'][0])} ids, {step:.3f}")
        ok = worst <= 1.0 and len(lines) == len(pics)
        print(f"{'PASS' if ok else 'FAIL'} smolvlm pixels and ids vs Idefics3Processor (longest edge {longest}; "
              f"worst {worst:.3f} of an 8-bit step): " + "; ".join(lines), flush=True)
        fails += not ok
    # --chat with --image: the template's <image> where the message's picture is, then expanded
    d = os.path.join(workdir, "pre1024")
    r = subprocess.run([attnviz, "--quiet", "--model", d, "--image", images[0], "--chat", CHAT_MESSAGE, "--json", "-"],
                       capture_output=True, text=True)
    msgs = [{"role": "user", "content": [{"type": "image", "image": Image.open(images[0]).convert("RGB")},
                                         {"type": "text", "text": CHAT_MESSAGE}]}]
    want = processor(model_dir, 1024).apply_chat_template(msgs, add_generation_prompt=True, tokenize=True,
                                                          return_dict=True)["input_ids"]
    want = [int(x) for x in (want[0] if isinstance(want[0], list) else want)]
    got = json.loads(r.stdout)["input_ids"] if r.returncode == 0 else None
    ok = got == want
    print(f"{'PASS' if ok else 'FAIL'} smolvlm --chat {CHAT_MESSAGE!r} with --image: the sequence is "
          f"Idefics3Processor.apply_chat_template's ({len(want)} ids)"
          + ("" if ok else f": {r.stderr.strip() or (got[:12], want[:12])}"), flush=True)
    fails += not ok
    # attention on every kernel path: the published shape at the 1,024 edge (a 640 x 480 picture: 2 x 2 tiles and
    # the global view), and the committed fixture tests/data/small-idefics3 (the CLI's and bad inputs' model)
    fails += attention(attnviz, os.path.join(workdir, "pre1024"), images[0], PROMPT, workdir, "published shape")
    fails += attention(attnviz, "tests/data/small-idefics3", "tests/data/vision-picture.png",
                       "user: <image> what is in the picture? describe it.", workdir, "small-idefics3")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
