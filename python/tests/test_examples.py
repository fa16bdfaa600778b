"""bertviz's own examples (its README and notebooks: head_view_bert, model_view_bert, head_view_bart,
model_view_encoder_decoder, ...) with `from attnviz import head_view, model_view`, on the trained
all-MiniLM-L6-v2 (a BertModel) and on synthetic T5 and BART checkpoints at their published shapes
(2 layers, tiny vocabularies, made-up tokens). Each page's numbers are compared with the tensors,
and with what bertviz itself would have drawn from the same call."""

import json

import numpy as np
import pytest

import pagedata
from conftest import read_json

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
bertviz = pytest.importorskip("bertviz")

from attnviz import AttnvizError, head_view, model_view  # noqa: E402  (the import change under test)
from attnviz._views import _build  # noqa: E402

STEP = 0.5e-4 + 1e-7  # the page stores round(a * 1e4)


def bertviz_params(html):
    """The params bertviz embeds in its page (head_view.js / model_view.js's PYTHON_PARAMS)."""
    i = html.index("const params = ") + len("const params = ")
    return json.JSONDecoder().raw_decode(html[i:])[0]


def stack(att, layers=None):
    layers = range(len(att)) if layers is None else layers
    return np.stack([att[i][0].detach().float().numpy() for i in layers])


def check_page(page, att, layers=None):
    got = pagedata.attention(page.data)
    want = stack(att, layers)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= STEP
    return got


