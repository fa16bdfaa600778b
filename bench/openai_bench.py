"""attnviz serve's OpenAI-compatible generation against llama.cpp's llama-server, same GGUF, same
threads, same client (python3's standard library, streamed /v1/completions, greedy), in one run:

  - tokens per second of plain generation (no attention asked) after prompts of 128 and 1,024
    tokens (the decode rate: from the first generated token to the last);
  - the same with attention asked for every layer and head (top-k 8 and the statistics), as a ratio
    to the plain request's time per token (issue 48's goal: at most 1.3x);
  - time to first token for a 1,000-token prompt;
  - tests/e2e/openai_load.py's load: 16 clients, 1,000 mixed requests, RSS flat.

llama-server is $LLAMA_SERVER or `llama-server` on PATH (llama.cpp built beside the repository as
bench/README.md describes; nothing of it is committed); without it its column says so. Prompts are
token ids (the first N of tests/data/corpus/sentences.txt as attnviz tokenizes it), so both servers
read the same tokens. Rounds: BENCH_ROUNDS (default 2), each side's best kept, the two servers
alternated. Writes the table to stdout and bench/out/openai_results.md.

usage: bench/openai_bench.py [GGUF]   (default: tools/pymodel.sh smollm2)
"""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ATTNVIZ = os.path.join(ROOT, "attnviz")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
NEW = 64


def gguf_path():
    if len(sys.argv) > 1:
        return sys.argv[1]
    d = subprocess.run([os.path.join(ROOT, "tools", "pymodel.sh"), "smollm2"], capture_output=True, text=True).stdout.strip()
    return os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")


