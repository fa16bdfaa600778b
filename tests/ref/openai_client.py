"""The official openai client against attnviz serve's /v1 routes (tools/pyopenai.sh's venv):
chat and completions, streamed and not, with logprobs and the attention extension, on the
SmolLM2 GGUF. Starts the server itself, prints PASS/FAIL lines for what the client alone can
tell (the objects parse as OpenAI's, streamed answers equal whole ones, a seed repeats a sampled
answer, a stop string ends the text), and writes what it got to OUT.json for
tests/ref/openai_ref.py, which compares it with transformers and attnviz --json.

usage: openai_client.py ATTNVIZ GGUF OUT.json [--completion-only]
(--completion-only: one short greedy completion, streamed and not, for a second model's check)
"""
import json
import os
import subprocess
import sys
import time

import openai

ATTNVIZ, GGUF, OUT = sys.argv[1:4]
ONLY_COMPLETION = sys.argv[4:] == ["--completion-only"]
SYSTEM = "You are a helpful AI assistant."
CASES = {
    "completion": {"prompt": "The capital of France is", "max_tokens": 24},
    "chat": {"messages": [{"role": "system", "content": SYSTEM},
                          {"role": "user", "content": "What is the capital of France?"}], "max_tokens": 24},
}
ATTN = {"rows": True, "prompt": True, "top_k": 8, "stats": True}
# OpenAI's messages where transformers and OpenAI differ (docs/serve-api.md, "Chat templates"; the
# reference is tests/ref/openai_chat.py): the developer role, content parts, a null content, names,
# and assistant turns with content
OPENAI_MESSAGES = [
    {"role": "developer", "content": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Answer in English."}]},
    {"role": "user", "content": "What is the capital of France?", "name": "alice"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": [{"type": "text", "text": "And of Italy?"}]},
    {"role": "assistant", "content": None},
    {"role": "user", "content": "Just the name, please."},
]
if ONLY_COMPLETION:
    CASES = {"completion": {"prompt": "The capital of France is", "max_tokens": 8}}
failures = 0


def check(name, cond, why=""):
    global failures
    print(f"{'PASS' if cond else 'FAIL'} openai client: {name}{'' if cond else ': ' + why}", flush=True)
    failures += not cond


def start():
    p = subprocess.Popen([ATTNVIZ, "serve", "--port", "0", "--model", GGUF], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    url = p.stdout.readline().strip()
    base, token = url.split("/?token=")
    return p, base, token


def extra(obj, key):
    return (getattr(obj, "model_extra", None) or {}).get(key)


def record_whole(kind, r, chat):
    c = r.choices[0]
    rec = {"text": c.message.content if chat else c.text, "finish": c.finish_reason,
           "usage": r.usage.model_dump(), "attention": extra(r, "attention")}
    if chat:
        lp = c.logprobs.content if c.logprobs else []
        rec["logprobs"] = [{"logprob": e.logprob, "bytes": e.bytes, "top": [t.logprob for t in e.top_logprobs]} for e in lp]
    elif c.logprobs:
        rec["logprobs"] = [{"logprob": v, "top": sorted(t.values(), reverse=True)}
                           for v, t in zip(c.logprobs.token_logprobs, c.logprobs.top_logprobs)]
    return rec


def record_stream(stream, chat):
    text, fin, tokens, head, seq, usage, lps, n_chunks = "", None, [], None, None, None, [], 0
    for ch in stream:
        n_chunks += 1
        a = extra(ch, "attention")
        if ch.choices:
            c = ch.choices[0]
            piece = (c.delta.content or "") if chat else c.text
            text += piece
            if c.finish_reason:
                fin = c.finish_reason
            if chat and c.logprobs and c.logprobs.content:
                lps += [{"logprob": e.logprob, "top": [t.logprob for t in e.top_logprobs]} for e in c.logprobs.content]
        if ch.usage:
            usage = ch.usage.model_dump()
        if a:
            if "sequence" in a:
                seq = a["sequence"]
            elif "position" in a:
                tokens.append(a)
            else:
                head = a
    att = dict(head or {})
    att["tokens"], att["sequence"] = tokens, seq
    return {"text": text, "finish": fin, "usage": usage, "attention": att, "logprobs": lps, "chunks": n_chunks}


def main():
    p, base, token = start()
    out = {"base": base}
    try:
        client = openai.OpenAI(base_url=base + "/v1", api_key=token, max_retries=0, timeout=600)
        models = [m.id for m in client.models.list()]
        check("models.list() names the GGUF", models == [os.path.basename(GGUF)], str(models))
        model = models[0]
        out["model"] = model
        for name, case in CASES.items():
            chat = name == "chat"
            kw = dict(model=model, temperature=0, max_tokens=case["max_tokens"], extra_body={"attention": ATTN})
            t0 = time.time()
            if chat:
                whole = client.chat.completions.create(messages=case["messages"], logprobs=True, top_logprobs=5, **kw)
                stream = client.chat.completions.create(messages=case["messages"], logprobs=True, top_logprobs=5,
                                                        stream=True, stream_options={"include_usage": True}, **kw)
            else:
                whole = client.completions.create(prompt=case["prompt"], logprobs=5, **kw)
                stream = client.completions.create(prompt=case["prompt"], stream=True,
                                                   stream_options={"include_usage": True}, **kw)
            w = record_whole(name, whole, chat)
            s = record_stream(stream, chat)
            dt = time.time() - t0
            obj = "chat.completion" if chat else "text_completion"
            check(f"{name}: a {obj} object, finish_reason {w['finish']!r}, usage {w['usage']}",
                  whole.object == obj and w["finish"] in ("stop", "length") and
                  w["usage"]["total_tokens"] == w["usage"]["prompt_tokens"] + w["usage"]["completion_tokens"])
            check(f"{name}: streamed ({s['chunks']} chunks) equals the whole answer: text, finish, usage",
                  s["text"] == w["text"] and s["finish"] == w["finish"] and s["usage"] == w["usage"],
                  f"{s['text']!r} vs {w['text']!r}, {s['finish']} vs {w['finish']}, {s['usage']} vs {w['usage']}")
            wa, sa = w["attention"] or {}, s["attention"]
            same_rows = [t["rows"] for t in wa.get("tokens", [])] == [t["rows"] for t in sa["tokens"]] and \
                wa.get("sequence") == sa["sequence"] and wa.get("prompt") == sa.get("prompt")
            check(f"{name}: streamed attention equals the whole answer's ({len(sa['tokens'])} tokens, "
                  f"{len(sa.get('prompt') or [])} prompt rows)", same_rows and len(sa["tokens"]) == w["usage"]["completion_tokens"])
            if chat:
                check(f"{name}: streamed logprobs equal the whole answer's",
                      [e["logprob"] for e in s["logprobs"]] == [e["logprob"] for e in w["logprobs"]])
            out[name] = {"case": case, "whole": w, "stream": s, "seconds": dt}
        if not ONLY_COMPLETION:
            extras(client, model, base, out)
    finally:
        p.terminate()
        p.wait(timeout=30)
    json.dump(out, open(OUT, "w"))
    return 1 if failures else 0


def extras(client, model, base, out):
    """What SmolLM2's check adds: OpenAI's messages, a seed, a stop string, refusals."""
    # OpenAI's messages: the prompt's ids (from the attention's sequence) are compared by openai_ref.py
    r = client.chat.completions.create(model=model, messages=OPENAI_MESSAGES, temperature=0, max_tokens=8,
                                       extra_body={"attention": {"layers": [0], "heads": [0], "top_k": 1,
                                                                 "stats": False}})
    seq = (extra(r, "attention") or {}).get("sequence")
    check(f"chat with developer, parts, names and a null content: answered ({r.choices[0].message.content!r})",
          seq is not None and r.choices[0].finish_reason in ("stop", "length"))
    out["chat_openai"] = {"messages": OPENAI_MESSAGES, "max_tokens": 8, "sequence": seq}
    # sampled: a seed repeats, streamed or not
    kw = dict(model=model, prompt="Once upon a time", max_tokens=16, temperature=0.8, top_p=0.9, seed=7)
    a = client.completions.create(**kw).choices[0].text
    b = client.completions.create(**kw).choices[0].text
    c = "".join(ch.choices[0].text for ch in client.completions.create(stream=True, **kw) if ch.choices)
    check(f"sampled (temperature 0.8, top_p 0.9, seed 7) twice and streamed: the same text {a!r}", a == b == c,
          f"{a!r} / {b!r} / {c!r}")
    out["sampled"] = {"kw": kw, "text": a}
    # stop: the greedy completion cut before its first "."
    full = out["completion"]["whole"]["text"]
    if "." in full:
        r = client.completions.create(model=model, prompt=CASES["completion"]["prompt"], max_tokens=24,
                                      temperature=0, stop=["."])
        check(f"stop ['.']: the text ends before it ({r.choices[0].text!r}), finish_reason stop",
              r.choices[0].text == full[:full.index(".")] and r.choices[0].finish_reason == "stop")
    # refusals come back as the client's exceptions, with OpenAI's body
    try:
        client.chat.completions.create(model=model, messages=CASES["chat"]["messages"], n=2)
        check("n=2 raises BadRequestError", False, "no exception")
    except openai.BadRequestError as e:
        check("n=2 raises BadRequestError with param n", e.status_code == 400 and (e.body or {}).get("param") == "n",
              str(e.body))
    try:
        client.completions.create(model="no-such-model", prompt="x")
        check("an unknown model raises NotFoundError", False, "no exception")
    except openai.NotFoundError as e:
        check("an unknown model raises NotFoundError (model_not_found)", (e.body or {}).get("code") == "model_not_found",
              str(e.body))
    try:
        openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0).models.list()
        check("a wrong API key raises AuthenticationError", False, "no exception")
    except openai.AuthenticationError as e:
        check("a wrong API key raises AuthenticationError", e.status_code == 401, str(e))


if __name__ == "__main__":
    sys.exit(main())
