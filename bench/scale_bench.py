#!/usr/bin/python3
"""make bench, the models people run locally (issue 50): GGUF files at the published shapes of Llama-3.1-8B
(Q4_K_M and Q8_0), Qwen2.5-7B (Q4_K_M), Mistral-7B (Q4_K_M) and gpt-oss-20b (MXFP4 experts), written by
bench/make_shape_gguf.py (random well-formed weights, the real tokenizers) into $ATTNVIZ_SHAPES (default
~/.cache/attnviz/shapes; 36 GB for the five, made once: about 2 minutes per 5 GB), never into the repo.

Per shape and length (512, 2,048 and 8,192 tokens), on the native path and on the AVX2 path
(ATTNVIZ_KERNEL=avx2, llama.cpp's AVX2 build, OPENBLAS_CORETYPE=Haswell):
  - attnviz's pass capturing every head's statistics and 8 heaviest keys (bench/fwd_bench.c --telemetry 8,
    the weights held as a process of many passes holds them): the best of R warm passes, and the first;
  - its memory: peak RSS of the process, and the anonymous and file-backed (mapped weights) parts after
    the passes (/proc/self/status), against the file's size;
  - GFLOP/s (the multiply-adds the pass makes: every layer's projections and causal attention, every MLP
    but the last layer's, which no capture needs; a mixture's chosen experts) and its share of this
    machine's measured peak on that path (bench/peak.c);
  - llama.cpp's prompt processing of the same file and length (llama-bench -p N -n 0 -t 2 -r R, the
    build of that path: $LLAMA_CPP_NATIVE, $LLAMA_CPP_AVX2, default /work/llamacpp/build-{native,avx2}/bin)
    and attnviz's time against it;
then per shape, native path: generation (attnviz --generate 64 on a 2-token prompt, every step's attention
captured, --profile's forward time) against llama-bench -p 0 -n 64; and for the first shape, 512 tokens:
one thread against two (OPENBLAS_NUM_THREADS=1 and llama-bench -t 1).

usage: bench/scale_bench.py [--shapes S,S...] [--lengths N,N...] [--rounds R] [--layers L] [--paths native,avx2]
  --layers L: the shapes cut to L layers (files *-Ll.gguf; a quick check that every row runs end to end)
Prints a Markdown table and writes it to bench/out/scale_results.md.
"""
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
# the public header's folder and every source folder (private headers sit beside their sources)
INCLUDES = ["-I" + os.path.join(ROOT, "include")] + sorted(
    "-I" + d for d, _, fs in os.walk(os.path.join(ROOT, "src")) if any(f.endswith(".h") for f in fs))
