"""Load on attnviz serve's /v1 routes (python3's standard library only): CLIENTS threads share TOTAL
requests, a mix of whole and streamed completions (some with attention), refused bodies, and
streams the client leaves after their first event. Checks every answer (status, OpenAI's shapes,
the server-sent events ending in [DONE]) and that the server's resident memory is flat: its RSS
after the first fifth of the requests against the end (at most 16 MB more).

usage: openai_load.py ATTNVIZ MODEL MODEL_ID CLIENTS TOTAL
       openai_load.py ATTNVIZ MODEL MODEL_ID --slow-streams N
One PASS/FAIL line per check; exit 1 on a failure.

--slow-streams: N streams at once (one generating, the others waiting for the model, half of those
with a 4 kB receive buffer they do not read) and a whole completion waiting too, while the page's and
the API's requests that need no model are made, each timed: they must all be answered while the
first stream is still generating (libmicrohttpd's one epoll thread is held by none of the waits),
and the server's threads counted. Then every client leaves and a one-token request is answered.
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

ATTNVIZ, MODEL, MID = sys.argv[1:4]
SLOW = int(sys.argv[5]) if sys.argv[4] == "--slow-streams" else 0
CLIENTS, TOTAL = (0, 0) if SLOW else (int(sys.argv[4]), int(sys.argv[5]))
failures = 0


def check(name, cond, why=""):
    global failures
    print(f"{'PASS' if cond else 'FAIL'} openai_load: {name}{'' if cond else ': ' + why}", flush=True)
    failures += not cond


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("Threads"))


def slow_streams():
    p = subprocess.Popen([ATTNVIZ, "serve", "--port", "0", "--model", MODEL], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    url = p.stdout.readline().strip()
    base, token = url.split("/?token=")
    host, port = base[len("http://"):].rsplit(":", 1)
    port = int(port)
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    idle_threads = threads_of(p.pid)
    # a run to read while the model is busy
    c = http.client.HTTPConnection(host, port, timeout=60)
    c.request("POST", "/api/run", json.dumps({"text": "The cat sat on the mat."}), headers)
    run = json.loads(c.getresponse().read())["run"]

    def open_stream(slow, n=400):
        s = socket.create_connection((host, port), timeout=60)
        if slow:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        body = json.dumps({"model": MID, "prompt": "Once upon a time", "max_tokens": n, "temperature": 0,
                           "stream": True, "attention": {"layers": [0], "top_k": 8, "rows": slow}}).encode()
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        return s

    # the order is what is checked, not a time: the first stream's 4,000 tokens outlast the requests below on
    # any machine the server answers them on at once, and a server that held them behind it would answer
    # them only after its [DONE]
    first = open_stream(False, 4000)
    got = b""
    while got.count(b"\ndata: ") < 3:  # the headers, then events: it is generating
        got += first.recv(65536)
    waiting = [open_stream(i % 2 == 1) for i in range(SLOW - 1)]
    whole = socket.create_connection((host, port), timeout=60)
    body = json.dumps({"model": MID, "prompt": "Once upon a time", "max_tokens": 400, "temperature": 0}).encode()
    whole.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    time.sleep(1.0)  # every request read, its stream's reader called
    busy_threads = threads_of(p.pid)
    asks = [("GET", "/v1/models"), ("GET", "/api/models"), ("GET", "/"), ("GET", f"/api/thumbs?run={run}"),
            ("GET", f"/api/attention?run={run}&layer=0&heads=0")] * 3
    worst, statuses = 0.0, []
    for method, path in asks:
        t0 = time.time()
        c = http.client.HTTPConnection(host, port, timeout=120)
        c.request(method, path, headers=headers)
        r = c.getresponse()
        r.read()
        statuses.append(r.status)
        c.close()
        worst = max(worst, time.time() - t0)
    # the first stream is still generating: it has not sent [DONE]
    first.setblocking(False)
    try:
        while True:
            more = first.recv(1 << 20)
            if not more:
                break
            got += more
    except BlockingIOError:
        pass
    events = got.count(b"\ndata: ")
    heads = []  # each waiting stream's answer began (200) or was refused: its status line
    for s in waiting:
        s.setblocking(False)
        try:
            heads.append(s.recv(64).split(b"\r\n")[0])
        except BlockingIOError:
            heads.append(b"(nothing yet)")
    statuses += [int(h.split()[1]) if h.startswith(b"HTTP/1.1 ") else h for h in heads]
    check(f"{SLOW} streams (1 generating, {SLOW - 1} waiting for the model, {(SLOW - 1) // 2} of them not reading) "
          f"and a whole completion waiting: {len(asks)} requests that need no model answered while the first "
          f"stream was still generating ({events} events in), the slowest in {worst * 1000:.0f} ms; threads "
          f"{idle_threads} idle, {busy_threads} with the streams",
          all(st == 200 for st in statuses) and b"[DONE]" not in got, f"statuses {statuses}, [DONE] seen: {b'[DONE]' in got}")
    for s in [first, whole] + waiting:
        s.close()
    t0 = time.time()
    status = None
    while time.time() - t0 < 60:  # the places given back once the server notices
        c = http.client.HTTPConnection(host, port, timeout=60)
        c.request("POST", "/v1/completions", json.dumps({"model": MID, "prompt": "hi", "max_tokens": 1}), headers)
        r = c.getresponse()
        r.read()
        status = r.status
        if status == 200:
            break
        time.sleep(0.1)
    check(f"every client left: a one-token request answered {time.time() - t0:.1f} s later, threads "
          f"{threads_of(p.pid)}", status == 200, f"status {status}")
    p.terminate()
    p.wait(timeout=60)
    check("the server stops cleanly", p.returncode == 0, f"exit {p.returncode}")
    return 1 if failures else 0


def main():
    if SLOW:
        return slow_streams()
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
    # a sanitizer build exits non-zero on a leak or a report at exit
    check("the server stops cleanly", p.returncode == 0, f"exit {p.returncode}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