def corpus_ids(gguf, n):
    text = " ".join(l.strip() for l in open(os.path.join(ROOT, "tests/data/corpus/sentences.txt"), encoding="utf-8") if l.strip())
    out = subprocess.run([ATTNVIZ, "--model", gguf, "--quiet", "--tokens-only", "--max-tokens", str(n), "--json", "-", text],
                         capture_output=True, text=True, check=True).stdout
    ids = json.loads(out)["input_ids"][:n]
    assert len(ids) == n, f"the corpus gives {len(ids)} tokens, not {n}"
    return ids


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, kind, gguf):
        self.kind = kind
        if kind == "attnviz":
            self.p = subprocess.Popen([ATTNVIZ, "serve", "--port", "0", "--model", gguf], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True)
            url = self.p.stdout.readline().strip()
            base, token = url.split("/?token=")
            self.host, self.port = base[len("http://"):].rsplit(":", 1)
            self.port = int(self.port)
            self.headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
            self.model = os.path.basename(gguf)
        else:
            exe = os.environ.get("LLAMA_SERVER") or shutil.which("llama-server")
            self.port = free_port()
            self.host = "127.0.0.1"
            self.p = subprocess.Popen([exe, "-m", gguf, "-t", "2", "-c", "4096", "--host", self.host, "--port", str(self.port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.headers = {"Content-Type": "application/json"}
            self.model = "model"
            for _ in range(600):
                try:
                    c = http.client.HTTPConnection(self.host, self.port, timeout=5)
                    c.request("GET", "/health")
                    if c.getresponse().status == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.1)
        self.port = int(self.port)

    def stream(self, ids, n_new, attention=None):
        """(seconds to the first token, seconds per token after it, tokens generated)"""
        body = {"model": self.model, "prompt": ids, "max_tokens": n_new, "temperature": 0, "stream": True}
        if self.kind == "llama":
            # its prompt cache would answer the 1,000-token prompt from the 1,024 one's prefix: every
            # prompt is processed, as attnviz's are
            body["ignore_eos"] = True
            body["cache_prompt"] = False
        if attention:
            body["attention"] = attention
        c = http.client.HTTPConnection(self.host, self.port, timeout=600)
        t0 = time.perf_counter()
        c.request("POST", "/v1/completions", json.dumps(body), self.headers)
        r = c.getresponse()
        assert r.status == 200, r.read()[:300]
        first = last = None
        n = 0
        for line in r:
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            j = json.loads(line[6:])
            ch = j.get("choices") or []
            # a token's chunk: attnviz's carry its text (maybe empty while a character waits) and,
            # with attention, its position; llama-server's its text
            if ch and ch[0].get("finish_reason") is None and ("position" in (j.get("attention") or {}) or ch[0].get("text")):
                now = time.perf_counter()
                if first is None:
                    first = now
                last = now
                n += 1
        c.close()
        per = (last - first) / (n - 1) if n > 1 else float("nan")
        return first - t0, per, n

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=60)


def main():
    gguf = gguf_path()
    if not os.path.isfile(gguf):
        print("bench: no SmolLM2 GGUF (tools/pymodel.sh smollm2)", file=sys.stderr)
        return 1
    have_llama = bool(os.environ.get("LLAMA_SERVER") or shutil.which("llama-server"))
    load_start = os.getloadavg()[0]
    ids = {n: corpus_ids(gguf, n) for n in (128, 1000, 1024)}
    full = {"top_k": 8, "stats": True}
    best = {}

    def keep(key, v):
        best[key] = v if key not in best else min(best[key], v, key=lambda x: x[0] if key[1] == "ttft" else x[1])

    for _ in range(ROUNDS):
        for kind in ("attnviz", "llama") if have_llama else ("attnviz",):
            s = Server(kind, gguf)
            try:
                s.stream(ids[128], 4)  # warm: weights read, buffers grown
                for n in (128, 1024):
                    keep((kind, "plain", n), s.stream(ids[n], NEW))
                    if kind == "attnviz":
                        keep((kind, "attn", n), s.stream(ids[n], NEW, full))
                keep((kind, "ttft", 1000), s.stream(ids[1000], 1))
            finally:
                s.stop()
    rows = ["| measurement | attnviz | llama-server | attnviz vs it |", "|---|---|---|---|"]

    def tps(v):
        return 1.0 / v[1]

    for n in (128, 1024):
        a = best[("attnviz", "plain", n)]
        l = best.get(("llama", "plain", n))
        rows.append(f"| plain generation after {n} tokens ({NEW} new, best of {ROUNDS}) | {tps(a):.1f} tokens/s | "
                    f"{f'{tps(l):.1f} tokens/s' if l else 'not available (no llama-server: set LLAMA_SERVER)'} | "
                    f"{f'**{tps(a) / tps(l):.2f}x** its speed' if l else ''} |")
    for n in (128, 1024):
        a, b = best[("attnviz", "plain", n)], best[("attnviz", "attn", n)]
        rows.append(f"| attention on (every layer and head, top-k 8, statistics) after {n} tokens | {tps(b):.1f} tokens/s | | "
                    f"**{b[1] / a[1]:.2f}x** the plain request's time a token (goal <= 1.3x) |")
    a, l = best[("attnviz", "ttft", 1000)], best.get(("llama", "ttft", 1000))
    rows.append(f"| time to first token, 1,000-token prompt | {a[0] * 1000:.0f} ms | "
                f"{f'{l[0] * 1000:.0f} ms' if l else 'not available'} | {f'**{a[0] / l[0]:.2f}x**' if l else ''} |")
    load = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "e2e", "openai_load.py"), ATTNVIZ,
                           os.path.join(ROOT, "tests/data/small-llama"), "small-llama", "16", "1000"],
                          capture_output=True, text=True)
    for line in load.stdout.splitlines():
        if line.startswith(("PASS", "FAIL")):
            rows.append(f"| load (tests/e2e/openai_load.py, tiny Llama) | {line.split(': ', 1)[1]} | | {line.split()[0]} |")
    rows.append(f"\n{len(os.sched_getaffinity(0))} cores; load average {load_start:.1f} when the run began, {os.getloadavg()[0]:.1f} at "
                f"its end (above the core count, the figures are the machine's, not the servers')")
    table = "\n".join(rows)
    print(table)
    os.makedirs(os.path.join(ROOT, "bench", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "out", "openai_results.md"), "w") as f:
        f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
