"""What attnviz serve's /v1/chat/completions means by OpenAI's messages, written with transformers
(docs/serve-api.md, "Chat templates"): the reference that tests/ref/chat_check.py and
tests/ref/openai_ref.py compare attnviz's rendering with.

The messages are rendered as transformers' apply_chat_template(messages, add_generation_prompt=True)
renders them (a null value's key dropped, content parts and "name" handed to the template), except
where the template would show the model something other than what the messages say:
  - content parts reach the template as a list only when it reads lists: one user message whose
    content is one text part renders as the same message with that text as its content; otherwise
    a message's text parts joined by "\\n" are its content (vLLM's and llama.cpp's servers do this);
  - "developer" stays a role only for a template that names it ('developer' or "developer" in its
    source, as gpt-oss's harmony template does); otherwise it is "system" (OpenAI: developer
    messages replace system messages; llama.cpp's server maps it the same way);
  - a message whose content is null is rendered without the key; where the template then fails
    (it reads the content: SmolLM2's concatenates it), such messages are rendered with "".
"""

PROBE = "Which is the tallest mountain?"


def template_source(tok):
    return tok.get_chat_template()


def reads_parts(tok):
    """Whether the template reads text parts (the probe above; chat.c's probe_parts)."""
    def render(content):
        return tok.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                       tokenize=False)
    try:
        as_parts = render([{"type": "text", "text": PROBE}])
    except Exception:
        return False
    if PROBE not in as_parts:
        return False
    try:
        return as_parts == render(PROBE) or as_parts == render(PROBE)  # a clock may turn between the two
    except Exception:
        return False


def names_role(tok, role):
    src = template_source(tok)
    return f"'{role}'" in src or f'"{role}"' in src


def as_openai_means(tok, messages):
    """The messages handed to apply_chat_template as the route hands them (the first two rules)."""
    parts, developer = reads_parts(tok), names_role(tok, "developer")
    out = []
    for m in messages:
        m = dict(m)
        if m["role"] == "developer" and not developer:
            m["role"] = "system"
        if isinstance(m.get("content"), list) and not parts:
            m["content"] = "\n".join(p["text"] for p in m["content"])
        out.append(m)
    return out


def render(tok, messages, add_generation_prompt=True, tokenize=False):
    """The text (or ids) the route gives these OpenAI messages; raises what the template raises."""
    msgs = as_openai_means(tok, messages)
    none = lambda m: m.get("content") is None  # noqa: E731 (null, or no content at all)
    try:
        return tok.apply_chat_template(msgs, add_generation_prompt=add_generation_prompt, tokenize=tokenize)
    except Exception:
        if not any(none(m) for m in msgs):
            raise
    msgs = [dict(m, content="") if none(m) else m for m in msgs]
    return tok.apply_chat_template(msgs, add_generation_prompt=add_generation_prompt, tokenize=tokenize)