FWD = os.path.join(OUT, "fwd_bench")
PEAK = os.path.join(OUT, "peak")
CACHE = os.environ.get("ATTNVIZ_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "attnviz")
SHAPES_DIR = os.environ.get("ATTNVIZ_SHAPES") or os.path.join(CACHE, "shapes")
LLAMA = {"native": os.environ.get("LLAMA_CPP_NATIVE", "/work/llamacpp/build-native/bin"),
         "avx2": os.environ.get("LLAMA_CPP_AVX2", "/work/llamacpp/build-avx2/bin")}
ALL = [("llama31-8b", "q4_k_m"), ("llama31-8b", "q8_0"), ("qwen25-7b", "q4_k_m"), ("mistral-7b", "q4_k_m"),
       ("gptoss-20b", "mxfp4")]
TOP_K = 8
GEN_NEW = 64


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def run(cmd, env=None, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        sys.exit(f"scale_bench: {' '.join(cmd[:6])} ... failed: {p.stderr.strip()[-400:]}")
    return p


def env_for(path, threads=None):
    e = dict(os.environ)
    for k in ("ATTNVIZ_KERNEL", "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS"):
        e.pop(k, None)
    if path == "avx2":
        e["ATTNVIZ_KERNEL"] = "avx2"
        e["OPENBLAS_CORETYPE"] = "Haswell"
    if threads:
        e["OPENBLAS_NUM_THREADS"] = str(threads)
    return e


def pyref():
    p = subprocess.run([os.path.join(ROOT, "tools/pyref.sh"), "--check"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("scale_bench: the reference Python is not built (tools/pyref.sh): it writes the shapes")
    return p.stdout.strip()


def shape_file(shape, quant, layers):
    name = f"{shape}-{quant}" + (f"-{layers}l" if layers else "") + ".gguf"
    path = os.path.join(SHAPES_DIR, name)
    if os.path.exists(path):
        return path
    short = os.path.join(SHAPES_DIR, f"{shape}-{layers}l.gguf")  # a cut file of the shape's own type, named short
    if layers and quant == ("mxfp4" if shape.startswith("gptoss") else "q4_k_m") and os.path.exists(short):
        return short
    os.makedirs(SHAPES_DIR, exist_ok=True)
    print(f"scale_bench: writing {path} (bench/make_shape_gguf.py) ...", file=sys.stderr)
    cmd = [pyref(), os.path.join(ROOT, "bench/make_shape_gguf.py"), shape, quant, path + ".tmp"]
    run(cmd + (["--layers", str(layers)] if layers else []))
    os.rename(path + ".tmp", path)
    return path


def flops(sh, n, layers):
    """Multiply-adds x 2 of fwd_bench's telemetry pass over n tokens: every layer's q/k/v/o and causal
    attention (a sliding layer's window bounds its keys), every layer's MLP but the last (the capture
    needs nothing after the last attention); a mixture: its router and the chosen experts."""
    H, dh, nh, kv = sh["hidden"], sh["head_dim"], sh["heads"], sh["kv"]
    proj = 2 * n * (H * nh * dh * 2 + 2 * H * kv * dh)
    keys = n * (n + 1) / 2
    if sh.get("window"):
        w = sh["window"]
        sliding = sum(min(i + 1, w) for i in range(n))
    total = 0.0
    for l in range(layers):
        k = sliding if sh.get("window") and l % 2 == 0 else keys
        total += proj + 2 * 2 * nh * dh * k
        if l < layers - 1:
            if sh.get("experts"):
                total += 2 * n * (3 * H * sh["ff"] * sh["used"] + H * sh["experts"])
            else:
                total += 2 * n * 3 * H * sh["ff"]
    return total


def fwd(path, n, rounds, kpath, threads=None):
    """fwd_bench's fields and the process's peak RSS (MB)."""
    pid = os.fork()
    outp = os.path.join(OUT, "scale_fwd.txt")
    if pid == 0:
        fd = os.open(outp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        err = os.open(outp + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(err, 2)
        os.execve(FWD, [FWD, "--telemetry", str(TOP_K), path, str(n), str(rounds)], env_for(kpath, threads))
    _, status, ru = os.wait4(pid, 0)
    text = open(outp).read()
    if status != 0 or "warm_ms=" not in text:
        sys.exit(f"scale_bench: fwd_bench {path} {n} failed: {open(outp + '.err').read()[-400:]}")
    f = dict(kv.split("=", 1) for kv in text.split() if "=" in kv)
    f["peak_mb"] = ru.ru_maxrss / 1024
    return f


def llama_bench(kpath, path, p, n_gen, rounds, threads=2):
    exe = os.path.join(LLAMA[kpath], "llama-bench")
    if not os.access(exe, os.X_OK):
        return None
    r = run([exe, "-m", path, "-p", str(p), "-n", str(n_gen), "-t", str(threads), "-r", str(rounds), "-o", "json"],
            env=env_for(kpath), check=False)
    if r.returncode != 0:
        return None
    for row in json.loads(r.stdout):
        return row["avg_ts"]  # tokens/s of the one test asked
    return None


def generation(path, kpath):
    """attnviz's tokens/s over its generated tokens (--profile's forward time, the 2-token prompt's pass included)."""
    out = os.path.join(OUT, "scale_gen.json")
    p = run([os.path.join(ROOT, "attnviz"), "--model", path, "--quiet", "--profile", "--generate", str(GEN_NEW),
             "--json", out, "hi there"], env=env_for(kpath))
    ms = float(p.stderr.split("forward_ms=")[1].split()[0])
    got = json.load(open(out))["generation"]["generated_tokens"]
    return got / (ms / 1e3), got


def shapes_table():
    """make_shape_gguf.py's SHAPES (read from its source: this runs without the gguf package)."""
    src = open(os.path.join(ROOT, "bench/make_shape_gguf.py")).read()
    start = src.index("SHAPES = {")
    end = src.index("\n}\n", start) + 3
    scope = {"dict": dict}
    exec(src[start:end], scope)
    return scope["SHAPES"]


def main():
    SHAPES = shapes_table()
    os.makedirs(OUT, exist_ok=True)
    want = arg("--shapes", None)
    shapes = [s for s in ALL if not want or f"{s[0]}:{s[1]}" in want.split(",") or s[0] in want.split(",")]
    lengths = [int(x) for x in arg("--lengths", "512,2048,8192").split(",")]
    rounds = int(arg("--rounds", "3"))
    layers = int(arg("--layers", "0"))
    paths = arg("--paths", "native,avx2").split(",")
    libs = subprocess.run(["pkg-config", "--cflags", "--libs", "libcjson", "libutf8proc", "openblas", "zlib", "oniguruma",
                           "libpng", "libjpeg"], capture_output=True, text=True).stdout.split()
    run(["make", "-s", "-C", ROOT, "-j2", "attnviz", "build/libattnviz.a"])
    run(["cc", "-O2"] + INCLUDES + [os.path.join(ROOT, "bench/fwd_bench.c"),
         os.path.join(ROOT, "build/libattnviz.a"), "-o", FWD] + libs + ["-lm", "-lpthread"])
    run(["cc", "-O2", os.path.join(ROOT, "bench/peak.c"), "-o", PEAK, "-lpthread"])
    peaks = {}
    for kp in paths:
        p = run([PEAK] + (["avx2"] if kp == "avx2" else []))
        peaks[kp] = (float(p.stdout.split("peak_gflops=")[1].split()[0]), p.stdout.split("isa=")[1].split()[0])
    free_gb = shutil.disk_usage(os.path.dirname(SHAPES_DIR) if not os.path.exists(SHAPES_DIR) else SHAPES_DIR).free / 1e9
    print(f"scale_bench: shapes in {SHAPES_DIR} ({free_gb:.0f} GB free)", file=sys.stderr)
    t_start = time.time()
    rows = ["| shape | tokens | path | attnviz pass (best of %d; first) | peak RSS (anon / file; weights file) | GFLOP/s "
            "(share of peak) | llama.cpp pp | attnviz vs llama.cpp |" % rounds,
            "|---|---|---|---|---|---|---|---|"]
    gen_rows, thread_rows = [], []
    for si, (shape, quant) in enumerate(shapes):
        sh = SHAPES[shape]
        path = shape_file(shape, quant, layers)
        L = layers or sh["layers"]
        size_mb = os.path.getsize(path) / 1e6
        label = f"{shape} {quant}" + (f" ({L} layers)" if layers else "")
        for n in lengths:
            for kp in paths:
                f = fwd(path, n, rounds, kp)
                ms = float(f["warm_ms"])
                gf = flops(sh, n, L) / (ms / 1e3) / 1e9
                pk, isa = peaks[kp]
                ts = llama_bench(kp, path, n, 0, rounds)
                theirs = f"{n / ts * 1e3:.0f} ms ({ts:.0f} tok/s)" if ts else "not available"
                ratio = f"**{ms / (n / ts * 1e3):.2f}x**" if ts else ""
                rows.append(f"| {label} | {n} | {kp} ({f['kernel']}) | {ms:.0f} ms; {float(f['cold_ms']):.0f} | "
                            f"{f['peak_mb']:.0f} MB ({f['anon_mb']} / {f['file_mb']}; {size_mb:.0f}) | "
                            f"{gf:.0f} ({100 * gf / pk:.0f}% of {pk:.0f}, {isa}) | {theirs} | {ratio} |")
                print(rows[-1], file=sys.stderr)
        tps, got = generation(path, "native")
        lts = llama_bench("native", path, 0, GEN_NEW, rounds)
        gen_rows.append(f"| {label} | {tps:.2f} tok/s ({got} tokens) | " + (f"{lts:.2f} tok/s | **{lts / tps:.2f}x** |"
                                                                             if lts else "not available | |"))
        print(gen_rows[-1], file=sys.stderr)
        if si == 0:
            one, two = fwd(path, 512, rounds, "native", 1), fwd(path, 512, rounds, "native", 2)
            l1, l2 = llama_bench("native", path, 512, 0, rounds, 1), llama_bench("native", path, 512, 0, rounds, 2)
            s1, s2 = float(one["warm_ms"]), float(two["warm_ms"])
            thread_rows.append(f"| {label}, 512 tokens | {s1:.0f} ms | {s2:.0f} ms | **{s1 / s2:.2f}x** | " +
                               (f"{512 / l1 * 1e3:.0f} ms | {512 / l2 * 1e3:.0f} ms | **{l2 / l1:.2f}x** |" if l1 and l2
                                else "not available | | |"))
    text = "\n".join(
        [f"Machine: {os.cpu_count()} cores; measured peaks " +
         ", ".join(f"{v[0]:.0f} GFLOP/s ({k}: {v[1]} multiply-adds on every core)" for k, v in peaks.items()) +
         f"; llama.cpp from {', '.join(LLAMA[k] for k in paths)}; {rounds} rounds; {time.time() - t_start:.0f} s.", ""]
        + rows + ["", "| generation (native, every step's attention) | attnviz | llama.cpp tg | llama.cpp vs attnviz "
                  "(tokens/s) |", "|---|---|---|---|"] + gen_rows
        + ["", "| threads | attnviz 1 | attnviz 2 | speed-up | llama.cpp 1 | llama.cpp 2 | speed-up |",
           "|---|---|---|---|---|---|---|"] + thread_rows) + "\n"
    print(text)
    with open(os.path.join(OUT, "scale_results.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
