"""Writes the small committed vision fixtures (the CLI, bad-input, page and browser tests run them
without torch): tiny checkpoints made by transformers' own classes and save_pretrained, each with
the preprocessor_config.json its family publishes (at the fixture's size), and a test picture.

  small-vit      ViTModel, F32: hidden 32, 4 heads, 2 layers, patch 8 on 32 x 32 (1 + 16 tokens)
  small-dinov2   Dinov2WithRegistersModel, BF16: 2 registers, a 6 x 6 position grid interpolated to
                 the 4 x 4 of its 32-pixel crop (1 + 2 + 16 tokens)
  small-siglip   SiglipModel, F16: both towers (text: a tiny BPE tokenizer.json), the pooling
                 head (16 tokens)
  small-llava    LlavaForConditionalGeneration, F32: a CLIP vision tower (TINY, 3 layers: 16 image tokens
                 from the feature layer -2, the class token dropped), the projector, a Llama (hidden 32,
                 4 heads, 2 key/value heads, 2 layers) with a tiny BPE tokenizer holding <image>
  small-idefics3 Idefics3ForConditionalGeneration, F32: a SigLIP-style tower (TINY: 4 x 4 patches a 32-pixel tile),
                 the pixel shuffle (scale 2: 4 image tokens a tile), the connector, a Llama (as small-llava's);
                 Idefics3ImageProcessor at a 64-pixel longest edge and 32-pixel tiles (the picture: 2 x 2 tiles and
                 the global view, 20 image tokens), a tiny BPE tokenizer holding Idefics3's picture tokens
  picture.png    48 x 40 RGB: a red disc on a blue-grey ground (the grid's patches differ)

usage: make_vision_fixtures.py OUT_DIR [NAME...]   (tests/data; run with tools/pyimg.sh's python; NAME: only
those fixtures, e.g. small-llava)
"""
import json
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402
from PIL import Image  # noqa: E402

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32,
            patch_size=8)


def peaky(model, scale):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(k in name for k in ("query", "key.", "q_proj", "k_proj")):
                p.mul_(scale)
            elif "in_proj_weight" in name:
                p[:2 * p.shape[1]].mul_(scale)
            elif any(k in name for k in ("cls_token", "register_tokens", "probe", "class_embedding")):
                p.normal_(0, 1.0)


