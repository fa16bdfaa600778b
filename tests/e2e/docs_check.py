#!/usr/bin/env python3
"""docs_check.py: what tests/e2e/docs_test.sh reads from the documentation (README.md, docs/*.md).

    docs_check.py links              every relative link and #anchor resolves (PASS/FAIL lines)
    docs_check.py blocks OUTDIR      the fenced blocks, checked against the conventions below
                                     (PASS/FAIL lines); the shell blocks to run are written to
                                     OUTDIR/NNN.sh, listed in OUTDIR/index as "NNN<TAB>FILE:LINE"

Run from the repository's root. The conventions (docs/testing.md, "The docs test"):
- ```sh is a command block: it runs as written, from the repository's root after `make`, and the
  docs test runs every one of them. ```bash, ```console, ```shell and ```zsh are not used (one
  language for commands), nor is a "$ " prompt inside a sh block: what a command prints goes in a
  plain ``` or ```text block.
- A block that cannot run inside a test (a fresh machine's install, `make test` itself, a Slurm
  submission) is preceded by `<!-- covered-by: tests/SCRIPT ... -->`, naming the script that
  covers it: tests/run_all.sh or a script in its list; when the marker says the script "runs", "compiles" or "reads"
  the block, one of the files the marker names must read this document.
"""
import os
import re
import sys

# whose shell blocks run; the links of these and of the other READMEs are checked
DOCS_GLOBS = ["README.md", "docs"]
LINK_GLOBS = DOCS_GLOBS + ["python/README.md", "bench/README.md", "weights/README.md"]
RUN_LANGS = {"sh"}
REFUSED_LANGS = {"bash", "console", "shell", "zsh", "shell-session", "shellsession"}
FENCE = re.compile(r"^( *)(```+|~~~+)\s*([^\s`]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*covered-by:\s*(.*?)\s*-->\s*$")


def doc_files(globs=DOCS_GLOBS):
    out = []
    for g in globs:
        if os.path.isdir(g):
            out += sorted(os.path.join(g, f) for f in os.listdir(g) if f.endswith(".md"))
        elif os.path.isfile(g):
            out.append(g)
    return out


def parse(path):
    """(blocks, prose): blocks as dicts (lang, line, code, before), prose as (line, text) outside fences."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, prose = [], []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3).lower()
        start = i
        body = []
        i += 1
        while i < len(lines):
            c = FENCE.match(lines[i])
            if c and c.group(2).startswith(fence[0]) and len(c.group(2)) >= len(fence) and not c.group(3):
                break
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i >= len(lines):
            blocks.append({"lang": lang, "line": start + 1, "code": "", "before": None, "unclosed": True})
            break
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        before = lines[j] if j >= 0 else ""
        blocks.append({"lang": lang, "line": start + 1, "code": "\n".join(body) + "\n", "before": before})
        i += 1
    return blocks, prose


def slug(text):
    """GitHub's anchor for a heading: lower case, formatting and punctuation gone, spaces to hyphens."""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text.strip())
    t = re.sub(r"<[^>]+>", "", t).lower()
    t = "".join(ch for ch in t if ch.isalnum() or ch in "-_ ")
    return t.replace(" ", "-")


def anchors(path, cache={}):
    if path in cache:
        return cache[path]
    _, prose = parse(path)
    seen, out = {}, set()
    for _, text in prose:
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", text)
        if m:
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
        for a in re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text):
            out.add(a)
    cache[path] = out
    return out


def strip_code_spans(text):
    return re.sub(r"(`+)(.+?)\1", "", text)


LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SRC = re.compile(r"<(?:img|a)\s[^>]*?(?:src|href)=\"([^\"]+)\"")
REFDEF = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)")