def test_bert_head_view_single_sentence(binary, minilm_dir, tmp_path):
    # bertviz README / head_view_bert.ipynb
    from transformers import AutoModel, AutoTokenizer, utils
    utils.logging.set_verbosity_error()
    model = AutoModel.from_pretrained(minilm_dir, output_attentions=True, attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    inputs = tokenizer.encode("The cat sat on the mat", return_tensors="pt")
    outputs = model(inputs)
    # bertviz's examples say outputs[-1]; in transformers 5 that is BertModel's (empty) cross_attentions
    with pytest.raises(ValueError, match="holds no layers"):
        head_view(outputs[-1], ["x"], html_action="return")
    attention = outputs.attentions
    tokens = tokenizer.convert_ids_to_tokens(inputs[0])
    page = head_view(attention, tokens, html_action="return", json_path=tmp_path / "a.json")
    got = check_page(page, attention)
    assert got.shape == (6, 12, 8, 8)
    j = read_json(tmp_path / "a.json")
    assert np.abs(np.array(j["attention"]) - stack(attention)).max() <= 1e-6
    md = pagedata.meta(page.data)
    assert md["tokens"] == tokens == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
    # the same call to bertviz embeds the same numbers (bertviz: full floats; the page: 4 decimals)
    ref = bertviz_params(bertviz.head_view(attention, tokens, html_action="return").data)
    assert ref["attention"][0]["left_text"] == tokens
    assert np.abs(got - np.array(ref["attention"][0]["attn"])).max() <= STEP


def test_bert_sentence_pair_head_and_model_view(binary, minilm):
    # head_view_bert.ipynb's sentence pair; model_view_bert.ipynb with include_layers
    model, tokenizer = minilm
    inputs = tokenizer("The cat sat on the mat", "The cat lay on the rug", return_tensors="pt")
    input_ids, token_type_ids = inputs["input_ids"], inputs["token_type_ids"]
    with torch.no_grad():
        attention = model(input_ids, token_type_ids=token_type_ids, output_attentions=True).attentions
    sentence_b_start = token_type_ids[0].tolist().index(1)
    tokens = tokenizer.convert_ids_to_tokens(input_ids[0].tolist())
    page = head_view(attention, tokens, sentence_b_start, layer=2, heads=[3], html_action="return")
    check_page(page, attention)
    md = pagedata.meta(page.data)
    assert md["sentence_b_start"] == sentence_b_start == 8
    assert md["init_layer"] == 2 and md["init_head"] == 3
    ref = bertviz_params(bertviz.head_view(attention, tokens, sentence_b_start, html_action="return").data)
    assert [d["name"] for d in ref["attention"]][:2] == ["All", "Sentence A -> Sentence A"]
    assert np.abs(pagedata.attention(page.data) - np.array(ref["attention"][0]["attn"])).max() <= STEP

    page = model_view(attention, tokens, sentence_b_start, display_mode="light", include_layers=[4, 5],
                      include_heads=[0, 7], html_action="return")
    got = check_page(page, attention, [4, 5])
    md = pagedata.meta(page.data)
    assert md["layers"] == [4, 5] and md["theme"] == "light" and sorted(md["init_heads"]) == [0, 7]
    ref = bertviz_params(bertviz.model_view(attention, tokens, sentence_b_start, display_mode="light",
                                            include_layers=[4, 5], include_heads=[0, 7], html_action="return").data)
    assert ref["include_layers"] == md["layers"]
    # bertviz keeps only heads 0 and 7; the page keeps all, heads 0 and 7 shown under their own indices
    assert np.abs(got[:, [0, 7]] - np.array(ref["attention"][0]["attn"])).max() <= STEP


def t5_model():
    # t5-small's shapes (d_model 512, 8 heads of 64, d_ff 2048), 2 + 2 layers, 64 tokens
    cfg = transformers.T5Config(vocab_size=64, d_model=512, d_kv=64, d_ff=2048, num_layers=2, num_decoder_layers=2,
                                num_heads=8, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    m = transformers.T5ForConditionalGeneration(cfg).eval()
    m.set_attn_implementation("eager")
    return m


def bart_model():
    # bart-base's shapes (d_model 768, 12 heads, ffn 3072), 2 + 2 layers, 64 tokens
    cfg = transformers.BartConfig(vocab_size=64, d_model=768, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=12, decoder_attention_heads=12, encoder_ffn_dim=3072,
                                  decoder_ffn_dim=3072, max_position_embeddings=64)
    torch.manual_seed(0)
    m = transformers.BartForConditionalGeneration(cfg).eval()
    m.set_attn_implementation("eager")
    return m


ENC = ["▁She", "▁sees", "▁the", "▁small", "▁elephant", ".", "</s>"]
DEC = ["<pad>", "▁Sie", "▁sieht", "▁den", "▁kleinen", "▁Elefanten", "."]


@pytest.mark.parametrize("make", [t5_model, bart_model], ids=["t5", "bart"])
def test_encoder_decoder_head_and_model_view(binary, make, tmp_path):
    # head_view_bart.ipynb / model_view_encoder_decoder.ipynb: outputs.encoder_attentions etc.
    model = make()
    enc_ids = torch.tensor([[5, 9, 14, 22, 30, 7, 2]])
    dec_ids = torch.tensor([[0, 11, 17, 25, 33, 41, 7]])
    with torch.no_grad():
        outputs = model(input_ids=enc_ids, decoder_input_ids=dec_ids, output_attentions=True)
    kw = dict(encoder_attention=outputs.encoder_attentions, decoder_attention=outputs.decoder_attentions,
              cross_attention=outputs.cross_attentions, encoder_tokens=ENC, decoder_tokens=DEC)
    # what attnviz hands the binary is the tensors (include_layers as bertviz reads it)
    arrays, meta, _ = _build("head", attention=None, tokens=None, sentence_b_start=None, prettify_tokens=True,
                             include_layers=[1], include_heads=None, causal=None, model_name=None, **kw)
    for name, src in (("encoder_attention", outputs.encoder_attentions),
                      ("decoder_attention", outputs.decoder_attentions), ("cross_attention", outputs.cross_attentions)):
        assert np.array_equal(arrays[name], stack(src, [1]))
    assert meta["layers"] == [1] and meta["encoder_tokens"] == ENC and meta["decoder_tokens"] == DEC
    # ... and the same numbers bertviz embeds for the same call
    ref = bertviz_params(bertviz.head_view(**kw, include_layers=[1], html_action="return").data)
    assert [d["name"] for d in ref["attention"]] == ["Encoder", "Decoder", "Cross"]
    for d, name in zip(ref["attention"], ("encoder_attention", "decoder_attention", "cross_attention")):
        assert np.abs(np.array(d["attn"]) - arrays[name]).max() <= 1e-7
    assert np.abs(stack(outputs.cross_attentions)).max() > 0 and stack(outputs.cross_attentions).shape[-2:] == (7, 7)
    try:
        head_view(**kw, html_action="return", json_path=tmp_path / "h.json")
        page = model_view(**kw, include_layers=[1], html_action="return", json_path=tmp_path / "m.json")
    except AttnvizError as e:
        if "not drawn yet" in str(e):
            pytest.skip(f"attnviz render does not draw encoder-decoder attention yet: {e}")
        raise
    j = read_json(tmp_path / "m.json")
    for name in arrays:
        assert name in j, f"render's JSON has no {name}"
        assert np.abs(np.array(j[name]) - arrays[name]).max() <= 1e-6
    assert pagedata.meta(page.data)["layers"] == [1]