def tokenizer_json(path, words, llava=False, extra=()):
    """A tiny byte-level-free BPE tokenizer.json trained by the tokenizers library on the words (llava: a
    decoder's, <s> first, with <image> among its special tokens)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = (["[UNK]", "<s>", "</s>", "<image>"] if llava else ["[UNK]", "</s>"]) + list(extra)
    trainer = trainers.BpeTrainer(vocab_size=64 + len(extra), special_tokens=specials, show_progress=False)
    tok.train_from_iterator([" ".join(words)] * 4, trainer)
    if llava:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", tok.token_to_id("<s>"))])
    else:
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A $B </s>",
                                                           special_tokens=[("</s>", tok.token_to_id("</s>"))])
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>", "unk_token": "[UNK]"}, f)
    return tok.get_vocab_size()


def save(model, out, dtype, pre):
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    model.to(getattr(torch, dtype)).save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f, indent=1)


def llava(root):
    out = os.path.join(root, "small-llava")
    os.makedirs(out, exist_ok=True)
    words = "user : assistant what is in the picture ? a red disc on blue grey ground describe it .".split()
    vocab = tokenizer_json(out, words, llava=True)
    image_id = json.load(open(os.path.join(out, "tokenizer.json")))["model"]["vocab"]["<image>"]
    torch.manual_seed(11)
    cfg = T.LlavaConfig(vision_config=T.CLIPVisionConfig(**dict(TINY, num_hidden_layers=3), hidden_act="quick_gelu"),
                        text_config=T.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=48,
                                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                  max_position_embeddings=128, bos_token_id=1, eos_token_id=2),
                        image_token_index=image_id, image_seq_length=16, vision_feature_layer=-2,
                        vision_feature_select_strategy="default")
    model = T.LlavaForConditionalGeneration._from_config(cfg, attn_implementation="eager").eval()
    peaky(model, 3.0)
    with torch.no_grad():
        model.model.multi_modal_projector.linear_2.weight.mul_(4.0)
    keep = {f: open(os.path.join(out, f)).read() for f in ("tokenizer.json", "tokenizer_config.json")}
    save(model, out, "float32", {"image_processor_type": "CLIPImageProcessor", "do_center_crop": True,
                                 "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
                                 "image_mean": [0.48145466, 0.4578275, 0.40821073],
                                 "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3,
                                 "crop_size": {"height": 32, "width": 32}, "size": {"shortest_edge": 32}})
    for f, text in keep.items():
        with open(os.path.join(out, f), "w") as fh:
            fh.write(text)


def idefics3(root):
    out = os.path.join(root, "small-idefics3")
    os.makedirs(out, exist_ok=True)
    words = "user : assistant what is in the picture ? a red disc on blue grey ground describe it .".split()
    extra = ["<fake_token_around_image>", "<global-img>", "<end_of_utterance>"] + [
        f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
    vocab = tokenizer_json(out, words, llava=True, extra=extra)
    image_id = json.load(open(os.path.join(out, "tokenizer.json")))["model"]["vocab"]["<image>"]
    torch.manual_seed(13)
    cfg = T.Idefics3Config(vision_config=dict(TINY), scale_factor=2, image_token_id=image_id,
                           text_config=T.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=48,
                                                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                     max_position_embeddings=256, bos_token_id=1,
                                                     eos_token_id=2).to_dict())
    model = T.Idefics3ForConditionalGeneration._from_config(cfg, attn_implementation="eager").eval()
    peaky(model, 3.0)
    keep = {f: open(os.path.join(out, f)).read() for f in ("tokenizer.json", "tokenizer_config.json")}
    save(model, out, "float32", {"image_processor_type": "Idefics3ImageProcessor", "do_convert_rgb": True,
                                 "do_image_splitting": True, "do_normalize": True, "do_pad": True, "do_rescale": True,
                                 "do_resize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
                                 "max_image_size": {"longest_edge": 32}, "resample": 1,
                                 "rescale_factor": 0.00392156862745098, "size": {"longest_edge": 64}})
    for f, text in keep.items():
        with open(os.path.join(out, f), "w") as fh:
            fh.write(text)


def main(root, only=()):
    if only:
        for name in only:
            {"small-llava": llava, "small-idefics3": idefics3}[name](root)
        return
    torch.manual_seed(7)
    vit = T.ViTModel._from_config(T.ViTConfig(**TINY), add_pooling_layer=False, attn_implementation="eager").eval()
    peaky(vit, 3.0)
    save(vit, os.path.join(root, "small-vit"), "float32",
         {"image_processor_type": "ViTImageProcessor", "do_normalize": True, "do_rescale": True, "do_resize": True,
          "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2,
          "rescale_factor": 0.00392156862745098, "size": {"height": 32, "width": 32}})
    dino = T.Dinov2WithRegistersModel._from_config(
        T.Dinov2WithRegistersConfig(**dict(TINY, image_size=48, intermediate_size=None), mlp_ratio=2,
                                    num_register_tokens=2),
        attn_implementation="eager").eval()
    peaky(dino, 3.0)
    save(dino, os.path.join(root, "small-dinov2"), "bfloat16",
         {"image_processor_type": "BitImageProcessor", "do_center_crop": True, "do_convert_rgb": True,
          "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.485, 0.456, 0.406],
          "image_std": [0.229, 0.224, 0.225], "resample": 3, "crop_size": {"height": 32, "width": 32},
          "size": {"shortest_edge": 36}})
    out = os.path.join(root, "small-siglip")
    os.makedirs(out, exist_ok=True)
    words = "a photo of the red disc blue square cat dog on grey".split()
    vocab = tokenizer_json(out, words)
    sig = T.SiglipModel._from_config(
        T.SiglipConfig(text_config=dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=64, max_position_embeddings=16),
                       vision_config=dict(TINY)), attn_implementation="eager").eval()
    peaky(sig, 3.0)
    keep = {f: open(os.path.join(out, f)).read() for f in ("tokenizer.json", "tokenizer_config.json")}
    save(sig, out, "float16", {"image_processor_type": "SiglipImageProcessor", "do_normalize": True,
                               "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
                               "image_std": [0.5, 0.5, 0.5], "resample": 3, "size": {"height": 32, "width": 32}})
    for f, text in keep.items():
        with open(os.path.join(out, f), "w") as fh:
            fh.write(text)
    y, x = np.mgrid[0:40, 0:48]
    img = np.zeros((40, 48, 3), np.uint8)
    img[...] = (70, 90, 120)
    disc = (x - 30) ** 2 + (y - 14) ** 2 < 100
    img[disc] = (220, 40, 30)
    Image.fromarray(img).save(os.path.join(root, "vision-picture.png"))
    llava(root)
    idefics3(root)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