def check_links():
    bad = 0
    n = 0
    for path in doc_files(LINK_GLOBS):
        _, prose = parse(path)
        base = os.path.dirname(path)
        for line, text in prose:
            t = strip_code_spans(text)
            targets = LINK.findall(t) + SRC.findall(t) + REFDEF.findall(t)
            for target in targets:
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                    continue
                n += 1
                file, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(base, file)) if file else path
                why = None
                if not os.path.exists(dest):
                    why = f"{dest} does not exist"
                elif frag and dest.endswith(".md") and frag not in anchors(dest):
                    why = f"{dest} has no heading or anchor '#{frag}'"
                if why:
                    print(f"FAIL docs_link {path}:{line}: {target}: {why}")
                    bad += 1
    if bad == 0:
        print(f"PASS docs_links_resolve ({n} relative links and anchors in {len(doc_files(LINK_GLOBS))} files)")
    return bad


def run_all_scripts():
    text = open("tests/run_all.sh", encoding="utf-8").read()
    m = re.search(r"^scripts=\($(.*?)^\)", text, re.S | re.M)
    if not m:
        return set()
    return {l.strip() for l in m.group(1).split("\n") if l.strip() and not l.strip().startswith("#")}


def check_marker(path, block, listed):
    """None when the covered-by marker before block is sound, else why not."""
    m = MARKER.match(block["before"] or "")
    words = m.group(1)
    named = [w.strip("(),;:`") for w in words.split()]
    named = [w for w in named if "/" in w and os.path.isfile(w)]
    if not named:
        return f"the marker names no file of the repository: {words!r}"
    script = named[0]
    if script != "tests/run_all.sh" and script not in listed:
        return f"{script} is neither tests/run_all.sh nor in its list of scripts"
    if not os.access(script, os.X_OK):
        return f"{script} is not executable"
    if re.search(r"\b(runs|compiles|reads)\b", words):
        if not any(path in open(f, encoding="utf-8", errors="replace").read() for f in named):
            return f"the marker says a script reads this block, but none of {', '.join(named)} names {path}"
    return None


def check_blocks(outdir):
    os.makedirs(outdir, exist_ok=True)
    listed = run_all_scripts()
    bad = 0
    k = 0
    covered = 0
    index = []
    for path in doc_files():
        blocks, _ = parse(path)
        for b in blocks:
            where = f"{path}:{b['line']}"
            if b.get("unclosed"):
                print(f"FAIL docs_block {where}: a fence that is never closed")
                bad += 1
                continue
            marked = bool(MARKER.match(b["before"] or ""))
            if marked:
                why = check_marker(path, b, listed)
                if why:
                    print(f"FAIL docs_covered_by {where}: {why}")
                    bad += 1
            if b["lang"] in REFUSED_LANGS:
                print(f"FAIL docs_block {where}: ```{b['lang']}: command blocks are ```sh (output: ``` or ```text)")
                bad += 1
                continue
            if b["lang"] not in RUN_LANGS:
                continue
            prompts = [l for l in b["code"].split("\n") if l.startswith("$ ")]
            if prompts:
                print(f"FAIL docs_block {where}: a '$ ' prompt in a sh block ({prompts[0]!r}): "
                      "the command alone, its output in a text block")
                bad += 1
                continue
            if marked:
                covered += 1
                continue
            k += 1
            name = f"{k:03d}"
            with open(os.path.join(outdir, name + ".sh"), "w", encoding="utf-8") as f:
                f.write(b["code"])
            index.append(f"{name}\t{where}")
    with open(os.path.join(outdir, "index"), "w", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in index))
    with open(os.path.join(outdir, "covered"), "w", encoding="utf-8") as f:
        f.write(f"{covered}\n")
    if bad == 0:
        print(f"PASS docs_blocks_follow_the_conventions ({k} sh blocks to run, {covered} covered by other tests)")
    return bad


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "links":
        sys.exit(1 if check_links() else 0)
    if len(sys.argv) >= 3 and sys.argv[1] == "blocks":
        sys.exit(1 if check_blocks(sys.argv[2]) else 0)
    print(__doc__, file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
