"""Load on attnviz serve's /v1 routes (python3's standard library only): CLIENTS threads share TOTAL
requests, a mix of whole and streamed completions (some with attention), refused bodies, and
streams the client leaves after their first event. Checks every answer (status, OpenAI's shapes,
the server-sent events ending in [DONE]) and that the server's resident memory is flat: its RSS
after the first fifth of the requests against the end (at most 16 MB more).

usage: openai_load.py ATTNVIZ MODEL MODEL_ID CLIENTS TOTAL
One PASS/FAIL line per check; exit 1 on a failure.
"""
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

ATTNVIZ, MODEL, MID, CLIENTS, TOTAL = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
failures = 0


def check(name, cond, why=""):
    global failures
    print(f"{'PASS' if cond else 'FAIL'} openai_load: {name}{'' if cond else ': ' + why}", flush=True)
    failures += not cond


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))


def main():
    p = subprocess.Popen([ATTNVIZ, "serve", "--port", "0", "--model", MODEL, "--queue", str(4 * CLIENTS)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = p.stdout.readline().strip()
    base, token = url.split("/?token=")
    host, port = base[len("http://"):].rsplit(":", 1)
    port = int(port)
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    counts, problems, lock = {}, [], threading.Lock()
    done = [0]
    marks = {}

    def one(kind, rng):
        body = {"model": MID, "prompt": rng.choice(["the cat", "a dog sat on", "once upon a time"]),
                "max_tokens": rng.randint(1, 4), "temperature": rng.choice([0, 0.8]), "seed": rng.randint(0, 99)}
        if kind == "attention":
            body["attention"] = {"top_k": 2, "rows": rng.random() < 0.5}
        if kind in ("stream", "leave"):
            body["stream"] = True
        if kind == "refused":
            body["n"] = 2
        c = http.client.HTTPConnection(host, port, timeout=120)
        c.request("POST", "/v1/completions", json.dumps(body), headers)
        r = c.getresponse()
        if kind == "leave":  # read the first event, then hang up mid-stream
            r.fp.readline()
            c.sock.shutdown(socket.SHUT_RDWR)
            c.close()
            return r.status, None
        data = r.read()
        c.close()
        if kind == "refused":
            ok = r.status == 400 and json.loads(data)["error"]["param"] == "n"
        elif kind == "stream":
            ok = r.status == 200 and data.endswith(b"data: [DONE]\n\n") and all(
                e.startswith(b"data: ") for e in data.split(b"\n\n")[:-1])
        else:
            j = json.loads(data)
            ok = r.status == 200 and j["object"] == "text_completion" and \
                (kind != "attention" or len(j["attention"]["tokens"]) == j["usage"]["completion_tokens"])
        return r.status, ok

    def worker(seed, n):
        rng = random.Random(seed)
        for _ in range(n):
            kind = rng.choice(["whole", "whole", "stream", "stream", "attention", "refused", "leave"])
            try:
                status, ok = one(kind, rng)
            except Exception as e:  # noqa: BLE001 - counted as a problem
                status, ok = type(e).__name__, False
            with lock:
                counts[(kind, status)] = counts.get((kind, status), 0) + 1
                if ok is False:
                    problems.append((kind, status))
                done[0] += 1
                if done[0] == TOTAL // 5:
                    marks["warm"] = rss_kb(p.pid)

    t0 = time.time()
    per = [TOTAL // CLIENTS + (i < TOTAL % CLIENTS) for i in range(CLIENTS)]
    threads = [threading.Thread(target=worker, args=(i, n)) for i, n in enumerate(per)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.time() - t0
    # the server settles: a last plain request after every stream left has been noticed
    time.sleep(0.5)
    one("whole", random.Random(0))
    end = rss_kb(p.pid)
    warm = marks.get("warm", end)
    summary = ", ".join(f"{k} {s}: {n}" for (k, s), n in sorted(counts.items(), key=str))
    check(f"{TOTAL} requests from {CLIENTS} clients in {dt:.1f} s, every answer as expected ({summary})",
          not problems and sum(counts.values()) == TOTAL, str(problems[:5]))
    check(f"RSS flat: {warm / 1024:.0f} MB after {TOTAL // 5} requests, {end / 1024:.0f} MB after {TOTAL}",
          end - warm < 16 * 1024, f"{(end - warm) / 1024:.0f} MB more")
    check("the server is up", p.poll() is None)
    p.terminate()
    p.wait(timeout=60)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
