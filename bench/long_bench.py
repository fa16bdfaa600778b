#!/usr/bin/python3
"""make bench, long inputs (issue 34): attention telemetry and the --stats/heads score sums at 2k-32k
tokens, against the same pass keeping nothing, in the same run.

Per model and length (bench/fwd_bench.c, alternated, best of R warm passes):
  - the pass keeping nothing (--none), with every head's telemetry and its 8 heaviest keys
    (--telemetry 8), and with every head's score sums (--scores: what --stats and heads keep);
    ratios against the first (target <= 1.3x);
  - peak RSS of the telemetry run against the weights file + q/k + 500 MB, where q/k is what
    keeping every head's queries and keys would take (2 x layers x heads x n x head_dim floats);
  - llama.cpp's prompt processing at the same depth (llama-bench -p N -n 0 -t 2 -r 1), an anchor:
    the llama-bench named by $LLAMA_BENCH or found on PATH, "not available" without one; the Qwen-shaped
    folder's weights go to it as an F16 GGUF (bench/make_qwen_gguf.py, cached beside the folder);
  - transformers' eager pass returning every layer's attention (bench/peer_decoder.py) where it fits:
    run under an address-space limit ($BENCH_PEER_GB, default 10 GB), so that a length it cannot hold
    fails with an allocation error, reported as such, instead of pushing the machine into swap or the
    OOM killer.

Models: the trained SmolLM2-135M-Instruct Q4_1 GGUF (tools/pymodel.sh smollm2) at 2,048 / 4,096 / 8,192
tokens, and a Qwen2.5-0.5B-shaped checkpoint (2 layers, 32,768 positions, random BF16 weights written by
transformers in the reference Python, cached in $ATTNVIZ_CACHE or ~/.cache/attnviz) at 16,384 / 32,768.

usage: bench/long_bench.py [--smollm2 N,N,...] [--qwen N,N,...] [--repeat R]
Prints a Markdown table and writes it to bench/out/long_results.md.
"""
import os
import resource
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the public header's folder and every source folder (private headers sit beside their sources)
INCLUDES = ["-I" + os.path.join(ROOT, "include")] + sorted(
    "-I" + d for d, _, fs in os.walk(os.path.join(ROOT, "src")) if any(f.endswith(".h") for f in fs))
OUT = os.path.join(ROOT, "bench", "out")
FWD = os.path.join(OUT, "fwd_bench")
CACHE = os.environ.get("ATTNVIZ_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "attnviz")
QWEN = os.path.join(CACHE, "bench-qwen2.5-shape-2l-32k")
QWEN_GGUF = os.path.join(QWEN, "qwen2.5-shape-2l-f16.gguf")  # the same weights for llama.cpp (make_qwen_gguf.py)
TOP_K = 8


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def run_limited(cmd, limit_gb):
    """(returncode, stdout, stderr) of a child whose address space is limited to limit_gb."""
    def limit():
        b = int(limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (b, b))
    p = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limit)
    return p.returncode, p.stdout, p.stderr


