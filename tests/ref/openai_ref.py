"""What the official openai client got from attnviz serve (tests/ref/openai_client.py's OUT.json)
against independent references, on the same SmolLM2 GGUF:
  - the prompt's ids: transformers' tokenizer of the prompt, and for chat its apply_chat_template
    (add_generation_prompt=True) of the same messages; for OpenAI's messages where it and OpenAI
    differ (developer, content parts, null content), as tests/ref/openai_chat.py means them;
  - greedy token ids identical to transformers' generate() (do_sample=False) from those ids;
  - every logprob and top_logprobs value within 1e-4 of transformers' log_softmax of that step's
    logits (the model's own distribution);
  - every streamed attention row (every layer and head, the prompt's and each generated token's)
    within 1e-5 of the same row of a teacher-forced `attnviz --json` over the final sequence.

usage: openai_ref.py ATTNVIZ GGUF CLIENT.json WORKDIR [LABEL]
(LABEL names a second model's lines: its client ran --completion-only)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from predict_check import load_hf  # noqa: E402
import openai_chat  # noqa: E402

LP_TOL, ROW_TOL = 1e-4, 1e-5
failures = 0


LABEL = sys.argv[5] if len(sys.argv) > 5 else ""


def check(name, cond, why=""):
    global failures
    print(f"{'PASS' if cond else 'FAIL'} openai_ref: {LABEL + ' ' if LABEL else ''}{name}{'' if cond else ': ' + why}",
          flush=True)
    failures += not cond


def teacher_forced(attnviz, gguf, text, tmp):
    out = os.path.join(tmp, "tf.json")
    r = subprocess.run([attnviz, "--model", gguf, "--json", out, "--precision", "9", "--quiet", text],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return json.load(open(out)), None


def main():
    attnviz, gguf, client_json, workdir = sys.argv[1:5]
    got = json.load(open(client_json))
    torch.set_num_threads(2)
    tok, model = load_hf(*os.path.split(os.path.abspath(gguf)), workdir=workdir)
    eos = {model.generation_config.eos_token_id, model.config.eos_token_id} - {None}
    # OpenAI's messages: the prompt as openai_chat.py renders them, then greedy ids as generate()'s
    oc = got.get("chat_openai")
    if LABEL:
        pass
    elif not oc or not oc.get("sequence"):
        check("chat with OpenAI's messages: the client recorded the sequence", False, str(oc))
    else:
        seq, P = oc["sequence"]["ids"], oc["sequence"]["n_prompt"]
        ref = openai_chat.render(tok, oc["messages"], tokenize=True)
        ref = list(ref["input_ids"] if hasattr(ref, "keys") else ref)
        check(f"chat with developer, parts, names, a null content: the prompt's {P} ids are apply_chat_template's of "
              f"what the messages mean (developer as system, parts joined, null as \"\" for SmolLM2's template)",
              seq[:P] == ref, f"attnviz {seq[:P]}, reference {ref}")
        with torch.no_grad():
            hf = model.generate(torch.tensor([ref]), attention_mask=torch.ones(1, len(ref), dtype=torch.long),
                                do_sample=False, max_new_tokens=oc["max_tokens"], pad_token_id=min(eos))
        hf_gen = hf[0, len(ref):].tolist()
        check(f"chat with OpenAI's messages: greedy ids identical to transformers' generate() ({len(hf_gen)} tokens)",
              seq[P:] == hf_gen, f"attnviz {seq[P:]}, transformers {hf_gen}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in [n for n in ("completion", "chat") if n in got or not LABEL]:
            rec = got[name]
            case, w = rec["case"], rec["whole"]
            seq = w["attention"]["sequence"]
            ids, P = seq["ids"], seq["n_prompt"]
            if name == "chat":
                ref_prompt = tok.apply_chat_template(case["messages"], add_generation_prompt=True, tokenize=True)
                if isinstance(ref_prompt, dict) or hasattr(ref_prompt, "input_ids"):
                    ref_prompt = list(ref_prompt["input_ids"])
            else:
                ref_prompt = tok(case["prompt"])["input_ids"]
            check(f"{name}: the prompt's {P} ids are transformers' "
                  f"({'apply_chat_template' if name == 'chat' else 'tokenizer'})", ids[:P] == list(ref_prompt),
                  f"attnviz {ids[:P]}, transformers {list(ref_prompt)}")
            with torch.no_grad():
                hf = model.generate(torch.tensor([ids[:P]]), attention_mask=torch.ones(1, P, dtype=torch.long),
                                    do_sample=False, max_new_tokens=case["max_tokens"], output_logits=True,
                                    return_dict_in_generate=True, pad_token_id=min(eos))
            hf_gen = hf.sequences[0, P:].tolist()
            check(f"{name}: greedy ids identical to transformers' generate() ({len(hf_gen)} tokens)",
                  ids[P:] == hf_gen, f"attnviz {ids[P:]}, transformers {hf_gen}")
            # logprobs: the chosen token's and the top ones', each step
            worst, n_lp = 0.0, 0
            for s, e in enumerate(w.get("logprobs") or []):
                if s >= len(hf.logits):
                    break
                ref = torch.log_softmax(hf.logits[s][0].double(), -1)
                tid = ids[P + s]
                d = abs(e["logprob"] - float(ref[tid]))
                top = sorted(ref.topk(len(e["top"])).values.tolist(), reverse=True)
                d = max([d] + [abs(a - b) for a, b in zip(sorted(e["top"], reverse=True), top)])
                worst, n_lp = max(worst, d), n_lp + 1 + len(e["top"])
            check(f"{name}: {n_lp} logprobs (chosen and top) within {LP_TOL:g} of transformers' log_softmax: "
                  f"max |diff| {worst:.2e}", n_lp > 0 and worst <= LP_TOL)
            # attention rows against one teacher-forced pass over the final sequence
            # the text of the ids, less a start token that the tokenizer adds again (Gemma's <bos>)
            bos = tok.bos_token_id if tok("x")["input_ids"][:1] == [tok.bos_token_id] else None
            text = tok.decode(ids[1:] if bos is not None and ids[:1] == [bos] else ids, skip_special_tokens=False,
                              clean_up_tokenization_spaces=False)
            tf, err = teacher_forced(attnviz, gguf, text, tmp)
            if tf is None:
                check(f"{name}: attnviz --json over the final sequence", False, err)
                continue
            if tf["input_ids"] != ids:
                check(f"{name}: the final sequence's text tokenizes to its ids", False,
                      f"--json {tf['input_ids']}, streamed {ids}")
                continue
            A = np.asarray(tf["attention"], dtype=np.float64)  # (L, H, n, n)
            streamed = rec["stream"]["attention"]
            layers, heads = streamed["layers"], streamed["heads"]
            worst, n_rows = 0.0, 0
            for t in (streamed.get("prompt") or []) + streamed["tokens"]:
                p = t["position"]
                rows = np.asarray(t["rows"], dtype=np.float64)  # (layers, heads, p + 1)
                ref = A[np.ix_(layers, heads)][:, :, p, :p + 1]
                worst, n_rows = max(worst, float(np.abs(rows - ref).max())), n_rows + rows.shape[0] * rows.shape[1]
                # the statistics and top keys of the same row
                k0 = np.asarray(t["weights"])[:, :, 0]
                worst = max(worst, float(np.abs(k0 - ref.max(-1)).max()), float(np.abs(np.asarray(t["sink"]) - ref[:, :, 0]).max()))
            check(f"{name}: {n_rows} streamed attention rows ({len(layers)} layers x {len(heads)} heads, prompt and "
                  f"generated) within {ROW_TOL:g} of attnviz --json over the final {len(ids)} tokens: max |diff| {worst:.2e}",
                  n_rows > 0 and worst <= ROW_TOL)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