def fwd_run(mode, path, n, repeat):
    """(warm ms, its CPU ms, peak RSS MB, kernel) of one fwd_bench run; the RSS of that fresh fork (wait4)."""
    out = os.path.join(OUT, "long_fwd.txt")
    with open(out, "w") as f:
        pid = os.fork()
        if pid == 0:
            os.dup2(f.fileno(), 1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.execv(FWD, [FWD] + mode + [path, str(n), str(repeat)])
        _, status, ru = os.wait4(pid, 0)
    text = open(out).read()
    if status != 0 or "warm_ms=" not in text:
        sys.exit(f"long_bench: fwd_bench {' '.join(mode)} {path} {n} failed")
    return (float(text.split("warm_ms=")[1]), float(text.split("warm_cpu_ms=")[1].split()[0]), ru.ru_maxrss / 1024,
            text.split("kernel=")[1].split()[0])


def llama_bench():
    exe = os.environ.get("LLAMA_BENCH") or shutil.which("llama-bench")
    return exe if exe and os.access(exe, os.X_OK) else None


def llama_ms(exe, gguf, n):
    p = subprocess.run([exe, "-m", gguf, "-p", str(n), "-n", "0", "-t", "2", "-r", "1", "-o", "csv"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    import csv
    import io
    for r in csv.DictReader(io.StringIO(p.stdout)):
        if int(r["n_prompt"]) == n:
            return n / float(r["avg_ts"]) * 1e3, None
    return None, "no row in llama-bench's output"


def peer_ms(hfpy, path, n, limit_gb):
    if not hfpy:
        return None, "not available (no reference Python: tools/pyref.sh)"
    rc, out, err = run_limited([hfpy, os.path.join(ROOT, "bench/peer_decoder.py"), path, str(n), "--repeat", "1"],
                               limit_gb)
    if rc == 0 and "forward_ms=" in out:
        return float(out.split("forward_ms=")[1]), None
    why = "out of memory" if "memory" in err.lower() or "alloc" in err.lower() or rc < 0 else f"exit {rc}"
    return None, f"failed at {n:,} tokens ({why} under a {limit_gb:g} GB address-space limit)"


def main():
    os.makedirs(OUT, exist_ok=True)
    repeat = int(arg("--repeat", "1"))
    smol_n = [int(x) for x in arg("--smollm2", "2048,4096,8192").split(",") if x]
    qwen_n = [int(x) for x in arg("--qwen", "16384,32768").split(",") if x]
    limit_gb = float(os.environ.get("BENCH_PEER_GB", "10"))
    libs = subprocess.run(["pkg-config", "--cflags", "--libs", "libcjson", "libutf8proc", "openblas", "zlib",
                           "oniguruma", "libpng", "libjpeg"], capture_output=True, text=True).stdout.split()
    subprocess.run(["cc", "-O2"] + INCLUDES + [os.path.join(ROOT, "bench/fwd_bench.c"),
                    os.path.join(ROOT, "build/libattnviz.a"), "-o", FWD] + libs + ["-lm", "-lpthread"], check=True)
    hfpy = subprocess.run([os.path.join(ROOT, "tools/pyref.sh"), "--check"], capture_output=True,
                          text=True).stdout.strip()
    cases = []
    gguf_dir = subprocess.run([os.path.join(ROOT, "tools/pymodel.sh"), "smollm2"], capture_output=True,
                              text=True).stdout.strip()
    if gguf_dir and smol_n:
        g = os.path.join(gguf_dir, "SmolLM2-135M-Instruct.Q4_1.gguf")
        cases.append(("SmolLM2-135M-Instruct Q4_1 GGUF", g, g, smol_n, (30, 9, 3, 64)))
    elif smol_n:
        print("long_bench: SmolLM2 GGUF not available (tools/pymodel.sh smollm2 failed): its rows are skipped",
              file=sys.stderr)
    if qwen_n:
        if not os.path.exists(os.path.join(QWEN, "model.safetensors")):
            if not hfpy:
                sys.exit("long_bench: the Qwen2.5-shaped checkpoint needs the reference Python (tools/pyref.sh)")
            print(f"long_bench: writing a Qwen2.5-shaped checkpoint (2 layers, 32k positions) to {QWEN} ...",
                  file=sys.stderr)
            subprocess.run([hfpy, os.path.join(ROOT, "bench/peer_decoder.py"), "--make-qwen", QWEN, "2"], check=True)
        if not os.path.exists(QWEN_GGUF) and hfpy:
            subprocess.run([hfpy, os.path.join(ROOT, "bench/make_qwen_gguf.py"), QWEN, QWEN_GGUF], check=True)
        cases.append(("Qwen2.5-0.5B shape, 2 layers, BF16 folder", QWEN, QWEN_GGUF, qwen_n, (2, 14, 2, 64)))
    exe = llama_bench()
    rows = []
    kernel = "?"
    for label, path, llama_path, lengths, (L, H, KV, dh) in cases:
        file_mb = (os.path.getsize(path) if os.path.isfile(path)
                   else os.path.getsize(os.path.join(path, "model.safetensors"))) / 2**20
        for n in lengths:
            best = {"none": float("inf"), "tel": float("inf"), "scores": float("inf")}
            cpu = dict(best)
            rss = {}
            for _ in range(max(1, repeat)):  # alternated, so that the machine's drift falls on all three
                for key, mode in (("none", ["--none"]), ("tel", ["--telemetry", str(TOP_K)]), ("scores", ["--scores"])):
                    ms, cms, mb, kernel = fwd_run(mode, path, n, 1)
                    best[key] = min(best[key], ms)
                    cpu[key] = min(cpu[key], cms)
                    rss[key] = max(rss.get(key, 0), mb)
            qk_mb = 2 * L * H * n * dh * 4 / 2**20
            target = file_mb + qk_mb + 500
            if not exe:
                llama = "not available (no llama-bench: set LLAMA_BENCH or put it on PATH)"
            elif not os.path.exists(llama_path):
                llama = "not available (no GGUF of this checkpoint: bench/make_qwen_gguf.py needs the reference Python)"
            else:
                ms, why = llama_ms(exe, llama_path, n)
                llama = f"{ms:.0f} ms" if ms else f"failed: {why}"
            pm, why = peer_ms(hfpy, path, n, limit_gb)
            peer = f"{pm:.0f} ms" if pm else why
            rows.append(f"| {label}, {n:,} tokens | {best['none']:.0f} ms | {best['tel']:.0f} ms "
                        f"(**{best['tel'] / best['none']:.2f}x**; CPU time {cpu['tel'] / cpu['none']:.2f}x) | "
                        f"{best['scores']:.0f} ms (**{best['scores'] / best['none']:.2f}x**; CPU time "
                        f"{cpu['scores'] / cpu['none']:.2f}x) | {rss['tel']:.0f} MB / {rss['scores']:.0f} MB "
                        f"| {target:.0f} MB ({file_mb:.0f} + {qk_mb:.0f} + 500) | {llama} | {peer} |")
            print(rows[-1], file=sys.stderr, flush=True)
    lines = [f"Long inputs (bench/long_bench.py; attnviz's {kernel} kernels, 2 threads; best of {max(1, repeat)} "
             f"warm pass{'es' if repeat > 1 else ''}, alternated): every head of every layer; telemetry with its "
             f"{TOP_K} heaviest keys per row; target <= 1.3x the pass keeping nothing (the CPU time of the best "
             "passes beside the wall-clock ratio: a loaded machine inflates the latter).", "",
             "| input | pass keeping nothing | with telemetry | with the score sums (--stats, heads) | peak RSS "
             "(telemetry / score sums) | weights file + q/k + 500 MB | llama.cpp prompt processing | "
             "transformers eager, attention returned |",
             "|---|---|---|---|---|---|---|---|"] + rows
    report = "\n".join(lines)
    print(report)
    open(os.path.join(OUT, "long_results.md"), "w").write(report + "\n")


if __name__ == "__main__":
    main()
